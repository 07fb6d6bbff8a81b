package framework

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// npm installs from the registry what it serves, and a caret range picks
// up a version published later: what a buildless Pod started after a
// release installs.
func TestNPMRegistryServesNPM(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	r := serveNPMRegistry(t.Context(), ln)
	t.Cleanup(func() { _ = r.Close() })
	publish := func(version string) {
		require.NoError(t, r.Publish(NPMPackage{Name: "drift-demo", Version: version, Main: "index.js",
			Files: map[string][]byte{"index.js": []byte("module.exports = " + `"` + version + `";`)}}))
	}
	publish("1.0.0")

	install := func() string {
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, "package.json"), []byte(`{"name":"fn","version":"1.0.0","dependencies":{"drift-demo":"^1.0.0"}}`), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(dir, ".npmrc"), []byte(r.NPMRC()), 0o644))
		cmd := exec.CommandContext(t.Context(), "npm", "install", "--no-audit", "--no-fund", "--cache", filepath.Join(dir, ".cache"))
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "npm install: %s", out)
		cmd = exec.CommandContext(t.Context(), "node", "-p", `require("drift-demo")`)
		cmd.Dir = dir
		out, err = cmd.Output()
		require.NoError(t, err)
		return string(out)
	}
	assert.Equal(t, "1.0.0\n", install())
	publish("1.1.0")
	assert.Equal(t, "1.1.0\n", install(), "a later install takes the newer version in the range")
	assert.Equal(t, 1, r.Downloads("drift-demo", "1.0.0"))
	assert.Equal(t, 1, r.Downloads("drift-demo", "1.1.0"))
}

// npm runs the install script of a dependency the registry serves.
func TestNPMRegistryInstallScripts(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	r := serveNPMRegistry(t.Context(), ln)
	t.Cleanup(func() { _ = r.Close() })
	require.NoError(t, r.Publish(NPMPackage{Name: "scripted", Version: "1.0.0",
		Scripts: map[string]string{"install": `node -e "require('fs').writeFileSync('ran', 'yes')"`}}))
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "package.json"), []byte(`{"name":"fn","version":"1.0.0","dependencies":{"scripted":"1.0.0"}}`), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".npmrc"), []byte(r.NPMRC()), 0o644))
	cmd := exec.CommandContext(t.Context(), "npm", "install", "--no-audit", "--no-fund", "--cache", filepath.Join(dir, ".cache"))
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "npm install: %s", out)
	ran, err := os.ReadFile(filepath.Join(dir, "node_modules", "scripted", "ran"))
	require.NoError(t, err, "the install script ran")
	assert.Equal(t, "yes", string(ran))
}
