package ociimage

import (
	"archive/tar"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strconv"
	"time"
)

// File is one entry of a layer: Path relative to the image's root; Mode's
// directory bit makes a directory, its symlink bit a symbolic link to Link,
// otherwise a regular file holding Data. Every entry belongs to root unless
// UID/GID say otherwise.
type File struct {
	Path     string
	Mode     fs.FileMode
	Data     []byte
	UID, GID int
	Link     string
}

// passwd and group name root and the non-root user the images run as. The
// non-root user's home is /tmp: with a read-only root filesystem it is the
// only place a process can write.
func passwd() []byte {
	id := strconv.Itoa(NonrootID)
	return []byte("root:x:0:0:root:/root:/sbin/nologin\n" +
		"nonroot:x:" + id + ":" + id + ":nonroot:/tmp:/sbin/nologin\n")
}

func group() []byte {
	return []byte("root:x:0:\nnonroot:x:" + strconv.Itoa(NonrootID) + ":\n")
}

// baseFiles are what every image holds besides its binary. /tmp is empty
// and writable by everyone (sticky, like any /tmp): the mount point for a
// writable volume when the root filesystem is read-only.
func baseFiles(caCerts []byte) []File {
	return []File{
		{Path: "etc", Mode: fs.ModeDir | 0o755},
		{Path: "etc/group", Mode: 0o644, Data: group()},
		{Path: "etc/passwd", Mode: 0o644, Data: passwd()},
		{Path: "etc/ssl", Mode: fs.ModeDir | 0o755},
		{Path: "etc/ssl/certs", Mode: fs.ModeDir | 0o755},
		{Path: CACertsPath[1:], Mode: 0o644, Data: caCerts},
		{Path: "tmp", Mode: fs.ModeDir | fs.ModeSticky | 0o777},
	}
}

// writeTar writes files in the given order with fixed timestamps and
// numeric owners only, so the bytes depend on nothing but the inputs.
func writeTar(w io.Writer, files []File, modTime time.Time) error {
	tw := tar.NewWriter(w)
	for _, f := range files {
		h := &tar.Header{
			Name:    f.Path,
			Mode:    int64(f.Mode.Perm()),
			Uid:     f.UID,
			Gid:     f.GID,
			ModTime: modTime,
		}
		if f.Mode&fs.ModeSticky != 0 {
			h.Mode |= 0o1000 // c_ISVTX
		}
		switch {
		case f.Mode.IsDir():
			h.Typeflag = tar.TypeDir
			h.Name = path.Clean(f.Path) + "/"
		case f.Mode&fs.ModeSymlink != 0:
			h.Typeflag = tar.TypeSymlink
			h.Linkname = f.Link
		default:
			h.Typeflag = tar.TypeReg
			h.Size = int64(len(f.Data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return fmt.Errorf("%s: %w", f.Path, err)
		}
		if _, err := tw.Write(f.Data); err != nil {
			return fmt.Errorf("%s: %w", f.Path, err)
		}
	}
	return tw.Close()
}
