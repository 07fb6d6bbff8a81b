package main

import (
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/serverless-manager/operator/pkg/build"
)

// `function-controller build prepare` and `build image` run as processes,
// as the build Job's containers run them, against a registry on loopback:
// the digest of the pushed image is the termination message; a bad
// environment is one too.
func TestBuildSubcommand(t *testing.T) {
	bin := compileBinary(t)

	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	base, err := random.Image(512, 1)
	require.NoError(t, err)
	baseRef, err := name.ParseReference(host+"/runtime/nodejs22:1", name.Insecure)
	require.NoError(t, err)
	require.NoError(t, remote.Write(baseRef, base))

	dir := t.TempDir()
	src, deps, state, docker := filepath.Join(dir, "src"), filepath.Join(dir, "deps"), filepath.Join(dir, "state"), filepath.Join(dir, "docker")
	for _, d := range []string{src, deps, state, docker} {
		require.NoError(t, os.MkdirAll(d, 0o755))
	}
	require.NoError(t, os.WriteFile(filepath.Join(src, "handler.js"), []byte("module.exports = { main: () => 1 }"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(docker, "config.json"), []byte(`{"auths":{}}`), 0o644))
	termLog := filepath.Join(dir, "termination-log")
	env := []string{
		build.EnvRuntime + "=nodejs22", build.EnvBaseImage + "=" + baseRef.String(),
		build.EnvDestination + "=" + host + "/fn/hello:1", build.EnvCacheRepository + "=" + host + "/dependencies",
		build.EnvSourceDir + "=" + src, build.EnvDependenciesDir + "=" + deps, build.EnvStateDir + "=" + state,
		build.EnvInsecure + "=true", build.EnvDockerConfig + "=" + docker, build.EnvTerminationLog + "=" + termLog,
	}
	run := func(env []string, args ...string) (string, error) {
		cmd := exec.Command(bin, append([]string{"build"}, args...)...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		return string(out), err
	}

	out, err := run(env, "prepare")
	require.NoError(t, err, out)
	assert.FileExists(t, filepath.Join(state, build.StateKey))
	out, err = run(env, "image")
	require.NoError(t, err, out)
	msg, err := os.ReadFile(termLog)
	require.NoError(t, err)
	destRef, err := name.ParseReference(host+"/fn/hello:1", name.Insecure)
	require.NoError(t, err)
	img, err := remote.Image(destRef)
	require.NoError(t, err)
	digest, err := img.Digest()
	require.NoError(t, err)
	assert.Equal(t, digest.String(), string(msg), "the termination message is the pushed digest")

	out, err = run(env[1:], "image")
	require.Error(t, err, out)
	msg, err = os.ReadFile(termLog)
	require.NoError(t, err)
	assert.Contains(t, string(msg), "environment variable APP_BUILD_RUNTIME is not set")
	out, err = run(env, "push")
	require.Error(t, err, out)
	assert.Contains(t, out, "usage: function-controller build prepare|image")
}
