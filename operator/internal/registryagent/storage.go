package registryagent

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"syscall"

	api "github.com/kyma-project/serverless-manager/operator/pkg/registryagent"
)

// Layout of distribution's filesystem storage under its root directory.
const (
	layoutRoot   = "docker/registry/v2"
	blobsDir     = layoutRoot + "/blobs"
	reposDir     = layoutRoot + "/repositories"
	manifestsDir = "_manifests"
)

// Measure walks the storage root: its bytes, repositories, tags, manifest
// revisions and blobs, plus the volume's size. A missing root is an empty
// registry. Files that vanish during the walk (an upload finishing) are
// skipped.
func Measure(root string) (api.Usage, error) {
	u, err := walk(root)
	if err != nil {
		return api.Usage{}, err
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(root, &st); err != nil {
		return api.Usage{}, fmt.Errorf("statfs %s: %w", root, err)
	}
	u.TotalBytes = int64(st.Blocks) * int64(st.Bsize)     //nolint:gosec // block counts fit
	u.AvailableBytes = int64(st.Bavail) * int64(st.Bsize) //nolint:gosec // block counts fit
	return u, nil
}

func walk(root string) (api.Usage, error) {
	var u api.Usage
	repos := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		u.UsedBytes += info.Size()
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if rest, ok := strings.CutPrefix(rel, blobsDir+"/"); ok && strings.HasSuffix(rest, "/data") {
			u.Blobs++
		}
		if rest, ok := strings.CutPrefix(rel, reposDir+"/"); ok {
			countRepoFile(rest, repos, &u)
		}
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return api.Usage{}, fmt.Errorf("walking %s: %w", root, err)
	}
	u.Repositories = len(repos)
	return u, nil
}

// countRepoFile counts a file of repositories/: a repository's name may
// have several path elements, its own directories start with "_".
// <name>/_manifests/tags/<tag>/current/link is a tag,
// <name>/_manifests/revisions/<algorithm>/<hex>/link a manifest revision.
func countRepoFile(rel string, repos map[string]bool, u *api.Usage) {
	parts := strings.Split(rel, "/")
	i := 0
	for i < len(parts) && parts[i] != manifestsDir {
		i++
	}
	if i == 0 || i == len(parts) {
		return
	}
	repos[strings.Join(parts[:i], "/")] = true
	under := parts[i+1:]
	switch {
	case len(under) == 4 && under[0] == "tags" && under[2] == "current" && under[3] == "link":
		u.TaggedImages++
	case len(under) == 4 && under[0] == "revisions" && under[3] == "link":
		u.Manifests++
	}
}
