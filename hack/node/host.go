package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/kyma-project/serverless-manager/operator/pkg/process"
)

// machinePaths are where the node's parts write whatever their settings:
// those that did not exist before the node came up go when it goes.
var machinePaths = []string{
	"/var/log/containers", "/var/log/pods", "/var/lib/cni", "/var/lib/kubelet", "/var/lib/containerd",
	"/run/containerd", "/run/runc", "/var/run/netns", "/etc/cni", "/opt/cni", "/opt/containerd", "/etc/kubernetes",
}

// preflight checks what the node needs of this machine and says how to get
// what is missing, and records which of machinePaths are not there yet.
func (n *node) preflight() action {
	absent := n.path("saved", "absent-paths.json")
	return action{name: "preflight", up: func(context.Context) error {
		if err := n.checkMachine(); err != nil {
			return err
		}
		if _, err := os.Stat(absent); err == nil {
			return nil // a killed run's record: the machine's own state
		}
		var paths []string
		for _, p := range machinePaths {
			if _, err := os.Lstat(p); errors.Is(err, os.ErrNotExist) {
				paths = append(paths, p)
			}
		}
		return writeJSON(absent, paths)
	}, down: func(context.Context) error {
		var paths []string
		if err := readJSON(absent, &paths); errors.Is(err, os.ErrNotExist) {
			return nil
		} else if err != nil {
			return err
		}
		var errs []error
		for _, p := range paths {
			errs = append(errs, os.RemoveAll(p))
		}
		if err := errors.Join(errs...); err != nil {
			return err
		}
		return os.Remove(absent)
	}}
}

func (n *node) checkMachine() error {
	// Nothing else is worth checking on a host the node cannot run on.
	mode, err := requireCgroupV1(cgroupFS)
	if err != nil {
		return err
	}
	n.log.Printf("cgroup mode: %s", mode)
	var errs []error
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
		if _, err := os.Stat(filepath.Join(n.assets, bin)); err != nil {
			errs = append(errs, fmt.Errorf("%s is missing in %s (hack/tools.sh builds it)", bin, n.assets))
		}
	}
	for _, c := range cgroupControllers {
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

// sysctlsTouched are every kernel setting the node's parts change: the
// bridge's forwarding and filtering, kube-proxy's localhost NodePorts and
// kubelet's own (it sets panic, overcommit and key limits at start).
var sysctlsTouched = []string{
	"net/ipv4/ip_forward",
	"net/bridge/bridge-nf-call-iptables",
	"net/bridge/bridge-nf-call-ip6tables",
	"net/ipv4/conf/all/route_localnet",
	"kernel/panic",
	"kernel/panic_on_oops",
	"vm/overcommit_memory",
	"vm/panic_on_oom",
	"kernel/keys/root_maxkeys",
	"kernel/keys/root_maxbytes",
	"net/netfilter/nf_conntrack_max",
	"net/netfilter/nf_conntrack_tcp_timeout_established",
	"net/netfilter/nf_conntrack_tcp_timeout_close_wait",
}

// ownSysctls are the settings the node sets itself, before kubelet and
// kube-proxy would.
var ownSysctls = map[string]string{
	"net/ipv4/ip_forward":                 "1",
	"net/bridge/bridge-nf-call-iptables":  "1",
	"net/bridge/bridge-nf-call-ip6tables": "1",
}

// knownSysctls are the values the node's parts are known to set: ours,
// kubelet's kernel tunables (overcommit always, reboot 10 s after a panic,
// panic on oops, key limits) and kube-proxy's route_localnet (its
// localhost NodePorts). kube-proxy sets it a moment after it starts, so
// sysctlRecord may miss it, and a down whose up ended early has no record.
var knownSysctls = map[string]string{
	"net/ipv4/ip_forward":                 "1",
	"net/bridge/bridge-nf-call-iptables":  "1",
	"net/bridge/bridge-nf-call-ip6tables": "1",
	"net/ipv4/conf/all/route_localnet":    "1",
	"vm/overcommit_memory":                "1",
	"vm/panic_on_oom":                     "0",
	"kernel/panic":                        "10",
	"kernel/panic_on_oops":                "1",
	"kernel/keys/root_maxkeys":            "1000000",
	"kernel/keys/root_maxbytes":           "25000000",
}

// sysctls records the settings before anything changes them (once: a
// record left by a killed run holds the machine's own values) and sets
// ownSysctls. Down puts back only what the node changed and what still
// holds a value of the node's (knownSysctls, or what sysctlRecord found
// once the node was up): another program's change made since stays.
func (n *node) sysctls() action {
	saved := n.path("saved", "sysctls.json")
	ours := n.path("saved", "sysctls-ours.json")
	return action{
		name: "sysctls",
		up: func(context.Context) error {
			if _, err := os.Stat(saved); errors.Is(err, os.ErrNotExist) {
				if err := writeJSON(saved, readSysctls()); err != nil {
					return err
				}
			}
			for key, value := range ownSysctls {
				if err := os.WriteFile(filepath.Join("/proc/sys", key), []byte(value), 0o644); err != nil {
					return fmt.Errorf("sysctl %s: %w", key, err)
				}
			}
			return nil
		},
		down: func(context.Context) error {
			before := map[string]string{}
			if err := readJSON(saved, &before); errors.Is(err, os.ErrNotExist) {
				return nil
			} else if err != nil {
				return err
			}
			recorded := map[string]string{}
			if err := readJSON(ours, &recorded); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
			var errs []error
			for key, value := range sysctlsToRestore(before, readSysctls(), knownSysctls, recorded) {
				if err := os.WriteFile(filepath.Join("/proc/sys", key), []byte(value), 0o644); err != nil {
					errs = append(errs, fmt.Errorf("restoring %s=%s: %w", key, value, err))
				}
			}
			if len(errs) > 0 {
				return errors.Join(errs...)
			}
			return errors.Join(os.Remove(saved), removeIfExists(ours))
		},
	}
}

// sysctlRecord records the settings once the node's parts have set theirs
// (kubelet and kube-proxy set some at start): what sysctls' down may put
// back.
func (n *node) sysctlRecord() action {
	return action{name: "sysctl-record", up: func(context.Context) error {
		return writeJSON(n.path("saved", "sysctls-ours.json"), readSysctls())
	}}
}

// sysctlsToRestore are the settings to put back: those that differ from
// the value before and hold a value of the node's (any of ours).
func sysctlsToRestore(before, now map[string]string, ours ...map[string]string) map[string]string {
	restore := map[string]string{}
	for key, was := range before {
		v, ok := now[key]
		if !ok || v == was {
			continue
		}
		for _, o := range ours {
			if o[key] == v {
				restore[key] = was
				break
			}
		}
	}
	return restore
}

// readSysctls reads sysctlsTouched (those this kernel has).
func readSysctls() map[string]string {
	values := map[string]string{}
	for _, key := range sysctlsTouched {
		if v, err := os.ReadFile(filepath.Join("/proc/sys", key)); err == nil {
			values[key] = strings.TrimSpace(string(v))
		}
	}
	return values
}

func removeIfExists(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

func writeJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

func readJSON(path string, v any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, v)
}

// machineState is what the node changes on this machine, one fact a line,
// for a before/after comparison (`node state`; .ci/run compares around
// make test): mount points, network links, routes and namespaces, the rule
// sets and nftables tables, the sysctls it touches, its cgroups and paths,
// and processes of a node (containerd and its shims, any process whose
// command line names a cluster's state directory).
func machineState() ([]string, error) {
	var lines []string
	add := func(section string, items ...string) {
		for _, it := range items {
			if it = strings.TrimSpace(it); it != "" {
				lines = append(lines, section+": "+it)
			}
		}
	}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	for _, l := range strings.Split(string(mounts), "\n") {
		if f := strings.Fields(l); len(f) > 4 {
			add("mount", unescapeMountPath(f[4]))
		}
	}
	commands := []struct {
		section string
		args    []string
	}{
		{"link", []string{"ip", "-o", "link", "show"}},
		{"route", []string{"ip", "route", "show", "table", "all"}},
		{"netns", []string{"ip", "netns", "list"}},
		{"iptables", []string{"iptables-save"}},
		{"ip6tables", []string{"ip6tables-save"}},
		{"nft", []string{"nft", "list", "tables"}},
	}
	for _, c := range commands {
		out, err := output(c.args[0], c.args[1:]...)
		if err != nil {
			return nil, err
		}
		for _, l := range strings.Split(string(out), "\n") {
			switch c.section {
			case "link":
				// "3: name: <FLAGS> ... state UP ...": the name only
				if f := strings.SplitN(l, ": ", 3); len(f) > 1 {
					l = strings.SplitN(f[1], "@", 2)[0]
				}
			case "iptables", "ip6tables":
				if strings.HasPrefix(l, "#") {
					continue
				}
				// chain lines carry packet counters: ":INPUT ACCEPT [12:345]"
				if i := strings.LastIndex(l, " ["); strings.HasPrefix(l, ":") && i > 0 {
					l = l[:i]
				}
			}
			add(c.section, l)
		}
	}
	for _, key := range sysctlsTouched {
		if v, err := os.ReadFile(filepath.Join("/proc/sys", key)); err == nil {
			add("sysctl", key+"="+strings.TrimSpace(string(v)))
		}
	}
	for _, c := range cgroupControllers {
		if _, err := os.Stat(filepath.Join(cgroupFS, c, cgroupRoot)); err == nil {
			add("cgroup", filepath.Join(c, cgroupRoot))
		}
	}
	for _, p := range machinePaths {
		if _, err := os.Lstat(p); err == nil {
			add("path", p)
		}
	}
	pids, err := process.Find(func(pid int) bool {
		cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		return err == nil && (bytes.Contains(cmdline, []byte("containerd")) || bytes.Contains(cmdline, []byte("/.cluster/")))
	})
	if err != nil {
		return nil, err
	}
	for _, pid := range pids {
		cmdline, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		add("process", strings.ReplaceAll(string(cmdline), "\x00", " "))
	}
	sort.Strings(lines)
	return lines, nil
}
