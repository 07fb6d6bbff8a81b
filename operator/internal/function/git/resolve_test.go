package git_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/serverless-manager/operator/internal/function/git"
	"github.com/kyma-project/serverless-manager/tests/support/gittest"
)

// fixture is a repository with a branch whose name has a "/", a
// lightweight tag, an annotated tag and history on main.
type fixture struct {
	repo                            *gittest.Repo
	first, main, feature, annotated string
}

func newFixture(t *testing.T, repo *gittest.Repo) fixture {
	f := fixture{repo: repo}
	f.first = repo.Commit(map[string]string{"fn/handler.js": "v1", "README.md": "readme"}, "first")
	repo.Git("tag", "v1.0.0")
	f.annotated = repo.Commit(map[string]string{"fn/handler.js": "v2"}, "second")
	repo.Git("tag", "-a", "v2.0.0", "-m", "release 2")
	f.main = repo.Commit(map[string]string{"fn/handler.js": "v3"}, "third")
	repo.Git("checkout", "-q", "-b", "feature/x")
	f.feature = repo.Commit(map[string]string{"fn/handler.js": "feature", "fn/extra.js": "extra"}, "feature")
	repo.Git("checkout", "-q", "main")
	repo.Push()
	return f
}

func TestResolve(t *testing.T) {
	srv := gittest.NewHTTPServer(t, "alice", "s3cret")
	f := newFixture(t, srv.Repo(t, "fns"))
	auth := &git.Auth{Type: git.AuthBasic, Username: "alice", Password: "s3cret"}

	tests := []struct {
		name, reference string
		want            git.Resolution
		noNetwork       bool
	}{
		{"branch", "main", git.Resolution{Commit: f.main, Kind: git.KindBranch}, false},
		{"branch with a slash", "feature/x", git.Resolution{Commit: f.feature, Kind: git.KindBranch}, false},
		{"lightweight tag", "v1.0.0", git.Resolution{Commit: f.first, Kind: git.KindTag}, false},
		{"annotated tag peeled to its commit", "v2.0.0", git.Resolution{Commit: f.annotated, Kind: git.KindTag}, false},
		{"full ref name", "refs/heads/feature/x", git.Resolution{Commit: f.feature, Kind: git.KindBranch}, false},
		{"full commit SHA, no network", f.first, git.Resolution{Commit: f.first, Kind: git.KindCommit}, true},
		{"upper-case SHA is lowered", strings.ToUpper(f.first), git.Resolution{Commit: f.first, Kind: git.KindCommit}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := srv.Requests()
			got, err := git.Resolver{}.Resolve(context.Background(), f.repo.URL, tt.reference, auth)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			if tt.noNetwork {
				assert.Equal(t, before, srv.Requests(), "a commit SHA is resolved without the network")
			} else {
				assert.Greater(t, srv.Requests(), before)
			}
		})
	}
}

func TestResolveFollowsNewCommits(t *testing.T) {
	srv := gittest.NewHTTPServer(t, "", "")
	f := newFixture(t, srv.Repo(t, "fns"))
	r := git.Resolver{}
	got, err := r.Resolve(context.Background(), f.repo.URL, "feature/x", nil)
	require.NoError(t, err)
	require.Equal(t, f.feature, got.Commit)

	f.repo.Git("checkout", "-q", "feature/x")
	next := f.repo.Commit(map[string]string{"fn/handler.js": "feature 2"}, "feature 2")
	got, err = r.Resolve(context.Background(), f.repo.URL, "feature/x", nil)
	require.NoError(t, err)
	assert.Equal(t, next, got.Commit)
}

func TestResolveErrors(t *testing.T) {
	srv := gittest.NewHTTPServer(t, "alice", "s3cret")
	f := newFixture(t, srv.Repo(t, "fns"))
	good := &git.Auth{Type: git.AuthBasic, Username: "alice", Password: "s3cret"}
	closed := closedAddress(t)

	tests := []struct {
		name, url, reference string
		auth                 *git.Auth
		cause                error
		message              string
	}{
		{"wrong password", f.repo.URL, "main", &git.Auth{Type: git.AuthBasic, Username: "alice", Password: "wrong"},
			git.ErrAuthentication, "authentication"},
		{"no credentials", f.repo.URL, "main", nil, git.ErrAuthentication, "authentication"},
		{"unknown branch", f.repo.URL, "nope", good, git.ErrNotFound, `reference "nope"`},
		{"abbreviated SHA", f.repo.URL, f.first[:7], good, git.ErrNotFound, "full 40-digit SHA"},
		{"unknown repository", srv.URL + "/missing.git", "main", good, git.ErrNotFound, "repository not found"},
		{"unreachable host", "http://" + closed + "/fns.git", "main", good, git.ErrUnreachable, closed},
		{"missing password", f.repo.URL, "main", &git.Auth{Type: git.AuthBasic, Username: "alice"}, git.ErrInvalid, `"password"`},
		{"unknown auth type", f.repo.URL, "main", &git.Auth{Type: "token"}, git.ErrInvalid, `"token"`},
		{"bad SSH key", "ssh://git@" + closed + "/fns.git", "main", &git.Auth{Type: git.AuthKey, Key: "not a key"}, git.ErrInvalid, "SSH key"},
		{"empty reference", f.repo.URL, " ", good, git.ErrInvalid, "no reference"},
		{"file URL", "file:///etc", "main", nil, git.ErrInvalid, `protocol "file" is not allowed`},
		{"local path", "/etc", "main", nil, git.ErrInvalid, `protocol "file" is not allowed`},
		{"git protocol", "git://" + closed + "/fns.git", "main", nil, git.ErrInvalid, `protocol "git" is not allowed`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := git.Resolver{Timeout: 5 * time.Second}.Resolve(context.Background(), tt.url, tt.reference, tt.auth)
			require.Error(t, err)
			assert.ErrorIs(t, err, tt.cause)
			assert.Equal(t, tt.cause, git.Cause(err))
			assert.Contains(t, err.Error(), tt.message)
		})
	}
}

// closedAddress is a loopback address nobody listens on.
func closedAddress(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}
