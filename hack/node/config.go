package main

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"path/filepath"
)

// config is where the node lives on this machine and which addresses it
// uses; hack/cluster.sh passes its settings as flags.
type config struct {
	// state is the cluster's directory (.cluster): pki/, kubeconfigs/,
	// logs/, pids/ and the node's own dir, node/.
	state string
	// assets holds the binaries hack/tools.sh builds (bin/assets), images
	// the layouts `make image` writes (bin/image).
	assets, images string
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
	// repo is the repository's root (the API server's admission and audit
	// configuration, kwok's module).
	repo string
	// nodes is how many simulated nodes kwok runs, pvs how many volumes
	// the pool holds.
	nodes, pvs int
	// The control plane's other ports, on 127.0.0.1.
	etcdPort, etcdPeerPort, kcmPort, schedulerPort, kwokPort int

	podCIDRFlag, fakePodCIDRFlag, serviceCIDRFlag string
}

func (c *config) flags(fs *flag.FlagSet) {
	fs.StringVar(&c.state, "state", ".cluster", "the cluster's state directory")
	fs.StringVar(&c.assets, "assets", "bin/assets", "directory of kubelet, kube-proxy, coredns and registry")
	fs.StringVar(&c.images, "images", "bin/image", "directory of the OCI layouts `node load` pushes")
	fs.StringVar(&c.name, "name", "real-node", "name of the node")
	fs.StringVar(&c.bridge, "bridge", "serverless0", "name of the Pods' bridge")
	fs.StringVar(&c.podCIDRFlag, "pod-cidr", "10.240.0.0/24", "addresses of the node's Pods")
	fs.StringVar(&c.fakePodCIDRFlag, "fake-pod-cidr", "10.244.0.0/16", "addresses of kwok's simulated Pods")
	fs.StringVar(&c.serviceCIDRFlag, "service-cidr", "10.96.0.0/16", "the API server's Service range")
	fs.IntVar(&c.registryPort, "registry-port", 5000, "port of the node's image registry")
	fs.IntVar(&c.apiServerPort, "apiserver-port", 26443, "port of the API server")
	fs.IntVar(&c.metricsServerPort, "metrics-server-port", 4443, "port of metrics-server")
	fs.StringVar(&c.repo, "repo", ".", "the repository's root")
	fs.IntVar(&c.nodes, "nodes", 3, "number of simulated nodes")
	fs.IntVar(&c.pvs, "pvs", 10, "number of PersistentVolumes in the pool")
	fs.IntVar(&c.etcdPort, "etcd-port", 22379, "etcd's client port")
	fs.IntVar(&c.etcdPeerPort, "etcd-peer-port", 22380, "etcd's peer port")
	fs.IntVar(&c.kcmPort, "kcm-port", 20257, "kube-controller-manager's port")
	fs.IntVar(&c.schedulerPort, "scheduler-port", 20259, "kube-scheduler's port")
	fs.IntVar(&c.kwokPort, "kwok-port", 20247, "kwok's port")
}

func (c *config) complete() error {
	var errs []error
	parse := func(flagName, s string) *net.IPNet {
		ip, n, err := net.ParseCIDR(s)
		if err != nil || ip.To4() == nil {
			errs = append(errs, fmt.Errorf("-%s %q is not an IPv4 CIDR", flagName, s))
			return nil
		}
		return n
	}
	c.podCIDR = parse("pod-cidr", c.podCIDRFlag)
	c.fakePodCIDR = parse("fake-pod-cidr", c.fakePodCIDRFlag)
	c.serviceCIDR = parse("service-cidr", c.serviceCIDRFlag)
	if len(c.bridge) > 15 {
		errs = append(errs, fmt.Errorf("-bridge %q is longer than a Linux interface name may be (15)", c.bridge))
	}
	for _, p := range []*string{&c.state, &c.assets, &c.images, &c.repo} {
		abs, err := filepath.Abs(*p)
		if err != nil {
			errs = append(errs, err)
		}
		*p = abs
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
