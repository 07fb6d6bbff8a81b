package git

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha1" //nolint:gosec // known_hosts hashing is HMAC-SHA1 by definition
	"encoding/base64"
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// Auth types of spec.source.gitRepository.auth.type.
const (
	AuthBasic = "basic"
	AuthKey   = "key"
)

// Keys of the auth Secret (1.8.4's, docs/contributor/upstream-contract.md#git-sources)
// plus KeyKnownHosts, new: the SSH
// host keys the server must present, in known_hosts format.
const (
	KeyUsername   = "username"
	KeyPassword   = "password"
	KeyKey        = "key"
	KeyKnownHosts = "knownHosts"
)

// Auth is the credential of a Git Function, from its auth Secret (the
// controller) or the environment (the fetch subcommand in the build Job).
//
// basic: Username and Password, both required; a token goes in Password
// (GitHub, GitLab and others accept any non-empty username with a token).
// key: Key is a PEM private key, Password its optional passphrase, the user
// is the URL's (ssh://user@host/…, user@host:path) or "git". KnownHosts
// (optional) pins the server's host keys; without it any host key is
// accepted, as 1.8.4 did — set knownHosts to be safe from a man in the
// middle.
type Auth struct {
	Type       string
	Username   string
	Password   string
	Key        string
	KnownHosts string
}

// AuthFromSecret builds the Auth of authType from an auth Secret's data.
// A missing required key is ErrInvalid naming it.
func AuthFromSecret(authType string, data map[string][]byte) (*Auth, error) {
	a := &Auth{
		Type:       authType,
		Username:   string(data[KeyUsername]),
		Password:   string(data[KeyPassword]),
		Key:        string(data[KeyKey]),
		KnownHosts: string(data[KeyKnownHosts]),
	}
	if err := a.check(); err != nil {
		return nil, err
	}
	return a, nil
}

func (a *Auth) check() error {
	switch a.Type {
	case AuthBasic:
		if a.Username == "" {
			return invalid("basic auth needs the key %q", KeyUsername)
		}
		if a.Password == "" {
			return invalid("basic auth needs the key %q (password or token)", KeyPassword)
		}
	case AuthKey:
		if a.Key == "" {
			return invalid("key auth needs the key %q (a PEM private key)", KeyKey)
		}
	default:
		return invalid("auth type %q is neither %q nor %q", a.Type, AuthBasic, AuthKey)
	}
	return nil
}

// method is the go-git auth method for repoURL; nil Auth is anonymous.
func (a *Auth) method(repoURL string) (transport.AuthMethod, error) {
	if a == nil {
		return nil, nil
	}
	if err := a.check(); err != nil {
		return nil, err
	}
	if a.Type == AuthBasic {
		return &githttp.BasicAuth{Username: a.Username, Password: a.Password}, nil
	}
	keys, err := gitssh.NewPublicKeys(sshUser(repoURL), []byte(a.Key), a.Password)
	if err != nil {
		return nil, invalid("SSH key in %q: %w", KeyKey, err)
	}
	callback, err := a.hostKeyCallback()
	if err != nil {
		return nil, err
	}
	keys.HostKeyCallback = callback
	return keys, nil
}

// hostKeyCallback checks the server against KnownHosts, or accepts any
// host key when KnownHosts is empty (documented default, as 1.8.4).
func (a *Auth) hostKeyCallback() (ssh.HostKeyCallback, error) {
	if strings.TrimSpace(a.KnownHosts) == "" {
		return ssh.InsecureIgnoreHostKey(), nil //nolint:gosec // documented default; knownHosts pins keys
	}
	var keys []knownHost
	for i, line := range strings.Split(a.KnownHosts, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		_, hosts, key, _, _, err := ssh.ParseKnownHosts([]byte(line))
		if err != nil {
			return nil, invalid("%s line %d: %w", KeyKnownHosts, i+1, err)
		}
		keys = append(keys, knownHost{hosts: hosts, key: key})
	}
	return func(hostname string, remote net.Addr, key ssh.PublicKey) error {
		addrs := []string{knownhosts.Normalize(hostname)}
		if remote != nil {
			addrs = append(addrs, knownhosts.Normalize(remote.String()))
		}
		for _, k := range keys {
			for _, h := range k.hosts {
				for _, addr := range addrs {
					if matchHost(h, addr) && bytes.Equal(k.key.Marshal(), key.Marshal()) {
						return nil
					}
				}
			}
		}
		return fmt.Errorf("host key %s %s of %s is not in %s", key.Type(), ssh.FingerprintSHA256(key), hostname, KeyKnownHosts)
	}, nil
}

type knownHost struct {
	hosts []string
	key   ssh.PublicKey
}

// matchHost compares a known_hosts host pattern (plain or hashed "|1|salt|hash",
// a port written as [host]:port; no wildcards) with a normalized address.
func matchHost(pattern, addr string) bool {
	if rest, ok := strings.CutPrefix(pattern, "|1|"); ok {
		salt64, hash64, ok := strings.Cut(rest, "|")
		salt, err := base64.StdEncoding.DecodeString(salt64)
		if !ok || err != nil {
			return false
		}
		mac := hmac.New(sha1.New, salt)
		mac.Write([]byte(addr))
		return hmac.Equal([]byte(base64.StdEncoding.EncodeToString(mac.Sum(nil))), []byte(hash64))
	}
	return knownhosts.Normalize(pattern) == addr
}

// IsSSH reports whether repoURL is reached over SSH: ssh:// or the
// SCP-like user@host:path (the forms the CRD admits besides http(s)).
func IsSSH(repoURL string) bool {
	if u, err := url.Parse(repoURL); err == nil && u.Scheme != "" && strings.Contains(repoURL, "://") {
		return u.Scheme == "ssh"
	}
	at := strings.Index(repoURL, "@")
	return at > 0 && strings.Contains(repoURL[at:], ":") && !strings.Contains(repoURL, "://")
}

// sshUser is the user of an SSH URL, "git" when it names none.
func sshUser(repoURL string) string {
	if u, err := url.Parse(repoURL); err == nil && u.Scheme != "" && u.User != nil && u.User.Username() != "" {
		return u.User.Username()
	}
	// scp-like: user@host:path
	if at := strings.Index(repoURL, "@"); at > 0 && !strings.Contains(repoURL[:at], "/") && !strings.Contains(repoURL, "://") {
		return repoURL[:at]
	}
	return "git"
}
