package main

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kyma-project/serverless-manager/hack/cluster/localcluster"
)

// config is where the cluster lives on this machine and which addresses it
// uses: the settings its first start recorded (localcluster.Config in
// .cluster/config.json), or, before there are any, those the environment
// asks for; paths and fixed ranges come as flags.
type config struct {
	// cluster are the recorded settings.
	cluster localcluster.Config
	// recorded says cluster came from the state directory.
	recorded bool
	// state is the cluster's directory (.cluster): pki/, kubeconfigs/,
	// logs/, pids/ and the node's own dir, node/.
	state string
	// assets holds the binaries hack/tools.sh builds (bin/assets), images
	// the layouts `make image` writes (bin/image).
	assets, images string
	// repo is the repository's root (the API server's admission and audit
	// configuration, kwok's module).
	repo string
	// name is the Node's name.
	name string
	// bridge is the Linux bridge the Pods' veths join.
	bridge string
	// podCIDR holds the real node's Pods; its first address is the
	// bridge's, the node's and the host side of everything Pods reach
	// (API server, DNS, image registry).
	podCIDR *net.IPNet
	// fakePodCIDR is where kwok's simulated Pods get addresses: no packet
	// may leave the machine for them.
	fakePodCIDR *net.IPNet
	// serviceCIDR is the API server's Service range.
	serviceCIDR *net.IPNet
	// registryPort is where the node's image registry listens, on the
	// bridge address.
	registryPort int
	// apiServerPort is the API server's port on the bridge address.
	apiServerPort int
	// metricsServerPort is where metrics-server serves the metrics API,
	// on the bridge address.
	metricsServerPort int
	// nodes is how many simulated nodes kwok runs, pvs how many volumes
	// the pool holds.
	nodes, pvs int
	// The control plane's other ports, on 127.0.0.1.
	etcdPort, etcdPeerPort, kcmPort, schedulerPort, kwokPort int

	fakePodCIDRFlag, serviceCIDRFlag string
}

func (c *config) flags(fs *flag.FlagSet) {
	fs.StringVar(&c.state, "state", ".cluster", "the cluster's state directory")
	fs.StringVar(&c.assets, "assets", "bin/assets", "directory of kubelet, kube-proxy, coredns and registry")
	fs.StringVar(&c.images, "images", "bin/image", "directory of the OCI layouts that load pushes")
	fs.StringVar(&c.repo, "repo", ".", "the repository's root")
	fs.StringVar(&c.bridge, "bridge", "serverless0", "name of the Pods' bridge")
	fs.StringVar(&c.fakePodCIDRFlag, "fake-pod-cidr", "10.244.0.0/16", "addresses of kwok's simulated Pods")
	fs.StringVar(&c.serviceCIDRFlag, "service-cidr", "10.96.0.0/16", "the API server's Service range")
}

// complete makes the paths absolute and reads the settings: the recorded
// ones when there are, else getenv's.
func (c *config) complete(getenv func(string) string) error {
	var errs []error
	for _, p := range []*string{&c.state, &c.assets, &c.images, &c.repo} {
		abs, err := filepath.Abs(*p)
		if err != nil {
			errs = append(errs, err)
		}
		*p = abs
	}
	var err error
	c.recorded = false
	if _, statErr := os.Stat(filepath.Join(c.state, localcluster.FileName)); statErr == nil {
		c.cluster, err = localcluster.Read(c.state)
		c.recorded = true
	} else {
		c.cluster, err = localcluster.FromEnv(getenv)
	}
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	parse := func(what, s string) *net.IPNet {
		ip, n, err := net.ParseCIDR(s)
		if err != nil || ip.To4() == nil {
			errs = append(errs, fmt.Errorf("%s %q is not an IPv4 CIDR", what, s))
			return nil
		}
		return n
	}
	lc := c.cluster
	c.name, c.registryPort, c.metricsServerPort = lc.NodeName, lc.RegistryPort, lc.MetricsServerPort
	c.nodes, c.pvs = lc.Nodes, lc.PVs
	c.apiServerPort, c.etcdPort, c.etcdPeerPort, c.kcmPort, c.schedulerPort, c.kwokPort = lc.APIServerPort, lc.EtcdPort, lc.EtcdPeerPort, lc.KCMPort, lc.SchedulerPort, lc.KwokPort
	c.podCIDR = parse("nodePodCIDR", lc.NodePodCIDR)
	c.fakePodCIDR = parse("-fake-pod-cidr", c.fakePodCIDRFlag)
	c.serviceCIDR = parse("-service-cidr", c.serviceCIDRFlag)
	if len(c.bridge) > 15 {
		errs = append(errs, fmt.Errorf("-bridge %q is longer than a Linux interface name may be (15)", c.bridge))
	}
	return errors.Join(errs...)
}

// gateway is the bridge's address: the host as Pods see it.
func (c config) gateway() net.IP {
	ip := c.podCIDR.IP.To4()
	return net.IPv4(ip[0], ip[1], ip[2], ip[3]+1).To4()
}

// bridgeMAC is the bridge's own hardware address, locally administered and
// made of the gateway address. A bridge given no address takes the lowest
// of its ports' and changes it whenever that port leaves: every Pod's ARP
// entry for the gateway then points nowhere until it expires (up to a
// minute), and its traffic to Services, DNS and the node's registry is
// lost meanwhile. An address set at creation the kernel keeps.
func (c config) bridgeMAC() net.HardwareAddr {
	ip := c.gateway()
	return net.HardwareAddr{0x02, 0x00, ip[0], ip[1], ip[2], ip[3]}
}

// registry is the host:port of the node's image registry.
func (c config) registry() string {
	return fmt.Sprintf("%s:%d", c.gateway(), c.registryPort)
}

// dir is the node's own directory; path joins names below it.
func (c config) dir() string { return filepath.Join(c.state, "node") }

func (c config) path(elem ...string) string {
	return filepath.Join(append([]string{c.dir()}, elem...)...)
}

func (c config) kubeconfig(component string) string {
	return filepath.Join(c.state, "kubeconfigs", component+".kubeconfig")
}

func (c config) pki(file string) string { return filepath.Join(c.state, "pki", file) }

func (c config) logFile(component string) string {
	return filepath.Join(c.state, "logs", component+".log")
}

func (c config) pidFile(component string) string {
	return filepath.Join(c.state, "pids", component+".pid")
}

// cgroupRoot is the cgroup (in every hierarchy) that holds all the node's
// Pods: kubelet's --cgroup-root; removing it removes everything below.
const cgroupRoot = "serverless-local"

// writeConfig records the settings in the state directory. They are
// written once: a cluster keeps the settings it was started with.
func (c config) writeConfig() error {
	if c.recorded {
		return fmt.Errorf("%s already records the settings of a cluster; hack/cluster.sh down first", filepath.Join(c.state, localcluster.FileName))
	}
	if err := os.MkdirAll(c.state, 0o755); err != nil {
		return err
	}
	return c.cluster.Write(c.state)
}

// settingLines are the settings as NAME=value, sorted.
func settingLines(lc localcluster.Config) []string {
	var lines []string
	for name, v := range lc.Settings() {
		lines = append(lines, name+"="+v)
	}
	slices.Sort(lines)
	return lines
}

// portsFree fails, naming them, when another process listens on any of the
// control plane's ports.
func (c config) portsFree() error {
	var busy []string
	for _, p := range []int{c.apiServerPort, c.etcdPort, c.etcdPeerPort, c.kcmPort, c.schedulerPort, c.kwokPort} {
		if conn, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)), time.Second); err == nil {
			_ = conn.Close()
			busy = append(busy, strconv.Itoa(p))
		}
	}
	if len(busy) > 0 {
		return fmt.Errorf("port %s in use by another process; pick other ports via APISERVER_PORT, ETCD_PORT, ETCD_PEER_PORT, KCM_PORT, SCHEDULER_PORT, KWOK_PORT", strings.Join(busy, ", "))
	}
	return nil
}

func (c config) volumeDir(i int) string {
	return filepath.Join(c.state, "volumes", "pv-"+strconv.Itoa(i))
}
