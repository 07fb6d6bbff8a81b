package git_test

import (
	"context"
	"encoding/base64"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/kyma-project/serverless-manager/operator/internal/function/git"
	"github.com/kyma-project/serverless-manager/tests/support/gittest"
)

func TestAuthFromSecret(t *testing.T) {
	tests := []struct {
		name     string
		authType string
		data     map[string][]byte
		want     *git.Auth
		errMsg   string
	}{
		{"basic", git.AuthBasic, map[string][]byte{"username": []byte("u"), "password": []byte("p")},
			&git.Auth{Type: git.AuthBasic, Username: "u", Password: "p"}, ""},
		{"basic without username", git.AuthBasic, map[string][]byte{"password": []byte("p")}, nil, `"username"`},
		{"basic without password", git.AuthBasic, map[string][]byte{"username": []byte("u")}, nil, `"password"`},
		{"key with passphrase and known hosts", git.AuthKey,
			map[string][]byte{"key": []byte("PEM"), "password": []byte("pp"), "knownHosts": []byte("h ssh-ed25519 AAAA")},
			&git.Auth{Type: git.AuthKey, Key: "PEM", Password: "pp", KnownHosts: "h ssh-ed25519 AAAA"}, ""},
		{"key without key", git.AuthKey, map[string][]byte{"password": []byte("pp")}, nil, `"key"`},
		{"unknown type", "oauth", map[string][]byte{"username": []byte("u")}, nil, `"oauth"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := git.AuthFromSecret(tt.authType, tt.data)
			if tt.errMsg != "" {
				require.ErrorIs(t, err, git.ErrInvalid)
				assert.Contains(t, err.Error(), tt.errMsg)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

// SSH key auth against an SSH server the test starts (x/crypto/ssh
// running git upload-pack), with and without host key checking.
func TestSSHKeyAuth(t *testing.T) {
	key, pub := gittest.NewClientKey(t)
	otherKey, _ := gittest.NewClientKey(t)
	srv := gittest.NewSSHServer(t, pub)
	f := newFixture(t, srv.Repo(t, "fns"))
	_, foreignHost := gittest.NewClientKey(t)
	foreignKnownHosts := "[127.0.0.1]:1 " + string(gossh(foreignHost))

	tests := []struct {
		name  string
		auth  *git.Auth
		cause error
	}{
		{"key, any host key (default)", &git.Auth{Type: git.AuthKey, Key: key}, nil},
		{"key, pinned host key", &git.Auth{Type: git.AuthKey, Key: key, KnownHosts: "# pinned\n" + srv.KnownHosts() + "\n"}, nil},
		{"key, pinned hashed host name", &git.Auth{Type: git.AuthKey, Key: key, KnownHosts: hashed(srv)}, nil},
		{"unknown key", &git.Auth{Type: git.AuthKey, Key: otherKey}, git.ErrAuthentication},
		{"host key not in knownHosts", &git.Auth{Type: git.AuthKey, Key: key, KnownHosts: foreignKnownHosts}, git.ErrHostKey},
		{"malformed knownHosts", &git.Auth{Type: git.AuthKey, Key: key, KnownHosts: "garbage"}, git.ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := git.Resolver{Timeout: 10 * time.Second}
			got, err := r.Resolve(context.Background(), f.repo.URL, "feature/x", tt.auth)
			if tt.cause != nil {
				require.ErrorIs(t, err, tt.cause)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, f.feature, got.Commit)

			dir := filepath.Join(t.TempDir(), "ws")
			require.NoError(t, r.Fetch(context.Background(), git.FetchOptions{URL: f.repo.URL, Commit: f.feature, Dir: dir, BaseDir: "fn", Auth: tt.auth}))
			assert.Equal(t, map[string]string{"fn/handler.js": "feature", "fn/extra.js": "extra"}, tree(t, dir))
		})
	}
}

func gossh(k interface {
	Marshal() []byte
	Type() string
}) []byte {
	return []byte(k.Type() + " " + base64.StdEncoding.EncodeToString(k.Marshal()))
}

// hashed is the server's known_hosts line with its host name hashed (as
// ssh-keyscan -H writes it).
func hashed(srv *gittest.SSHServer) string {
	host, key, _ := strings.Cut(srv.KnownHosts(), " ")
	return knownhosts.HashHostname(host) + " " + key
}

func TestIsSSH(t *testing.T) {
	tests := []struct {
		url  string
		want bool
	}{
		{"https://github.com/kyma-project/serverless.git", false},
		{"http://10.0.0.1:3000/org/repo.git", false},
		{"https://user@example.com/org/repo.git", false},
		{"ssh://git@github.com/kyma-project/serverless.git", true},
		{"ssh://github.com:22/org/repo", true},
		{"git@github.com:kyma-project/serverless.git", true},
		{"deploy@10.0.0.1:repos/fn", true},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			assert.Equal(t, tt.want, git.IsSSH(tt.url))
		})
	}
}
