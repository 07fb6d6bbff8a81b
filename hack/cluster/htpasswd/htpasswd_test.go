package htpasswd

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/bcrypt"
)

func TestLine(t *testing.T) {
	for _, tc := range []struct {
		name, user, password, wantErr string
	}{
		{name: "the user's bcrypt line", user: "user", password: "s3cr3t-and-long-enough"},
		{name: "a colon in the name is refused", user: "us:er", password: "x", wantErr: "holds a colon"},
		{name: "an empty name is refused", user: " ", password: "x", wantErr: "empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			line, err := Line(tc.user, tc.password)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			name, hash, ok := strings.Cut(strings.TrimSuffix(string(line), "\n"), ":")
			require.True(t, ok, "name:hash, got %q", line)
			assert.Equal(t, tc.user, name)
			assert.NoError(t, bcrypt.CompareHashAndPassword([]byte(hash), []byte(tc.password)))
			cost, err := bcrypt.Cost([]byte(hash))
			require.NoError(t, err)
			assert.Equal(t, 5, cost, "Apache htpasswd's cost: the registry checks the hash on every request")
		})
	}
}
