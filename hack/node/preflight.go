package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
)

// machinePaths are where the node's parts write whatever their settings:
// those that did not exist before the node came up go when it goes.
var machinePaths = []string{
	"/var/log/containers", "/var/log/pods", "/var/lib/cni", "/var/lib/kubelet", "/var/lib/containerd",
	"/run/containerd", "/run/runc", "/var/run/netns", "/etc/cni", "/opt/cni", "/opt/containerd", "/etc/kubernetes",
}

// preflight checks what the node needs of this machine and says how to get
// what is missing, and records which of machinePaths are not there yet;
// its down removes those again.
type preflight struct{}

func (preflight) Name() string { return "preflight" }

func (preflight) record(ac *actionContext) string { return ac.path("saved", "absent-paths.json") }

func (p preflight) Up(_ context.Context, ac *actionContext) error {
	if err := ac.checkMachine(); err != nil {
		return err
	}
	absent := p.record(ac)
	if _, err := os.Stat(absent); err == nil {
		return nil // a killed run's record: the machine's own state
	}
	var paths []string
	for _, path := range machinePaths {
		if _, err := os.Lstat(path); errors.Is(err, os.ErrNotExist) {
			paths = append(paths, path)
		}
	}
	return writeJSON(absent, paths)
}

func (p preflight) Down(_ context.Context, ac *actionContext) error {
	absent := p.record(ac)
	var paths []string
	if err := readJSON(absent, &paths); errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	var errs []error
	for _, path := range paths {
		errs = append(errs, os.RemoveAll(path))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return os.Remove(absent)
}

func (ac *actionContext) checkMachine() error {
	// Nothing else is worth checking on a host the node cannot run on.
	mode, err := checkCgroupHost(cgroupFS)
	if err != nil {
		return err
	}
	ac.log.Printf("cgroup mode: %s", mode)
	var errs []error
	errs = append(errs, checkDisk(ac.state))
	if os.Geteuid() != 0 {
		errs = append(errs, errors.New("the real node needs root (kubelet, containerd, network namespaces)"))
	}
	// command -> Debian package (.ci/run installs them)
	for cmd, pkg := range map[string]string{
		"containerd": "containerd", "containerd-shim-runc-v2": "containerd", "runc": "runc",
		"iptables": "iptables", "iptables-save": "iptables", "iptables-restore": "iptables",
		"ip6tables-save": "iptables", "ip6tables-restore": "iptables", "conntrack": "conntrack", "ip": "iproute2",
	} {
		if _, err := exec.LookPath(cmd); err != nil {
			errs = append(errs, fmt.Errorf("%s is missing (apt-get install %s)", cmd, pkg))
		}
	}
	for _, plugin := range []string{"bridge", "host-local", "loopback", "portmap"} {
		if _, err := os.Stat(filepath.Join(cniBinDir, plugin)); err != nil {
			errs = append(errs, fmt.Errorf("CNI plugin %s is missing (apt-get install containernetworking-plugins)", plugin))
		}
	}
	for _, bin := range []string{"kubelet", "kube-proxy", "coredns", "registry", "metrics-server"} {
		if _, err := os.Stat(filepath.Join(ac.assets, bin)); err != nil {
			errs = append(errs, fmt.Errorf("%s is missing in %s (hack/tools.sh builds it)", bin, ac.assets))
		}
	}
	for _, c := range cgroupControllers {
		if mode == cgroupUnified {
			break // checkCgroupHost checked the v2 controllers
		}
		if _, err := os.Stat(filepath.Join(cgroupFS, c)); err != nil {
			errs = append(errs, fmt.Errorf("cgroup controller %s is not mounted at %s", c, filepath.Join(cgroupFS, c)))
		}
	}
	if _, err := os.Stat("/proc/sys/net/bridge/bridge-nf-call-iptables"); err != nil {
		errs = append(errs, errors.New("bridged traffic does not pass iptables (modprobe br_netfilter): Services would not answer Pods on the node"))
	}
	return errors.Join(errs...)
}

// cniBinDir is where Debian's containernetworking-plugins puts them.
const cniBinDir = "/usr/lib/cni"

// evictionFreePercent is kubelet's evictionHard for its filesystem (nodefs
// and imagefs: the state directory's): below it every Pod is evicted and
// the node tainted (DiskPressure).
const evictionFreePercent = 1

// evictionFree is evictionFreePercent as kubelet's configuration writes it.
func evictionFree() string { return strconv.Itoa(evictionFreePercent) + "%" }

// nodeDiskNeed is what the node may write to its state directory above
// kubelet's eviction threshold: images, containers, logs, the registry's
// volume (about 1.1 GiB at the end of make test).
const nodeDiskNeed = 4 << 30

// checkDisk fails when the filesystem of dir (or of its nearest existing
// parent) has too little free space for the node to run without
// evictions.
func checkDisk(dir string) error {
	for {
		var st syscall.Statfs_t
		err := syscall.Statfs(dir, &st)
		if errors.Is(err, os.ErrNotExist) && filepath.Dir(dir) != dir {
			dir = filepath.Dir(dir)
			continue
		}
		if err != nil {
			return fmt.Errorf("reading the free space of %s: %w", dir, err)
		}
		return enoughDisk(dir, st.Blocks*uint64(st.Bsize), st.Bavail*uint64(st.Bsize))
	}
}

// enoughDisk decides for a filesystem of total bytes with avail free.
func enoughDisk(dir string, total, avail uint64) error {
	reserve := total / 100 * evictionFreePercent
	if avail >= reserve+nodeDiskNeed {
		return nil
	}
	return fmt.Errorf("%.1f GiB free on the filesystem of %s: the node needs %.1f GiB (what it writes, %.0f GiB, above the %s of %.1f GiB below which kubelet evicts every Pod); free some space",
		gib(avail), dir, gib(reserve+nodeDiskNeed), gib(nodeDiskNeed), evictionFree(), gib(total))
}

func gib(b uint64) float64 { return float64(b) / (1 << 30) }
