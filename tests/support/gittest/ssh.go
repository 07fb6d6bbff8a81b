package gittest

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/kyma-project/serverless-manager/tests/support/loopback"
)

// SSHServer serves the bare repositories under Root to `git upload-pack`
// over SSH, for one user key. Only fetching is supported.
type SSHServer struct {
	Addr    string        // host:port
	Root    string        // bare repositories
	HostKey ssh.PublicKey // the key the server presents
}

// NewSSHServer starts an SSH server on loopback accepting clientKey (any
// user name). It stops with the test.
func NewSSHServer(t testing.TB, clientKey ssh.PublicKey) *SSHServer {
	t.Helper()
	gitPath := lookGit(t)
	_, hostPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(hostPriv)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &ssh.ServerConfig{
		PublicKeyCallback: func(_ ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
			if bytes.Equal(key.Marshal(), clientKey.Marshal()) {
				return nil, nil
			}
			return nil, errors.New("unknown key")
		},
	}
	cfg.AddHostKey(signer)
	s := &SSHServer{Root: t.TempDir(), HostKey: signer.PublicKey()}
	s.Addr = loopback.Serve(t, "127.0.0.1", func(conn net.Conn) { s.serve(conn, cfg, gitPath) })
	return s
}

// Repo creates an empty bare repository <name>.git served at
// ssh://git@Addr/<name>.git and a work tree to commit into.
func (s *SSHServer) Repo(t testing.TB, name string) *Repo {
	return newRepo(t, s.Root, name, "ssh://git@"+s.Addr+"/"+name+".git")
}

// KnownHosts is the server's known_hosts line.
func (s *SSHServer) KnownHosts() string {
	host, port, _ := net.SplitHostPort(s.Addr)
	return fmt.Sprintf("[%s]:%s %s", host, port, strings.TrimSpace(string(ssh.MarshalAuthorizedKey(s.HostKey))))
}

func (s *SSHServer) serve(conn net.Conn, cfg *ssh.ServerConfig, gitPath string) {
	defer conn.Close()
	_, chans, reqs, err := ssh.NewServerConn(conn, cfg)
	if err != nil {
		return
	}
	go ssh.DiscardRequests(reqs)
	for nc := range chans {
		if nc.ChannelType() != "session" {
			_ = nc.Reject(ssh.UnknownChannelType, "session only")
			continue
		}
		ch, chReqs, err := nc.Accept()
		if err != nil {
			return
		}
		go s.session(ch, chReqs, gitPath)
	}
}

// session runs `git upload-pack <repo>` for an exec request
// "git-upload-pack '/<name>.git'".
func (s *SSHServer) session(ch ssh.Channel, reqs <-chan *ssh.Request, gitPath string) {
	defer ch.Close()
	for req := range reqs {
		if req.Type != "exec" {
			_ = req.Reply(req.Type == "env", nil)
			continue
		}
		var payload struct{ Command string }
		if err := ssh.Unmarshal(req.Payload, &payload); err != nil {
			_ = req.Reply(false, nil)
			return
		}
		verb, arg, _ := strings.Cut(payload.Command, " ")
		if verb != "git-upload-pack" {
			_ = req.Reply(false, nil)
			return
		}
		_ = req.Reply(true, nil)
		repo := filepath.Join(s.Root, filepath.Clean("/"+strings.Trim(arg, "'\"")))
		cmd := exec.Command(gitPath, "upload-pack", repo)
		cmd.Stdout, cmd.Stderr = ch, ch.Stderr()
		// Stdin is copied by hand: the client may keep the channel open
		// after upload-pack ends, and Wait would wait for that copy.
		stdin, err := cmd.StdinPipe()
		status := uint32(1)
		if err == nil && cmd.Start() == nil {
			go func() { _, _ = io.Copy(stdin, ch); _ = stdin.Close() }()
			if cmd.Wait() == nil {
				status = 0
			}
		}
		b := make([]byte, 4)
		binary.BigEndian.PutUint32(b, status)
		_, _ = ch.SendRequest("exit-status", false, b)
		return
	}
}

// NewClientKey returns a new ed25519 key as PEM (OpenSSH format) and its
// public key.
func NewClientKey(t testing.TB) (string, ssh.PublicKey) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	sshPub, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(block)), sshPub
}
