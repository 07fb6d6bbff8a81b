package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/serverless-manager/operator/pkg/registryagent"
)

// `function-controller registry-agent` as the registry Pod's sidecar runs
// it: configured by env, serving usage behind the mounted credentials,
// stopping cleanly on SIGTERM without ever printing the password.
func TestRegistryAgentSubcommand(t *testing.T) {
	bin := compileBinary(t)
	root, creds := t.TempDir(), t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(creds, registryagent.UsernameFile), []byte("alice"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(creds, registryagent.PasswordFile), []byte("s3cret-pw"), 0o600))
	addr := freeAddress(t)

	cmd := exec.Command(bin, "registry-agent")
	cmd.Env = []string{registryagent.EnvAddress + "=" + addr, registryagent.EnvStorageRoot + "=" + root,
		registryagent.EnvCredentialsDir + "=" + creds}
	logs := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = logs, logs
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill() })

	require.Eventually(t, func() bool {
		code, _ := get("http://" + addr + registryagent.PathHealthz)
		return code == 200
	}, 20*time.Second, 50*time.Millisecond, logs)
	code, _ := get("http://" + addr + registryagent.PathUsage)
	assert.Equal(t, 401, code)
	client := &registryagent.Client{URL: "http://" + addr, Username: "alice", Password: "s3cret-pw"}
	u, err := client.Usage(context.Background())
	require.NoError(t, err)
	assert.Zero(t, u.TaggedImages)
	res, err := client.GC(context.Background())
	require.NoError(t, err)
	assert.Zero(t, res.BlobsDeleted)

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, cmd.Wait(), logs.String())
	assert.Contains(t, logs.String(), `"serving"`)
	assert.NotContains(t, logs.String(), "s3cret-pw")
}
