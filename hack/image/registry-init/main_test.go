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
		name, user, wantErr string
	}{
		{name: "writes the mounted user's line", user: "user\n"},
		{name: "a bad name writes nothing", user: "us:er", wantErr: "holds a colon"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const password = "s3cr3t-and-long-enough"
			creds, dir, storage := t.TempDir(), t.TempDir(), t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(creds, "username.txt"), []byte(tc.user), 0o600))
			require.NoError(t, os.WriteFile(filepath.Join(creds, "password.txt"), []byte(password), 0o600))

			err := run(creds, dir, storage)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				assert.NoFileExists(t, filepath.Join(dir, "htpasswd"))
				return
			}
			if errors.Is(err, fs.ErrPermission) && os.Geteuid() != 0 {
				t.Skipf("giving the volume to the registry's user needs root: %v", err)
			}
			require.NoError(t, err)
			b, err := os.ReadFile(filepath.Join(dir, "htpasswd"))
			require.NoError(t, err)
			name, hash, ok := strings.Cut(strings.TrimSuffix(string(b), "\n"), ":")
			require.True(t, ok, "name:hash, got %q", b)
			assert.Equal(t, "user", name)
			assert.NoError(t, bcrypt.CompareHashAndPassword([]byte(hash), []byte(password)))
		})
	}
}
