package main

import (
	"flag"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/kyma-project/serverless-manager/hack/cluster/localcluster"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testConfig is a node's config in a fresh state directory that records
// the default settings as set changes them.
func testConfig(t *testing.T, set ...func(*localcluster.Config)) config {
	t.Helper()
	lc := localcluster.Default()
	for _, f := range set {
		f(&lc)
	}
	state := t.TempDir()
	require.NoError(t, lc.Write(state))
	var c config
	fs := flag.NewFlagSet("node", flag.ContinueOnError)
	c.flags(fs)
	require.NoError(t, fs.Parse([]string{"-state", state}))
	require.NoError(t, c.complete(func(string) string { return "" }))
	return c
}

func TestConfig(t *testing.T) {
	c := testConfig(t, func(lc *localcluster.Config) { lc.NodePodCIDR, lc.RegistryPort = "10.241.3.0/24", 5123 })
	assert.True(t, c.recorded)
	assert.Equal(t, "10.241.3.1", c.gateway().String(), "the bridge's address is the range's first")
	assert.Equal(t, "10.241.3.1:5123", c.registry())
	mac := c.bridgeMAC()
	assert.Equal(t, "02:00:0a:f1:03:01", mac.String(), "the bridge's hardware address is made of its IP address")
	assert.Equal(t, byte(0x02), mac[0]&0x03, "locally administered, unicast")
	assert.True(t, filepath.IsAbs(c.state))
	assert.ErrorContains(t, c.writeConfig(), "already records the settings", "a cluster keeps its settings")

	var bad config
	fs := flag.NewFlagSet("node", flag.ContinueOnError)
	bad.flags(fs)
	require.NoError(t, fs.Parse([]string{"-state", t.TempDir(), "-service-cidr", "fd00::/64", "-bridge", "a-name-longer-than-fifteen"}))
	err := bad.complete(func(string) string { return "" })
	require.Error(t, err)
	assert.Contains(t, err.Error(), "-service-cidr")
	assert.Contains(t, err.Error(), "longer than a Linux interface name")
}

// Without recorded settings the environment's count, and write-config
// records them; a bad one is refused by name.
func TestConfigFromEnvironment(t *testing.T) {
	state := filepath.Join(t.TempDir(), ".cluster")
	env := map[string]string{"NODES": "5", "APISERVER_PORT": "16443"}
	var c config
	fs := flag.NewFlagSet("node", flag.ContinueOnError)
	c.flags(fs)
	require.NoError(t, fs.Parse([]string{"-state", state}))
	require.NoError(t, c.complete(func(k string) string { return env[k] }))
	assert.False(t, c.recorded)
	assert.Equal(t, 5, c.nodes)
	assert.Equal(t, 16443, c.apiServerPort)
	require.NoError(t, c.writeConfig())
	recorded, err := localcluster.Read(state)
	require.NoError(t, err)
	assert.Equal(t, 5, recorded.Nodes)

	// once they are gone, the environment counts again (a start after
	// cleaning up what an unhealthy cluster left)
	require.NoError(t, os.Remove(filepath.Join(state, localcluster.FileName)))
	require.NoError(t, c.complete(func(k string) string { return map[string]string{"NODES": "6"}[k] }))
	assert.False(t, c.recorded)
	assert.Equal(t, 6, c.nodes)
	require.NoError(t, c.writeConfig())

	// the recorded settings win over the environment's
	var again config
	fs = flag.NewFlagSet("node", flag.ContinueOnError)
	again.flags(fs)
	require.NoError(t, fs.Parse([]string{"-state", state}))
	require.NoError(t, again.complete(func(k string) string { return map[string]string{"NODES": "9"}[k] }))
	assert.Equal(t, 6, again.nodes)

	var bad config
	fs = flag.NewFlagSet("node", flag.ContinueOnError)
	bad.flags(fs)
	require.NoError(t, fs.Parse([]string{"-state", filepath.Join(t.TempDir(), "none")}))
	assert.ErrorContains(t, bad.complete(func(k string) string { return map[string]string{"KWOK_PORT": "x"}[k] }), `KWOK_PORT must be a positive number, not "x"`)
}

func TestUnescapeMountPath(t *testing.T) {
	for in, want := range map[string]string{
		"/plain/path":          "/plain/path",
		`/with\040blank`:       "/with blank",
		`/tab\011and\134slash`: "/tab\tand\\slash",
		`/trailing\04`:         `/trailing\04`,
	} {
		assert.Equal(t, want, unescapeMountPath(in), in)
	}
}

// A daemon's hosts.toml pulls over plain HTTP from the server it names.
func TestTrustRegistry(t *testing.T) {
	ac := quietContext(t)
	require.NoError(t, ac.trustRegistry("10.240.0.1:31000"))
	data, err := os.ReadFile(ac.path("certs.d", "10.240.0.1:31000", "hosts.toml"))
	require.NoError(t, err)
	assert.Contains(t, string(data), `server = "http://10.240.0.1:31000"`)
	assert.Contains(t, string(data), `[host."http://10.240.0.1:31000"]`)
	assert.Error(t, ac.trustRegistry("no-port"))
}

func TestRestartKnowsItsDaemonsOnly(t *testing.T) {
	ac := quietContext(t)
	// Before anything stops: a name that is not one of the restartable daemons.
	err := ac.restart(t.Context(), "etcd")
	require.ErrorContains(t, err, `"etcd" is none of kube-apiserver, kubelet, containerd, kube-proxy, coredns`)
}

// A daemon is told from every other process by its configuration file on
// its command line: stop kills whatever names it, so an empty or missing
// one would match any process.
func TestEveryDaemonNamesItsConfiguration(t *testing.T) {
	ac := quietContext(t)
	daemons := ac.allDaemons()
	require.Len(t, daemons, 12, "status lists every daemon")
	for _, d := range daemons {
		t.Run(d.name, func(t *testing.T) {
			// stop would kill another daemon that named this one's configuration
			for _, other := range daemons {
				if other.name == d.name {
					continue
				}
				for _, a := range other.args {
					assert.False(t, strings.HasSuffix(a, d.config), "%s's argument %s ends with %s's configuration", other.name, a, d.name)
				}
			}
			require.NotEmpty(t, d.config)
			assert.True(t, strings.HasPrefix(d.config, ac.state+"/"), "below the state directory: %s", d.config)
			named := false
			for _, a := range d.args {
				named = named || a == d.config || strings.HasSuffix(a, "="+d.config)
			}
			assert.True(t, named, "one of its arguments ends with %s: %v", d.config, d.args)
		})
	}
	assert.ErrorContains(t, ac.stop(daemon{name: "nameless"}), "names no configuration file")
}

// The bootstrap objects follow the settings: as many simulated nodes and
// volumes as asked, volumes below the state directory, the metrics API at
// the node's address and port.
func TestBootstrapYAML(t *testing.T) {
	c := testConfig(t, func(lc *localcluster.Config) {
		lc.Nodes, lc.PVs, lc.MetricsServerPort, lc.NodePodCIDR = 4, 2, 4999, "10.241.3.0/24"
	})
	y := bootstrapYAML(c, []byte("the CA"))
	docs := strings.Split(y, "\n---\n")
	assert.Len(t, docs, 12+4+2, "fixed objects, nodes, volumes")
	assert.Equal(t, 4, strings.Count(y, "kwok.x-k8s.io/node: fake"))
	assert.Contains(t, y, "name: kwok-node-3\n")
	assert.Contains(t, y, "topology.kubernetes.io/zone: zone-a\n", "the fourth node wraps round to the first zone")
	assert.Contains(t, y, `hostPath: {path: "`+filepath.Join(c.state, "volumes", "pv-1")+`"`)
	assert.NotContains(t, y, "local-pv-2")
	assert.Contains(t, y, "persistentVolumeReclaimPolicy: Retain\n", "the volume recycler hands volumes back, not kube-controller-manager")
	assert.Contains(t, y, "- {apiGroup: rbac.authorization.k8s.io, kind: User, name: serverless-local:volume-recycler}", "bound to the user of the recycler's certificate (pki)")
	assert.Contains(t, y, `endpoints: [{addresses: ["10.241.3.1"]}]`)
	assert.Contains(t, y, "targetPort: 4999}")
	assert.Contains(t, y, "caBundle: dGhlIENB\n")
}

// A port another process listens on is named before anything starts.
func TestPortsFree(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	busy := l.Addr().(*net.TCPAddr).Port
	c := testConfig(t, func(lc *localcluster.Config) { lc.KwokPort = busy })
	// the other ports are the defaults, which a running local cluster holds
	err = c.portsFree()
	require.Error(t, err)
	assert.Contains(t, err.Error(), strconv.Itoa(busy))
	assert.Contains(t, err.Error(), "KWOK_PORT")
}

// The node refuses to start on a filesystem where kubelet would evict its
// Pods: below 1 % free, plus what it writes.
func TestEnoughDisk(t *testing.T) {
	const gi = uint64(1) << 30
	tests := []struct {
		name         string
		total, avail uint64
		wantErr      string
	}{
		{name: "plenty", total: 250 * gi, avail: 50 * gi},
		{name: "just enough", total: 100 * gi, avail: 1*gi + nodeDiskNeed},
		{name: "full beyond kubelet's threshold", total: 252 * gi, avail: 3 * gi,
			wantErr: "3.0 GiB free on the filesystem of /work: the node needs 6.5 GiB (what it writes, 4 GiB, above the 1% of 252.0 GiB below which kubelet evicts every Pod); free some space"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := enoughDisk("/work", tt.total, tt.avail)
			if tt.wantErr == "" {
				assert.NoError(t, err)
				return
			}
			assert.EqualError(t, err, tt.wantErr)
		})
	}
}

// The state directory need not exist yet: its nearest parent's filesystem
// is read (the answer depends on this machine's disk, so both are checked).
func TestCheckDiskReadsTheNearestExistingDirectory(t *testing.T) {
	dir := t.TempDir()
	if err := checkDisk(filepath.Join(dir, "not", "yet")); err != nil {
		assert.Contains(t, err.Error(), "free on the filesystem of "+dir+":")
	}
}
