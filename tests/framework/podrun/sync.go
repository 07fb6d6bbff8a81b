package podrun

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// dataDir is the symlink kubelet swaps atomically on every update of a
// ConfigMap or Secret volume; the visible files are links through it, so a
// reader sees either the old or the new set of files, never a mix.
const dataDir = "..data"

// Sync writes every ConfigMap and Secret volume from the cluster's current
// objects, the way kubelet's atomic writer does (a new timestamped directory,
// then one rename of the ..data symlink), and reports whether anything
// changed. Unchanged volumes are not touched, so file watchers see events
// only for real changes.
func (p *Plan) Sync(ctx context.Context, c client.Reader) (bool, error) {
	changed := false
	for _, v := range p.volumes {
		data, _, err := readData(ctx, c, v.kind, p.Namespace, v.name, v.optional)
		if err != nil {
			return changed, err
		}
		files, err := v.files(data)
		if err != nil {
			return changed, err
		}
		ch, err := writeAtomically(v.dir, files)
		if err != nil {
			return changed, fmt.Errorf("writing %s %s to %s: %w", v.kind, v.name, v.dir, err)
		}
		changed = changed || ch
	}
	return changed, nil
}

// Keep calls Sync every interval until ctx ends; errors (e.g. the API server
// restarting) go to report and the next round tries again, as kubelet would.
func (p *Plan) Keep(ctx context.Context, c client.Reader, interval time.Duration, report func(error)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if _, err := p.Sync(ctx, c); err != nil && ctx.Err() == nil && report != nil {
				report(err)
			}
		}
	}
}

// files maps the volume's relative paths to their content: every key, or
// only the listed items under their paths.
func (v volume) files(data map[string][]byte) (map[string][]byte, error) {
	out := map[string][]byte{}
	if len(v.items) == 0 {
		for k, d := range data {
			out[k] = d
		}
		return out, nil
	}
	for _, it := range v.items {
		d, ok := data[it.Key]
		if !ok {
			if v.optional {
				continue
			}
			return nil, fmt.Errorf("%s %s has no key %s", v.kind, v.name, it.Key)
		}
		out[it.Path] = d
	}
	return out, nil
}

func writeAtomically(dir string, files map[string][]byte) (bool, error) {
	if same(dir, files) {
		return false, nil
	}
	old, _ := os.Readlink(filepath.Join(dir, dataDir))
	ts, err := os.MkdirTemp(dir, ".."+time.Now().Format("2006_01_02_15_04_05."))
	if err != nil {
		return false, err
	}
	for name, content := range files {
		path := filepath.Join(ts, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return false, err
		}
		if err := os.WriteFile(path, content, 0o644); err != nil {
			return false, err
		}
	}
	tmpLink := filepath.Join(dir, "..data_tmp")
	_ = os.Remove(tmpLink)
	if err := os.Symlink(filepath.Base(ts), tmpLink); err != nil {
		return false, err
	}
	if err := os.Rename(tmpLink, filepath.Join(dir, dataDir)); err != nil {
		return false, err
	}
	// top-level names link through ..data; names that left the object go
	for name := range files {
		top := strings.SplitN(filepath.ToSlash(name), "/", 2)[0]
		link := filepath.Join(dir, top)
		if target, err := os.Readlink(link); err == nil && target == filepath.Join(dataDir, top) {
			continue
		}
		_ = os.RemoveAll(link)
		if err := os.Symlink(filepath.Join(dataDir, top), link); err != nil {
			return false, err
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false, err
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "..") {
			continue
		}
		if _, ok := files[e.Name()]; !ok && !hasPrefixDir(files, e.Name()) {
			_ = os.RemoveAll(filepath.Join(dir, e.Name()))
		}
	}
	if old != "" && old != filepath.Base(ts) {
		_ = os.RemoveAll(filepath.Join(dir, old))
	}
	return true, nil
}

func hasPrefixDir(files map[string][]byte, top string) bool {
	for name := range files {
		if strings.HasPrefix(filepath.ToSlash(name), top+"/") {
			return true
		}
	}
	return false
}

// same reports whether dir already shows exactly files through ..data.
func same(dir string, files map[string][]byte) bool {
	data := filepath.Join(dir, dataDir)
	if _, err := os.Stat(data); err != nil {
		return false
	}
	var have []string
	err := filepath.WalkDir(data+"/", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(data, path)
		have = append(have, filepath.ToSlash(rel))
		return nil
	})
	if err != nil || len(have) != len(files) {
		return false
	}
	sort.Strings(have)
	for _, name := range have {
		want, ok := files[name]
		if !ok {
			return false
		}
		got, err := os.ReadFile(filepath.Join(data, filepath.FromSlash(name)))
		if err != nil || !bytes.Equal(got, want) {
			return false
		}
	}
	return true
}
