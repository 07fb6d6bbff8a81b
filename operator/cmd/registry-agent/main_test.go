package main

import (
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/serverless-manager/operator/pkg/module"
	"github.com/kyma-project/serverless-manager/operator/pkg/registryagent"
)

// The binary as the registry Pod's sidecar runs it: configured by env,
// serving usage behind the mounted credentials, stopping cleanly on SIGTERM
// without ever printing the password.
func TestBinary(t *testing.T) {
	bin := filepath.Join(t.TempDir(), module.RegistryAgent().Binary)
	compile := exec.Command("go", "build", "-o", bin, ".")
	compile.Stderr = os.Stderr
	require.NoError(t, compile.Run())

	out, err := exec.Command(bin, "--help").CombinedOutput()
	require.NoError(t, err, "--help exits 0")
	for _, env := range []string{registryagent.EnvAddress, registryagent.EnvStorageRoot, registryagent.EnvCredentialsDir} {
		assert.Contains(t, string(out), env)
	}

	root, creds := t.TempDir(), t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(creds, registryagent.UsernameFile), []byte("alice"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(creds, registryagent.PasswordFile), []byte("s3cret-pw"), 0o600))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())

	cmd := exec.Command(bin)
	cmd.Env = []string{registryagent.EnvAddress + "=" + addr, registryagent.EnvStorageRoot + "=" + root,
		registryagent.EnvCredentialsDir + "=" + creds}
	logs := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = logs, logs
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill() })

	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + addr + registryagent.PathHealthz) //nolint:gosec // test URL
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 20*time.Second, 50*time.Millisecond, "no answer on %s; log: %s", registryagent.PathHealthz, logs)
	stranger := &registryagent.Client{URL: "http://" + addr, Username: "alice", Password: "guess"}
	_, err = stranger.Usage(context.Background())
	assert.ErrorContains(t, err, "401", "the registry's credentials are required")
	client := &registryagent.Client{URL: "http://" + addr, Username: "alice", Password: "s3cret-pw"}
	u, err := client.Usage(context.Background())
	require.NoError(t, err)
	assert.Zero(t, u.TaggedImages)
	assert.Positive(t, u.TotalBytes)
	res, err := client.GC(context.Background())
	require.NoError(t, err)
	assert.Zero(t, res.BlobsDeleted)

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, cmd.Wait(), logs.String())
	assert.Contains(t, logs.String(), `"serving"`)
	assert.NotContains(t, logs.String(), "s3cret-pw")
}

// The identity's health port is the one the agent serves its probes on.
func TestIdentity(t *testing.T) {
	id := module.RegistryAgent()
	assert.Equal(t, registryagent.Port, id.HealthPort)
	assert.Empty(t, id.ServiceAccount, "the agent does not talk to the API server")
}
