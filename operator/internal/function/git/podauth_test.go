package git_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/kyma-project/serverless-manager/operator/internal/function/git"
)

// The keys of an auth Secret by its type, as release 1.13 reads them
// (docs/contributor/upstream-contract.md#buildless-git-init-container).
func TestSecretKeysOf(t *testing.T) {
	data := func(keys ...string) map[string][]byte {
		m := map[string][]byte{}
		for _, k := range keys {
			m[k] = []byte("v-" + k)
		}
		return m
	}
	tests := []struct {
		name       string
		secretType corev1.SecretType
		authType   string
		data       map[string][]byte
		want       git.SecretKeys
		errMsg     string
	}{
		{"basic-auth Secret", corev1.SecretTypeBasicAuth, git.AuthBasic, data("username", "password"),
			git.SecretKeys{Username: "username", Password: "password"}, ""},
		{"basic-auth Secret with key auth", corev1.SecretTypeBasicAuth, git.AuthKey, data("username", "password"), git.SecretKeys{}, `needs auth type "basic"`},
		{"basic-auth Secret without password", corev1.SecretTypeBasicAuth, git.AuthBasic, data("username"), git.SecretKeys{}, `"password"`},
		{"ssh-auth Secret", corev1.SecretTypeSSHAuth, git.AuthKey, data("ssh-privatekey", "password"),
			git.SecretKeys{Key: "ssh-privatekey"}, ""},
		{"ssh-auth Secret with basic auth", corev1.SecretTypeSSHAuth, git.AuthBasic, data("ssh-privatekey"), git.SecretKeys{}, `needs auth type "key"`},
		{"ssh-auth Secret without key", corev1.SecretTypeSSHAuth, git.AuthKey, data("key"), git.SecretKeys{}, `"ssh-privatekey"`},
		{"Opaque basic", corev1.SecretTypeOpaque, git.AuthBasic, data("username", "password", "key"),
			git.SecretKeys{Username: "username", Password: "password"}, ""},
		{"Opaque basic without username", corev1.SecretTypeOpaque, git.AuthBasic, data("password"), git.SecretKeys{}, `"username"`},
		{"Opaque key with passphrase", corev1.SecretTypeOpaque, git.AuthKey, data("key", "password"),
			git.SecretKeys{Key: "key", Password: "password"}, ""},
		{"Opaque key without passphrase", "", git.AuthKey, data("key"), git.SecretKeys{Key: "key"}, ""},
		{"Opaque key without key", corev1.SecretTypeOpaque, git.AuthKey, data("ssh-privatekey"), git.SecretKeys{}, `"key"`},
		{"unknown auth type", corev1.SecretTypeOpaque, "oauth", data("username", "password"), git.SecretKeys{}, `"oauth"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := git.SecretKeysOf(tt.secretType, tt.authType, tt.data)
			if tt.errMsg != "" {
				require.Error(t, err)
				assert.True(t, errors.Is(err, git.ErrInvalid))
				assert.Contains(t, err.Error(), tt.errMsg)
				assert.NotContains(t, err.Error(), "v-", "no Secret value in the message")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

// The controller resolves with the same keys the Pod reads.
func TestSecretKeysAuth(t *testing.T) {
	data := map[string][]byte{"ssh-privatekey": []byte("PEM"), "knownHosts": []byte("h ssh-ed25519 AAAA"), "key": []byte("other")}
	got, err := git.SecretKeys{Key: "ssh-privatekey"}.Auth(git.AuthKey, data)
	require.NoError(t, err)
	assert.Equal(t, &git.Auth{Type: git.AuthKey, Key: "PEM", KnownHosts: "h ssh-ed25519 AAAA"}, got)

	_, err = git.SecretKeys{Username: "username", Password: "password"}.Auth(git.AuthBasic, map[string][]byte{"username": []byte("u"), "password": nil})
	assert.ErrorIs(t, err, git.ErrInvalid, "an empty password cannot authenticate")
}
