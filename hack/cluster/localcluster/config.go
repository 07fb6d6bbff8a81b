// Package localcluster holds the settings of the local cluster
// (docs/contributor/local-cluster.md): `hack/cluster.sh up` writes them once
// into the state directory, and every part reads them from there: hack/node,
// which runs the cluster's processes, hack/cluster.sh and hack/run.sh
// (through `hack/cluster.sh setting NAME`) and tests/framework.
package localcluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
)

// FileName is the settings' file in the state directory.
const FileName = "config.json"

// Config is the local cluster's settings. The ports of the control plane
// and the numbers of simulated nodes and volumes are the caller's to choose
// (environment variables of `up`); the node's are fixed.
type Config struct {
	// Nodes is how many simulated nodes kwok runs, PVs how many volumes
	// the pool holds.
	Nodes int `json:"nodes"`
	PVs   int `json:"pvs"`
	// The control plane's ports; the API server's on the node's address,
	// the others on 127.0.0.1.
	APIServerPort int `json:"apiServerPort"`
	EtcdPort      int `json:"etcdPort"`
	EtcdPeerPort  int `json:"etcdPeerPort"`
	KCMPort       int `json:"kcmPort"`
	SchedulerPort int `json:"schedulerPort"`
	KwokPort      int `json:"kwokPort"`
	// NodeName is the real node's name.
	NodeName string `json:"nodeName"`
	// NodePodCIDR holds the real node's Pods; its first address is the
	// node's: Pods reach the API server, DNS and the image registry there.
	NodePodCIDR string `json:"nodePodCIDR"`
	// RegistryPort and MetricsServerPort are the node's image registry's
	// and metrics-server's ports on the node's address.
	RegistryPort      int `json:"registryPort"`
	MetricsServerPort int `json:"metricsServerPort"`
}

// Default is the cluster `make cluster-up` starts when nothing is asked for.
func Default() Config {
	return Config{
		Nodes: 3, PVs: 10,
		APIServerPort: 26443, EtcdPort: 22379, EtcdPeerPort: 22380, KCMPort: 20257, SchedulerPort: 20259, KwokPort: 20247,
		NodeName: "real-node", NodePodCIDR: "10.240.0.0/24", RegistryPort: 5000, MetricsServerPort: 4443,
	}
}

// tunable are the settings a caller may choose through the environment,
// by their environment names.
func (c *Config) tunable() map[string]*int {
	return map[string]*int{
		"NODES": &c.Nodes, "PVS": &c.PVs,
		"APISERVER_PORT": &c.APIServerPort, "ETCD_PORT": &c.EtcdPort, "ETCD_PEER_PORT": &c.EtcdPeerPort,
		"KCM_PORT": &c.KCMPort, "SCHEDULER_PORT": &c.SchedulerPort, "KWOK_PORT": &c.KwokPort,
	}
}

// TunableNames are the environment variables FromEnv reads.
var TunableNames = []string{"NODES", "PVS", "APISERVER_PORT", "ETCD_PORT", "ETCD_PEER_PORT", "KCM_PORT", "SCHEDULER_PORT", "KWOK_PORT"}

// FromEnv is Default with what getenv sets of TunableNames.
func FromEnv(getenv func(string) string) (Config, error) {
	c := Default()
	t := c.tunable()
	var errs []error
	for _, name := range TunableNames {
		s := getenv(name)
		if s == "" {
			continue
		}
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			errs = append(errs, fmt.Errorf("%s must be a positive number, not %q", name, s))
			continue
		}
		*t[name] = v
	}
	if err := errors.Join(errs...); err != nil {
		return Config{}, err
	}
	return c, c.Validate()
}

// Validate says what is wrong with the settings, all of it at once.
func (c Config) Validate() error {
	var errs []error
	for _, name := range TunableNames {
		if v := *c.tunable()[name]; v < 1 {
			errs = append(errs, fmt.Errorf("%s must be a positive number, not %d", name, v))
		}
	}
	for name, p := range map[string]int{"registryPort": c.RegistryPort, "metricsServerPort": c.MetricsServerPort} {
		if p < 1 || p > 65535 {
			errs = append(errs, fmt.Errorf("%s %d is no port", name, p))
		}
	}
	if c.NodeName == "" {
		errs = append(errs, errors.New("nodeName is empty"))
	}
	if ip, _, err := net.ParseCIDR(c.NodePodCIDR); err != nil || ip.To4() == nil {
		errs = append(errs, fmt.Errorf("nodePodCIDR %q is not an IPv4 CIDR", c.NodePodCIDR))
	}
	return errors.Join(errs...)
}

// NodeIP is the first address of the node's Pod range: the bridge's, the
// node's and the host side of everything Pods reach.
func (c Config) NodeIP() string {
	_, n, err := net.ParseCIDR(c.NodePodCIDR)
	if err != nil || n.IP.To4() == nil {
		return ""
	}
	ip := n.IP.To4()
	return net.IPv4(ip[0], ip[1], ip[2], ip[3]+1).String()
}

// NodeRegistry is the host:port the real node pulls images from.
func (c Config) NodeRegistry() string {
	return net.JoinHostPort(c.NodeIP(), strconv.Itoa(c.RegistryPort))
}

// Settings are the settings by the names scripts and tests use
// (`hack/cluster.sh setting NAME`).
func (c Config) Settings() map[string]string {
	s := map[string]string{
		"NODE_NAME": c.NodeName, "NODE_POD_CIDR": c.NodePodCIDR, "NODE_IP": c.NodeIP(), "NODE_REGISTRY": c.NodeRegistry(),
		"NODE_METRICS_PORT": strconv.Itoa(c.MetricsServerPort),
	}
	for name, v := range c.tunable() {
		s[name] = strconv.Itoa(*v)
	}
	return s
}

// Write records the settings in the state directory.
func (c Config) Write(stateDir string) error {
	if err := c.Validate(); err != nil {
		return err
	}
	data, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(stateDir, FileName), append(data, '\n'), 0o644)
}

// Read is the settings the running cluster was started with. A missing
// setting in the file is an error, not a default: the file is written
// whole, so a hole means it is not ours.
func Read(stateDir string) (Config, error) {
	path := filepath.Join(stateDir, FileName)
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("the local cluster's settings: %w", err)
	}
	var c Config
	if err := json.Unmarshal(data, &c); err != nil {
		return Config{}, fmt.Errorf("the local cluster's settings in %s: %w", path, err)
	}
	if err := c.Validate(); err != nil {
		return Config{}, fmt.Errorf("the local cluster's settings in %s: %w", path, err)
	}
	return c, nil
}
