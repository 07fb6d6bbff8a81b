package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kyma-project/serverless-manager/hack/cluster/process"
)

// cgroupFS is where this machine mounts its cgroup v1 hierarchies, and
// cgroupControllers the ones kubelet and runc use.
const cgroupFS = "/sys/fs/cgroup"

var cgroupControllers = []string{"cpu", "cpuacct", "cpuset", "memory", "pids", "devices", "freezer", "blkio", "systemd"}

// Labels of the real node: type tells it from kwok's nodes (type=kwok) and
// is what a namespace's node selector names.
const (
	labelType = "type"
	typeReal  = "real"
)

// kubelet runs the node agent with its Pods below one cgroup of our own and
// its files below the node's directory. Settings this machine needs
// (docs/contributor/local-cluster.md): cgroup v1 allowed, the cgroupfs
// driver (no systemd).
type kubelet struct{}

func (kubelet) Name() string { return "kubelet" }

func (kubelet) daemon(ac *actionContext) daemon {
	config := ac.path("kubelet.yaml")
	return daemon{name: "kubelet", path: filepath.Join(ac.assets, "kubelet"), config: config, grace: 10 * time.Second, args: []string{
		"--config=" + config,
		"--kubeconfig=" + ac.kubeconfig("node"),
		"--root-dir=" + ac.path("kubelet"),
		"--hostname-override=" + ac.name,
		"--node-ip=" + ac.gateway().String(),
		"--node-labels=" + labelType + "=" + typeReal,
	}}
}

// Up creates its cgroup and starts it.
func (k kubelet) Up(_ context.Context, ac *actionContext) error {
	if err := makeCgroupRoot(); err != nil {
		return err
	}
	if err := ac.writeKubeletConfig(); err != nil {
		return err
	}
	return ac.start(k.daemon(ac))
}

// Down stops it, kills every process in its cgroup, removes the cgroups
// and its log links in /var/log/containers.
func (k kubelet) Down(_ context.Context, ac *actionContext) error {
	var errs []error
	errs = append(errs, ac.stop(k.daemon(ac)))
	// The containers, whatever their shims do meanwhile.
	errs = append(errs, killCgroupTree())
	errs = append(errs, removeCgroupRoot())
	errs = append(errs, ac.removeContainerLogLinks())
	return errors.Join(errs...)
}

func (c config) writeKubeletConfig() error {
	gw := c.gateway().String()
	config := `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: ` + gw + `
port: 10250
readOnlyPort: 0
healthzPort: 0
tlsCertFile: ` + c.pki("kubelet.crt") + `
tlsPrivateKeyFile: ` + c.pki("kubelet.key") + `
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: ` + c.pki("ca.crt") + `}
authorization: {mode: Webhook}
containerRuntimeEndpoint: unix://` + c.containerdSocket() + `
# cgroup v1 and no systemd on these machines
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /` + cgroupRoot + `
clusterDNS: [` + gw + `]
clusterDomain: cluster.local
resolvConf: /etc/resolv.conf
podLogsDir: ` + c.path("pod-logs") + `
staticPodPath: ""
failSwapOn: false
serializeImagePulls: false
# ConfigMap and Secret volumes follow their objects at every sync (default
# a minute): a changed log level reaches a running Pod in seconds
syncFrequency: 10s
# a developer's disk is not a node's: evict only when it is really full
evictionHard: {memory.available: 100Mi, nodefs.available: 1%, imagefs.available: 1%, nodefs.inodesFree: 1%}
imageGCHighThresholdPercent: 99
imageGCLowThresholdPercent: 98
rotateCertificates: false
shutdownGracePeriod: 0s
`
	if err := os.MkdirAll(c.dir(), 0o755); err != nil {
		return err
	}
	return os.WriteFile(c.path("kubelet.yaml"), []byte(config), 0o644)
}

// makeCgroupRoot creates our cgroup in every hierarchy; kubelet refuses a
// cgroup root that does not exist. A new cpuset is empty: it gets the
// machine's CPUs and memory nodes, or no process could join it.
func makeCgroupRoot() error {
	for _, c := range cgroupControllers {
		dir := filepath.Join(cgroupFS, c, cgroupRoot)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		if c != "cpuset" {
			continue
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			v, err := os.ReadFile(filepath.Join(cgroupFS, c, f))
			if err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(dir, f), v, 0o644); err != nil {
				return fmt.Errorf("%s: %w", filepath.Join(dir, f), err)
			}
		}
	}
	return nil
}

// killCgroupTree kills every process in our cgroup: the Pods' containers.
func killCgroupTree() error {
	pids, err := process.Find(func(pid int) bool {
		data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
		return err == nil && bytes.Contains(data, []byte(":/"+cgroupRoot+"/"))
	})
	if err != nil {
		return err
	}
	return process.KillAndWait(pids)
}

// removeCgroupRoot removes our cgroup and everything below it, deepest
// first (a cgroup goes only once it has no children and no processes). A
// cgroup whose killed processes are still being reaped is busy for a moment:
// it is tried again for a while.
func removeCgroupRoot() error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := removeCgroups()
		if err == nil || !errors.Is(err, syscall.EBUSY) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func removeCgroups() error {
	var errs []error
	for _, c := range cgroupControllers {
		root := filepath.Join(cgroupFS, c, cgroupRoot)
		var dirs []string
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			if err := os.Remove(dirs[i]); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// containerLogLinks is where kubelet links every container's log, whatever
// its podLogsDir.
const containerLogLinks = "/var/log/containers"

// removeContainerLogLinks removes kubelet's links into our Pods' logs.
func (c config) removeContainerLogLinks() error {
	entries, err := os.ReadDir(containerLogLinks)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		p := filepath.Join(containerLogLinks, e.Name())
		if target, err := os.Readlink(p); err == nil && strings.HasPrefix(target, c.path("pod-logs")+"/") {
			errs = append(errs, os.Remove(p))
		}
	}
	return errors.Join(errs...)
}
