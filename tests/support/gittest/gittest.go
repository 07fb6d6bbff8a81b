// Package gittest starts Git servers on loopback for tests: smart HTTP
// (the machine's `git http-backend` behind an httptest server, optionally
// with basic auth; ListenOn serves it at another address, e.g. one that
// Pods reach) and SSH (golang.org/x/crypto/ssh running `git upload-pack`),
// over repositories made with the git CLI.
package gittest

import (
	"crypto/subtle"
	"net"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// HTTPServer serves the bare repositories under Root by smart HTTP at URL.
type HTTPServer struct {
	URL  string
	Root string

	mu                 sync.Mutex
	username, password string
	requests           int
}

// Option changes how NewHTTPServer serves.
type Option func(*options)

type options struct{ host string }

// ListenOn serves on host (an IP address of this machine, a free port)
// instead of loopback: for clients elsewhere, such as a cluster's Pods
// reaching this machine at their node's address.
func ListenOn(host string) Option { return func(o *options) { o.host = host } }

// NewHTTPServer starts a server that wants username/password by basic
// auth (none when username is empty), on loopback unless an option says
// otherwise. It stops with the test.
func NewHTTPServer(t testing.TB, username, password string, opts ...Option) *HTTPServer {
	t.Helper()
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	gitPath := lookGit(t)
	s := &HTTPServer{Root: t.TempDir(), username: username, password: password}
	backend := &cgi.Handler{
		Path: gitPath,
		Args: []string{"http-backend"},
		Root: "/",
		Env:  []string{"GIT_PROJECT_ROOT=" + s.Root, "GIT_HTTP_EXPORT_ALL=1"},
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.requests++
		wantUser, wantPass := s.username, s.password
		s.mu.Unlock()
		if wantUser != "" {
			user, pass, ok := r.BasicAuth()
			if !ok || subtle.ConstantTimeCompare([]byte(user), []byte(wantUser)) != 1 ||
				subtle.ConstantTimeCompare([]byte(pass), []byte(wantPass)) != 1 {
				w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
		}
		backend.ServeHTTP(w, r)
	}))
	if o.host != "" {
		ln, err := net.Listen("tcp", net.JoinHostPort(o.host, "0"))
		if err != nil {
			t.Fatalf("git server on %s: %v", o.host, err)
		}
		_ = srv.Listener.Close()
		srv.Listener = ln
	}
	srv.Start()
	t.Cleanup(srv.Close)
	s.URL = srv.URL
	return s
}

// Requests is how many HTTP requests the server answered.
func (s *HTTPServer) Requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests
}

// SetCredentials changes the credentials the server wants.
func (s *HTTPServer) SetCredentials(username, password string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.username, s.password = username, password
}

// Repo creates an empty bare repository <name>.git served at
// URL/<name>.git and a work tree to commit into.
func (s *HTTPServer) Repo(t testing.TB, name string) *Repo {
	return newRepo(t, s.Root, name, s.URL+"/"+name+".git")
}

// Repo is a bare repository on a server plus a work tree pushing to it.
type Repo struct {
	t    testing.TB
	Work string // work tree
	Bare string // the served bare repository
	URL  string // how clients reach it
}

func newRepo(t testing.TB, root, name, url string) *Repo {
	t.Helper()
	r := &Repo{t: t, Work: t.TempDir(), Bare: filepath.Join(root, name+".git"), URL: url}
	run(t, "", "init", "-q", "--bare", "-b", "main", r.Bare)
	run(t, r.Work, "init", "-q", "-b", "main")
	r.Git("remote", "add", "origin", r.Bare)
	return r
}

// Git runs git in the work tree and returns its trimmed output.
func (r *Repo) Git(args ...string) string {
	r.t.Helper()
	return run(r.t, r.Work, args...)
}

// Commit writes files (path → content; "" deletes the file), commits all
// changes on the current branch, pushes everything, and returns the SHA.
func (r *Repo) Commit(files map[string]string, message string) string {
	r.t.Helper()
	for p, content := range files {
		full := filepath.Join(r.Work, filepath.FromSlash(p))
		if content == "" {
			if err := os.Remove(full); err != nil {
				r.t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			r.t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			r.t.Fatal(err)
		}
	}
	r.Git("add", "-A")
	r.Git("commit", "-q", "--allow-empty", "-m", message)
	r.Push()
	return r.Git("rev-parse", "HEAD")
}

// Push pushes all branches and tags (forced) to the bare repository.
func (r *Repo) Push() {
	r.t.Helper()
	r.Git("push", "-q", "--force", "--all", "origin")
	r.Git("push", "-q", "--force", "--tags", "origin")
}

// AllowFetchBySHA lets clients fetch any reachable commit by its SHA (as
// GitHub and GitLab do).
func (r *Repo) AllowFetchBySHA() {
	r.t.Helper()
	run(r.t, r.Bare, "config", "uploadpack.allowReachableSHA1InWant", "true")
}

func lookGit(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git is not installed: ", err)
	}
	return p
}

func run(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command(lookGit(t), args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"GIT_AUTHOR_NAME=test", "GIT_AUTHOR_EMAIL=test@example.com",
		"GIT_COMMITTER_NAME=test", "GIT_COMMITTER_EMAIL=test@example.com",
		"GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}
