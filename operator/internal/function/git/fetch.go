package git

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// FetchOptions say what Fetch writes where.
type FetchOptions struct {
	URL    string
	Commit string // full 40-hex SHA (status.commit)
	// Dir receives the files; it must be empty or absent.
	Dir string
	// BaseDir, if set, limits the files written to that directory of the
	// commit, kept at its path (Dir/BaseDir/…): the build Job mounts
	// Dir/BaseDir as the build's source (subPath), so the rest of the
	// repository is not needed. Empty or "/": the whole tree.
	BaseDir string
	Auth    *Auth
}

// NormalizeBaseDir is baseDir as a clean relative path ("" for the root):
// leading and trailing "/" removed, as 1.8.4's subPath.
func NormalizeBaseDir(baseDir string) string {
	p := path.Clean("/" + strings.TrimSpace(baseDir))
	return strings.TrimPrefix(p, "/")
}

// Fetch writes the files of exactly one commit (no .git, no other commit's
// files) into o.Dir. It first asks for just that commit (depth 1; servers
// that allow fetching reachable commits by SHA, as GitHub and GitLab do),
// and when the server refuses, fetches its branches and tags and takes the
// commit from them. The whole fetch is bounded by 10× the Resolver's
// timeout (5 min by default). Every failure is an error naming its cause;
// nothing is swallowed (1.8.4's fetcher exited 0 on auth errors).
func (r Resolver) Fetch(ctx context.Context, o FetchOptions) (err error) {
	if !IsCommit(o.Commit) {
		return invalid("commit %q is not a full 40-digit SHA", o.Commit)
	}
	method, err := prepare(o.URL, o.Auth)
	if err != nil {
		return err
	}
	if err := emptyDir(o.Dir); err != nil {
		return err
	}
	gitDir := filepath.Join(o.Dir, ".git")
	defer func() {
		if rmErr := os.RemoveAll(gitDir); rmErr != nil && err == nil {
			err = fmt.Errorf("removing %s: %w", gitDir, rmErr)
		}
	}()
	repo, err := gogit.PlainInit(o.Dir, false)
	if err != nil {
		return fmt.Errorf("initialising a repository in %s: %w", o.Dir, err)
	}
	remote, err := repo.CreateRemote(&config.RemoteConfig{Name: "origin", URLs: []string{o.URL}})
	if err != nil {
		return fmt.Errorf("adding the remote: %w", err)
	}
	hash := plumbing.NewHash(strings.ToLower(o.Commit))

	ctx, cancel := context.WithTimeout(ctx, r.timeout()*10)
	defer cancel()
	fetch := func(depth int, specs ...config.RefSpec) error {
		err := remote.FetchContext(ctx, &gogit.FetchOptions{Auth: method, Depth: depth, RefSpecs: specs, Tags: gogit.NoTags})
		if err != nil && !errors.Is(err, gogit.NoErrAlreadyUpToDate) {
			return classify(fmt.Errorf("fetching from %s: %w", o.URL, err))
		}
		return nil
	}
	if err := fetch(1, config.RefSpec(hash.String()+":refs/heads/fetched")); err != nil {
		c := Cause(err)
		if c == ErrAuthentication || c == ErrHostKey || c == ErrUnreachable && isNetwork(err) {
			return err
		}
		// The server does not serve commits by SHA: take them from the refs.
		if err := fetch(0, "+refs/heads/*:refs/remotes/origin/*", "+refs/tags/*:refs/tags/*"); err != nil {
			return err
		}
	}
	commit, err := repo.CommitObject(hash)
	if err != nil {
		return &Error{Cause: ErrNotFound, Err: fmt.Errorf("commit %s is in no branch or tag of %s: %w", hash, o.URL, err)}
	}
	tree, err := commit.Tree()
	if err != nil {
		return fmt.Errorf("reading the tree of commit %s: %w", hash, err)
	}
	base := NormalizeBaseDir(o.BaseDir)
	if base != "" {
		if tree, err = tree.Tree(base); err != nil {
			return &Error{Cause: ErrNotFound, Err: fmt.Errorf("baseDir %q is no directory in commit %s: %w", o.BaseDir, hash, err)}
		}
	}
	return writeTree(tree, filepath.Join(o.Dir, filepath.FromSlash(base)))
}

// isNetwork: the error came from the connection itself (not a refused
// request), so asking again differently will not help.
func isNetwork(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "dial") || strings.Contains(msg, "no such host") || errors.Is(err, context.DeadlineExceeded)
}

// emptyDir creates dir or checks that it is empty.
func emptyDir(dir string) error {
	if dir == "" {
		return invalid("no directory given")
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return os.MkdirAll(dir, 0o755)
	}
	if err != nil {
		return fmt.Errorf("reading %s: %w", dir, err)
	}
	if len(entries) > 0 {
		return invalid("directory %s is not empty", dir)
	}
	return nil
}

// writeTree writes the files of tree under dir with their modes (regular,
// executable, symbolic link). Submodules are not fetched.
func writeTree(tree *object.Tree, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return tree.Files().ForEach(func(f *object.File) error {
		if !filepath.IsLocal(filepath.FromSlash(f.Name)) {
			return invalid("path %q leaves the directory", f.Name)
		}
		target := filepath.Join(dir, filepath.FromSlash(f.Name))
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return err
		}
		reader, err := f.Reader()
		if err != nil {
			return fmt.Errorf("reading %s: %w", f.Name, err)
		}
		defer reader.Close()
		if f.Mode == filemode.Symlink {
			link, err := io.ReadAll(reader)
			if err != nil {
				return fmt.Errorf("reading %s: %w", f.Name, err)
			}
			return os.Symlink(string(link), target)
		}
		perm := os.FileMode(0o644)
		if f.Mode == filemode.Executable {
			perm = 0o755
		}
		out, err := os.OpenFile(target, os.O_CREATE|os.O_EXCL|os.O_WRONLY, perm)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, reader); err != nil {
			out.Close()
			return fmt.Errorf("writing %s: %w", target, err)
		}
		return out.Close()
	})
}
