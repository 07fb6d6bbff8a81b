package main

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/serverless-manager/operator/pkg/module"
	"github.com/kyma-project/serverless-manager/tests/support/gittest"
)

// compileBinary builds this command into a temporary directory, as a test
// of its subcommands runs it.
func compileBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), module.FunctionController().Binary)
	compile := exec.Command("go", "build", "-o", bin, ".")
	compile.Stderr = os.Stderr
	require.NoError(t, compile.Run())
	return bin
}

// `function-controller fetch` run as a process, as the build Job's init
// container runs it, against a Git server on loopback (basic auth).
func TestFetchSubcommand(t *testing.T) {
	bin := compileBinary(t)

	srv := gittest.NewHTTPServer(t, "alice", "s3cret")
	repo := srv.Repo(t, "fns")
	old := repo.Commit(map[string]string{"fn/handler.js": "old", "fn/package.json": "{}", "docs/x.md": "docs"}, "old")
	repo.Git("checkout", "-q", "-b", "feature/x")
	commit := repo.Commit(map[string]string{"fn/handler.js": "new", "fn/lib/util.js": "util", "other/y.js": "y"}, "new")
	repo.Commit(map[string]string{"fn/handler.js": "newer"}, "a later commit that must not be fetched")

	tests := []struct {
		name      string
		env       map[string]string
		wantFiles map[string]string
		wantErr   string
	}{
		{"baseDir of the commit only", map[string]string{
			"APP_REPOSITORY_COMMIT": commit, "APP_REPOSITORY_BASE_DIR": "/fn",
			"APP_REPOSITORY_AUTH_TYPE": "basic", "APP_REPOSITORY_USERNAME": "alice", "APP_REPOSITORY_PASSWORD": "s3cret",
		}, map[string]string{"fn/handler.js": "new", "fn/package.json": "{}", "fn/lib/util.js": "util"}, ""},
		{"whole tree of an older commit (1.8.4 environment, no baseDir)", map[string]string{
			"APP_REPOSITORY_COMMIT":    old,
			"APP_REPOSITORY_AUTH_TYPE": "basic", "APP_REPOSITORY_USERNAME": "alice", "APP_REPOSITORY_PASSWORD": "s3cret",
		}, map[string]string{"fn/handler.js": "old", "fn/package.json": "{}", "docs/x.md": "docs"}, ""},
		{"wrong password fails the container with the cause", map[string]string{
			"APP_REPOSITORY_COMMIT":    commit,
			"APP_REPOSITORY_AUTH_TYPE": "basic", "APP_REPOSITORY_USERNAME": "alice", "APP_REPOSITORY_PASSWORD": "wrong",
		}, nil, "authentication failed"},
		{"no credentials", map[string]string{"APP_REPOSITORY_COMMIT": commit}, nil, "authentication failed"},
		{"baseDir missing in the commit", map[string]string{
			"APP_REPOSITORY_COMMIT": commit, "APP_REPOSITORY_BASE_DIR": "nope",
			"APP_REPOSITORY_AUTH_TYPE": "basic", "APP_REPOSITORY_USERNAME": "alice", "APP_REPOSITORY_PASSWORD": "s3cret",
		}, nil, `baseDir "nope"`},
		{"no commit", map[string]string{}, nil, "APP_REPOSITORY_COMMIT is not set"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ws := filepath.Join(t.TempDir(), "workspace")
			cmd := exec.Command(bin, "fetch")
			cmd.Env = []string{"APP_REPOSITORY_URL=" + repo.URL, "APP_MOUNT_PATH=" + ws}
			for k, v := range tt.env {
				cmd.Env = append(cmd.Env, k+"="+v)
			}
			out, err := cmd.CombinedOutput()
			if tt.wantErr != "" {
				var exit *exec.ExitError
				require.ErrorAs(t, err, &exit, "output: %s", out)
				assert.Equal(t, 1, exit.ExitCode())
				assert.Contains(t, string(out), tt.wantErr)
				return
			}
			require.NoError(t, err, "output: %s", out)
			assert.Equal(t, tt.wantFiles, files(t, ws))
		})
	}
}

func TestFetchTerminationMessage(t *testing.T) {
	termLog := filepath.Join(t.TempDir(), "termination-log")
	require.NoError(t, os.WriteFile(termLog, nil, 0o644))
	env := map[string]string{"APP_REPOSITORY_URL": "http://127.0.0.1:1/x.git", "APP_MOUNT_PATH": t.TempDir(),
		"APP_REPOSITORY_COMMIT": "0123456789012345678901234567890123456789"}
	var stdout, stderr strings.Builder
	code := runFetch(t.Context(), func(k string) (string, bool) { v, ok := env[k]; return v, ok }, &stdout, &stderr, termLog)
	assert.Equal(t, 1, code)
	msg, err := os.ReadFile(termLog)
	require.NoError(t, err)
	assert.Contains(t, string(msg), "server unreachable")
	assert.Contains(t, stderr.String(), string(msg))
	assert.Empty(t, stdout.String())
}

func files(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		b, err := os.ReadFile(p)
		out[filepath.ToSlash(rel)] = string(b)
		return err
	}))
	return out
}
