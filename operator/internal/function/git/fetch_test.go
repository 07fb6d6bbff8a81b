package git_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/serverless-manager/operator/internal/function/git"
	"github.com/kyma-project/serverless-manager/tests/support/gittest"
)

// tree lists the files under dir (relative slash paths → content; symbolic
// links as "-> target").
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.Type()&fs.ModeSymlink != 0 {
			target, err := os.Readlink(p)
			out[filepath.ToSlash(rel)] = "-> " + target
			return err
		}
		b, err := os.ReadFile(p)
		out[filepath.ToSlash(rel)] = string(b)
		return err
	}))
	return out
}

func TestFetch(t *testing.T) {
	srv := gittest.NewHTTPServer(t, "alice", "s3cret")
	plain := newFixture(t, srv.Repo(t, "plain"))
	bySHA := newFixture(t, srv.Repo(t, "bysha"))
	bySHA.repo.AllowFetchBySHA()
	auth := &git.Auth{Type: git.AuthBasic, Username: "alice", Password: "s3cret"}

	tests := []struct {
		name    string
		f       fixture
		commit  func(fixture) string
		baseDir string
		want    map[string]string
	}{
		{"whole tree of an old commit", plain, func(f fixture) string { return f.first }, "",
			map[string]string{"fn/handler.js": "v1", "README.md": "readme"}},
		{"baseDir only, kept at its path", plain, func(f fixture) string { return f.feature }, "/fn/",
			map[string]string{"fn/handler.js": "feature", "fn/extra.js": "extra"}},
		{"commit of an annotated tag", plain, func(f fixture) string { return f.annotated }, "fn",
			map[string]string{"fn/handler.js": "v2"}},
		{"server serving commits by SHA (shallow)", bySHA, func(f fixture) string { return f.feature }, "fn",
			map[string]string{"fn/handler.js": "feature", "fn/extra.js": "extra"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "workspace")
			err := git.Resolver{}.Fetch(context.Background(), git.FetchOptions{
				URL: tt.f.repo.URL, Commit: tt.commit(tt.f), Dir: dir, BaseDir: tt.baseDir, Auth: auth,
			})
			require.NoError(t, err)
			assert.Equal(t, tt.want, tree(t, dir))
		})
	}
}

func TestFetchKeepsModesAndLinks(t *testing.T) {
	srv := gittest.NewHTTPServer(t, "", "")
	repo := srv.Repo(t, "modes")
	repo.Commit(map[string]string{"src/run.sh": "#!/bin/sh\n"}, "script")
	require.NoError(t, os.Chmod(filepath.Join(repo.Work, "src/run.sh"), 0o755))
	require.NoError(t, os.Symlink("run.sh", filepath.Join(repo.Work, "src/link")))
	commit := repo.Commit(nil, "mode and link")

	dir := t.TempDir()
	require.NoError(t, git.Resolver{}.Fetch(context.Background(), git.FetchOptions{URL: repo.URL, Commit: commit, Dir: dir, BaseDir: "src"}))
	assert.Equal(t, map[string]string{"src/run.sh": "#!/bin/sh\n", "src/link": "-> run.sh"}, tree(t, dir))
	info, err := os.Stat(filepath.Join(dir, "src/run.sh"))
	require.NoError(t, err)
	assert.Equal(t, fs.FileMode(0o755), info.Mode().Perm())
}

func TestFetchErrors(t *testing.T) {
	srv := gittest.NewHTTPServer(t, "alice", "s3cret")
	f := newFixture(t, srv.Repo(t, "fns"))
	good := &git.Auth{Type: git.AuthBasic, Username: "alice", Password: "s3cret"}
	notEmpty := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(notEmpty, "x"), nil, 0o644))

	tests := []struct {
		name, commit, baseDir, dir string
		auth                       *git.Auth
		cause                      error
		message                    string
	}{
		{"wrong password", f.main, "", "", &git.Auth{Type: git.AuthBasic, Username: "alice", Password: "wrong"}, git.ErrAuthentication, "authentication"},
		{"unknown commit", "0123456789012345678901234567890123456789", "", "", good, git.ErrNotFound, "0123456789012345678901234567890123456789"},
		{"missing baseDir", f.main, "nope", "", good, git.ErrNotFound, `baseDir "nope"`},
		{"abbreviated commit", f.main[:8], "", "", good, git.ErrInvalid, "full 40-digit SHA"},
		{"workspace not empty", f.main, "", notEmpty, good, git.ErrInvalid, "not empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := tt.dir
			if dir == "" {
				dir = t.TempDir()
			}
			err := git.Resolver{}.Fetch(context.Background(), git.FetchOptions{URL: f.repo.URL, Commit: tt.commit, Dir: dir, BaseDir: tt.baseDir, Auth: tt.auth})
			require.Error(t, err)
			assert.ErrorIs(t, err, tt.cause)
			assert.Contains(t, err.Error(), tt.message)
			if tt.dir == "" {
				_, statErr := os.Stat(filepath.Join(dir, ".git"))
				assert.ErrorIs(t, statErr, fs.ErrNotExist, "no repository left behind")
			}
		})
	}
}

func TestNormalizeBaseDir(t *testing.T) {
	for in, want := range map[string]string{"": "", "/": "", "fn": "fn", "/fn/": "fn", "a/b/../c": "a/c", " /x ": "x", "../up": "up"} {
		assert.Equal(t, want, git.NormalizeBaseDir(in), in)
	}
}
