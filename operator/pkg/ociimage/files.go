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

// file is one entry of a layer; data == nil with mode's dir bit makes a
// directory. Every entry belongs to root unless uid/gid say otherwise.
type file struct {
	path     string
	mode     fs.FileMode
	data     []byte
	uid, gid int
	// link is the target of a symbolic link (mode has fs.ModeSymlink).
	link string
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
func baseFiles(caCerts []byte) []file {
	return []file{
		{path: "etc", mode: fs.ModeDir | 0o755},
		{path: "etc/group", mode: 0o644, data: group()},
		{path: "etc/passwd", mode: 0o644, data: passwd()},
		{path: "etc/ssl", mode: fs.ModeDir | 0o755},
		{path: "etc/ssl/certs", mode: fs.ModeDir | 0o755},
		{path: CACertsPath[1:], mode: 0o644, data: caCerts},
		{path: "tmp", mode: fs.ModeDir | fs.ModeSticky | 0o777},
	}
}

// writeTar writes files in the given order with fixed timestamps and
// numeric owners only, so the bytes depend on nothing but the inputs.
func writeTar(w io.Writer, files []file, modTime time.Time) error {
	tw := tar.NewWriter(w)
	for _, f := range files {
		h := &tar.Header{
			Name:    f.path,
			Mode:    int64(f.mode.Perm()),
			Uid:     f.uid,
			Gid:     f.gid,
			ModTime: modTime,
		}
		if f.mode&fs.ModeSticky != 0 {
			h.Mode |= 0o1000 // c_ISVTX
		}
		switch {
		case f.mode.IsDir():
			h.Typeflag = tar.TypeDir
			h.Name = path.Clean(f.path) + "/"
		case f.mode&fs.ModeSymlink != 0:
			h.Typeflag = tar.TypeSymlink
			h.Linkname = f.link
		default:
			h.Typeflag = tar.TypeReg
			h.Size = int64(len(f.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return fmt.Errorf("%s: %w", f.path, err)
		}
		if _, err := tw.Write(f.data); err != nil {
			return fmt.Errorf("%s: %w", f.path, err)
		}
	}
	return tw.Close()
}
