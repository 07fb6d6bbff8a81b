package localimage

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/kyma-project/serverless-manager/operator/pkg/ociimage"
)

// tree is the files of one layer, each with its parent directories.
type tree map[string]ociimage.File

func (t tree) add(f ociimage.File) {
	f.Path = strings.TrimPrefix(path.Clean("/"+f.Path), "/")
	for dir := path.Dir(f.Path); dir != "." && dir != "/"; dir = path.Dir(dir) {
		if _, ok := t[dir]; !ok {
			t[dir] = ociimage.File{Path: dir, Mode: fs.ModeDir | 0o755}
		}
	}
	t[f.Path] = f
}

func (t tree) dir(p string, mode fs.FileMode) { t.add(ociimage.File{Path: p, Mode: fs.ModeDir | mode}) }

func (t tree) file(p string, mode fs.FileMode, data []byte) {
	t.add(ociimage.File{Path: p, Mode: mode, Data: data})
}

func (t tree) symlink(p, target string) {
	t.add(ociimage.File{Path: p, Mode: fs.ModeSymlink | 0o777, Link: target})
}

// hostFile copies a file of this machine (its symbolic links followed) to
// dst, keeping its permissions.
func (t tree) hostFile(src, dst string) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	info, err := os.Stat(src)
	if err != nil {
		return err
	}
	t.file(dst, info.Mode().Perm(), data)
	return nil
}

// hostBinary copies a dynamically linked program or library of this
// machine to dst with the shared libraries it loads, where the loader
// looks for them (the paths ldd prints).
func (t tree) hostBinary(src, dst string) error {
	if err := t.hostFile(src, dst); err != nil {
		return err
	}
	return t.sharedLibraries(src)
}

func (t tree) sharedLibraries(binary string) error {
	out, err := exec.Command("ldd", binary).Output()
	if err != nil {
		// a static binary: "not a dynamic executable", exit 1
		if bytes.Contains(out, []byte("not a dynamic")) || isExitError(err) {
			return nil
		}
		return fmt.Errorf("ldd %s: %w", binary, err)
	}
	s := bufio.NewScanner(bytes.NewReader(out))
	for s.Scan() {
		// "libm.so.6 => /lib/x86_64-linux-gnu/libm.so.6 (0x...)" or
		// "/lib64/ld-linux-x86-64.so.2 (0x...)"
		fields := strings.Fields(s.Text())
		var lib string
		switch {
		case len(fields) >= 3 && fields[1] == "=>" && strings.HasPrefix(fields[2], "/"):
			lib = fields[2]
		case len(fields) >= 1 && strings.HasPrefix(fields[0], "/"):
			lib = fields[0]
		default:
			continue
		}
		if _, ok := t[strings.TrimPrefix(lib, "/")]; ok {
			continue
		}
		if err := t.hostFile(lib, lib); err != nil {
			return fmt.Errorf("library %s of %s: %w", lib, binary, err)
		}
	}
	return s.Err()
}

func isExitError(err error) bool {
	_, ok := err.(*exec.ExitError)
	return ok
}

// hostDir copies the tree below src to dst; skip leaves out a relative
// path (and what is below it).
func (t tree) hostDir(src, dst string, skip func(rel string) bool) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		if rel != "." && skip != nil && skip(filepath.ToSlash(rel)) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		target := path.Join(dst, filepath.ToSlash(rel))
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch mode := info.Mode(); {
		case mode.IsDir():
			t.dir(target, mode.Perm())
		case mode&fs.ModeSymlink != 0:
			link, err := os.Readlink(p)
			if err != nil {
				return err
			}
			t.symlink(target, link)
		case mode.IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			t.file(target, mode.Perm(), data)
		}
		return nil
	})
}

// layer is the tree as a layer, in path order.
func (t tree) layer(created time.Time) (v1.Layer, error) {
	paths := make([]string, 0, len(t))
	for p := range t {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	files := make([]ociimage.File, 0, len(paths))
	for _, p := range paths {
		files = append(files, t[p])
	}
	return ociimage.Layer(files, created)
}
