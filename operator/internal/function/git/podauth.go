package git

import (
	corev1 "k8s.io/api/core/v1"
)

// Keys of the Kubernetes Secret types for credentials.
const (
	KeySSHPrivateKey = corev1.SSHAuthPrivateKey    // "ssh-privatekey", type kubernetes.io/ssh-auth
	KeyBasicUsername = corev1.BasicAuthUsernameKey // "username", type kubernetes.io/basic-auth
	KeyBasicPassword = corev1.BasicAuthPasswordKey // "password", type kubernetes.io/basic-auth
)

// SecretKeys says which keys of a Git Function's auth Secret hold its
// credentials ("" for none), as release 1.13 reads them in buildless mode:
// by the Secret's type — kubernetes.io/basic-auth (username, password),
// kubernetes.io/ssh-auth (ssh-privatekey) — and for any other type 1.8.4's
// layout (username and password, or key and an optional password). The Pod
// reads them by reference; the credentials never enter the Pod template.
type SecretKeys struct {
	Username, Password, Key string
}

// SecretKeysOf is the layout of an auth Secret for authType, or ErrInvalid
// naming what does not fit (a type that contradicts authType, a missing key).
func SecretKeysOf(secretType corev1.SecretType, authType string, data map[string][]byte) (SecretKeys, error) {
	has := func(k string) bool { _, ok := data[k]; return ok }
	switch secretType {
	case corev1.SecretTypeSSHAuth:
		if authType != AuthKey {
			return SecretKeys{}, invalid("a Secret of type %s needs auth type %q, not %q", secretType, AuthKey, authType)
		}
		if !has(KeySSHPrivateKey) {
			return SecretKeys{}, invalid("a Secret of type %s needs the key %q", secretType, KeySSHPrivateKey)
		}
		return SecretKeys{Key: KeySSHPrivateKey}, nil
	case corev1.SecretTypeBasicAuth:
		if authType != AuthBasic {
			return SecretKeys{}, invalid("a Secret of type %s needs auth type %q, not %q", secretType, AuthBasic, authType)
		}
		if !has(KeyBasicUsername) || !has(KeyBasicPassword) {
			return SecretKeys{}, invalid("a Secret of type %s needs the keys %q and %q", secretType, KeyBasicUsername, KeyBasicPassword)
		}
		return SecretKeys{Username: KeyBasicUsername, Password: KeyBasicPassword}, nil
	}
	switch authType {
	case AuthKey:
		if !has(KeyKey) {
			return SecretKeys{}, invalid("key auth needs the key %q (a PEM private key)", KeyKey)
		}
		keys := SecretKeys{Key: KeyKey}
		if has(KeyPassword) {
			keys.Password = KeyPassword
		}
		return keys, nil
	case AuthBasic:
		if !has(KeyUsername) || !has(KeyPassword) {
			return SecretKeys{}, invalid("basic auth needs the keys %q and %q", KeyUsername, KeyPassword)
		}
		return SecretKeys{Username: KeyUsername, Password: KeyPassword}, nil
	}
	return SecretKeys{}, invalid("auth type %q is neither %q nor %q", authType, AuthBasic, AuthKey)
}

// Auth is the credential these keys name in data, for resolving the
// reference from the controller (knownHosts read as for AuthFromSecret).
func (k SecretKeys) Auth(authType string, data map[string][]byte) (*Auth, error) {
	get := func(key string) string {
		if key == "" {
			return ""
		}
		return string(data[key])
	}
	a := &Auth{Type: authType, Username: get(k.Username), Password: get(k.Password), Key: get(k.Key),
		KnownHosts: string(data[KeyKnownHosts])}
	if err := a.check(); err != nil {
		return nil, err
	}
	return a, nil
}
