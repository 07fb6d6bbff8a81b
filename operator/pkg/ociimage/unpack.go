package ociimage

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// Entry is one file of an image's flattened filesystem.
type Entry struct {
	Header *tar.Header
	// Data of a regular file.
	Data []byte
}

// Files lists the flattened filesystem of img by path (without leading
// slash), as a container would see it.
func Files(img v1.Image) (map[string]Entry, error) {
	rc := mutate.Extract(img)
	defer func() { _ = rc.Close() }()
	files := map[string]Entry{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading the image's filesystem: %w", err)
		}
		e := Entry{Header: h}
		if h.Typeflag == tar.TypeReg {
			if e.Data, err = io.ReadAll(tr); err != nil {
				return nil, fmt.Errorf("%s: %w", h.Name, err)
			}
		}
		files[strings.TrimSuffix(h.Name, "/")] = e
	}
}

// Unpack writes the flattened filesystem of img under dir (directories and
// regular files with their modes, owners when run as root), e.g. to run
// its binary with dir as root directory.
func Unpack(img v1.Image, dir string) error {
	files, err := Files(img)
	if err != nil {
		return err
	}
	// a parent sorts before its children
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, p := range paths {
		h := files[p].Header
		target := filepath.Join(dir, filepath.FromSlash(p))
		if !strings.HasPrefix(target, filepath.Clean(dir)+string(filepath.Separator)) {
			return fmt.Errorf("%s: outside the root", h.Name)
		}
		mode := fs.FileMode(h.Mode).Perm()
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.WriteFile(target, files[p].Data, mode); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%s: unsupported type %q", h.Name, h.Typeflag)
		}
		if os.Geteuid() == 0 {
			if err := os.Lchown(target, h.Uid, h.Gid); err != nil {
				return err
			}
		}
		// chmod after chown: chown clears setuid/setgid, and sticky needs chmod
		if err := os.Chmod(target, mode|stickyBit(h.Mode)); err != nil {
			return err
		}
	}
	return nil
}

func stickyBit(mode int64) fs.FileMode {
	if mode&0o1000 != 0 {
		return fs.ModeSticky
	}
	return 0
}
