package main

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/bcrypt"
)

func TestRun(t *testing.T) {
	for _, tc := range []struct {
		name, user, password, wantErr string
	}{
		{name: "writes the user's bcrypt line", user: "user\n", password: "s3cr3t-and-long-enough"},
		{name: "a colon in the name is refused", user: "us:er", password: "x", wantErr: "holds a colon"},
		{name: "an empty name is refused", user: " \n", password: "x", wantErr: "empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			creds, htpasswd, storage := t.TempDir(), t.TempDir(), t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(creds, "username.txt"), []byte(tc.user), 0o600))
			require.NoError(t, os.WriteFile(filepath.Join(creds, "password.txt"), []byte(tc.password), 0o600))

			err := run(creds, htpasswd, storage)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				assert.NoFileExists(t, filepath.Join(htpasswd, "htpasswd"))
				return
			}
			if errors.Is(err, fs.ErrPermission) && os.Geteuid() != 0 {
				t.Skipf("giving the volume to the registry's user needs root: %v", err)
			}
			require.NoError(t, err)
			b, err := os.ReadFile(filepath.Join(htpasswd, "htpasswd"))
			require.NoError(t, err)
			name, hash, ok := strings.Cut(strings.TrimSuffix(string(b), "\n"), ":")
			require.True(t, ok, "user:hash, got %q", b)
			assert.Equal(t, "user", name)
			assert.NoError(t, bcrypt.CompareHashAndPassword([]byte(hash), []byte(tc.password)))
			cost, err := bcrypt.Cost([]byte(hash))
			require.NoError(t, err)
			assert.Equal(t, 5, cost, "Apache htpasswd's bcrypt cost: the registry checks it on every request")
		})
	}
}
