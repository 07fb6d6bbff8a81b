package localcluster

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFromEnv(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     map[string]string
		want    func(*Config)
		wantErr []string
	}{
		{name: "nothing asked: the defaults", env: nil, want: func(*Config) {}},
		{name: "ports and counts", env: map[string]string{"NODES": "5", "APISERVER_PORT": "16443", "KWOK_PORT": "1234"}, want: func(c *Config) {
			c.Nodes, c.APIServerPort, c.KwokPort = 5, 16443, 1234
		}},
		{name: "every bad value named", env: map[string]string{"NODES": "three", "ETCD_PORT": "0", "PVS": "-1"},
			wantErr: []string{`NODES must be a positive number, not "three"`, `ETCD_PORT must be a positive number, not "0"`, `PVS must be a positive number, not "-1"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := FromEnv(func(k string) string { return tc.env[k] })
			if tc.wantErr != nil {
				for _, msg := range tc.wantErr {
					assert.ErrorContains(t, err, msg)
				}
				return
			}
			require.NoError(t, err)
			want := Default()
			tc.want(&want)
			assert.Equal(t, want, c)
		})
	}
}

func TestSettingsByName(t *testing.T) {
	c := Default()
	c.NodePodCIDR, c.RegistryPort, c.Nodes = "10.241.3.0/24", 5123, 7
	s := c.Settings()
	assert.Equal(t, "10.241.3.1", s["NODE_IP"], "the node's address is its Pod range's first")
	assert.Equal(t, "10.241.3.1:5123", s["NODE_REGISTRY"])
	assert.Equal(t, "7", s["NODES"])
	assert.Equal(t, "real-node", s["NODE_NAME"])
	for _, name := range TunableNames {
		assert.NotEmpty(t, s[name], name)
	}
}

func TestWriteRead(t *testing.T) {
	dir := t.TempDir()
	c := Default()
	c.SchedulerPort = 31000
	require.NoError(t, c.Write(dir))
	got, err := Read(dir)
	require.NoError(t, err)
	assert.Equal(t, c, got)

	_, err = Read(t.TempDir())
	assert.ErrorContains(t, err, "the local cluster's settings")

	require.NoError(t, os.WriteFile(filepath.Join(dir, FileName), []byte(`{"nodes": 3}`), 0o644))
	_, err = Read(dir)
	assert.ErrorContains(t, err, "APISERVER_PORT must be a positive number", "a file with holes is refused")

	bad := Default()
	bad.NodePodCIDR = "fd00::/64"
	assert.ErrorContains(t, bad.Write(t.TempDir()), "not an IPv4 CIDR", "nothing invalid is written")
}
