package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Labels of the real node: type tells it from kwok's nodes (type=kwok) and
// is what a namespace's node selector names.
const (
	labelType = "type"
	typeReal  = "real"
)

// kubelet runs the node agent with its Pods below one cgroup of our own and
// its files below the node's directory. Settings the hosts need
// (docs/contributor/local-cluster.md): cgroup v1 allowed, the cgroupfs
// driver (no systemd) on v1 and v2 alike.
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

// cgroupRecord is where the node records the v2 controllers it enabled at
// the top of the hierarchy.
func (kubelet) cgroupRecord(ac *actionContext) string {
	return ac.path("saved", "cgroup-controllers.json")
}

// Up creates its cgroup and starts it.
func (k kubelet) Up(_ context.Context, ac *actionContext) error {
	mode, err := detectCgroupMode(cgroupFS)
	if err != nil {
		return err
	}
	if err := makeCgroupRoot(cgroupFS, mode, k.cgroupRecord(ac)); err != nil {
		return err
	}
	if err := ac.writeKubeletConfig(); err != nil {
		return err
	}
	return ac.start(k.daemon(ac))
}

// Down stops it, kills every process in its cgroup, removes the cgroups
// (v2: then takes back the controllers it enabled at the top) and its log
// links in /var/log/containers.
func (k kubelet) Down(_ context.Context, ac *actionContext) error {
	var errs []error
	errs = append(errs, ac.stop(k.daemon(ac)))
	// The containers, whatever their shims do meanwhile.
	errs = append(errs, killCgroupTree())
	mode, err := detectCgroupMode(cgroupFS)
	errs = append(errs, err)
	if err == nil {
		errs = append(errs, removeCgroupRoot(cgroupFS, mode))
	}
	if mode == cgroupUnified {
		kept, err := undelegateUnified(cgroupFS, k.cgroupRecord(ac))
		if len(kept) > 0 {
			ac.log.Printf("cgroup controllers %v stay enabled at %s: another program's cgroups use them now", kept, cgroupFS)
		}
		errs = append(errs, err)
	}
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
# cgroup v1 allowed (v2 needs nothing of it); no systemd: the cgroupfs driver
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
evictionHard: {memory.available: 100Mi, nodefs.available: ` + evictionFree() + `, imagefs.available: ` + evictionFree() + `, nodefs.inodesFree: 1%}
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
