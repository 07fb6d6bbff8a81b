package ociimage

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// DirLayer is a layer holding the tree below dir at target (an absolute
// path in the image): directories, regular files and symbolic links in
// lexical order, owned by root, with the permissions they have and every
// timestamp set to created, so the same tree always gives the same digest.
// The parents of target are left to the image below.
func DirLayer(dir, target string, created time.Time) (v1.Layer, error) {
	files, err := dirFiles(dir, path.Clean("/" + target)[1:])
	if err != nil {
		return nil, fmt.Errorf("layer of %s: %w", dir, err)
	}
	return layer(files, created.UTC())
}

func dirFiles(dir, target string) ([]File, error) {
	var files []File
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		name := path.Join(target, filepath.ToSlash(rel))
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch mode := info.Mode(); {
		case mode.IsDir():
			if name != "" {
				files = append(files, File{Path: name, Mode: fs.ModeDir | mode.Perm()})
			}
		case mode&fs.ModeSymlink != 0:
			link, err := os.Readlink(p)
			if err != nil {
				return err
			}
			files = append(files, File{Path: name, Mode: fs.ModeSymlink | 0o777, Link: link})
		case mode.IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			files = append(files, File{Path: name, Mode: mode.Perm(), Data: data})
		default:
			return fmt.Errorf("%s: %s is neither a file, a directory nor a symbolic link", rel, mode.Type())
		}
		return nil
	})
	return files, err
}

// EmptyLayer is a layer without files, e.g. for dependencies of a Function
// that has none, so every image built the same way has the same layers.
func EmptyLayer(created time.Time) (v1.Layer, error) {
	return layer(nil, created.UTC())
}
