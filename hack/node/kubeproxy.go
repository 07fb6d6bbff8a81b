package main

import (
	"context"
	"path/filepath"
	"time"
)

// kubeProxy makes Services answer on the node: ClusterIPs for Pods and this
// machine, NodePorts on the node's address and on localhost, where nodes
// pull the internal registry's images (localhost:<NodePort>). Settings this
// machine needs: no negative OOM score (no CAP_SYS_RESOURCE) and conntrack
// left as it is.
type kubeProxy struct{}

func (kubeProxy) Name() string { return "kube-proxy" }

func (kubeProxy) daemon(ac *actionContext) daemon {
	config := ac.path("kube-proxy.yaml")
	return daemon{name: "kube-proxy", path: filepath.Join(ac.assets, "kube-proxy"), args: []string{"--config=" + config}, config: config, grace: 5 * time.Second}
}

// Up writes its configuration and starts it.
func (k kubeProxy) Up(_ context.Context, ac *actionContext) error {
	gw := ac.gateway().String()
	config := `apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: ` + ac.kubeconfig("kube-proxy") + `
mode: iptables
hostnameOverride: ` + ac.name + `
bindAddress: ` + gw + `
healthzBindAddress: ` + gw + `:10256
metricsBindAddress: ` + gw + `:10249
clusterCIDR: ` + ac.podCIDR.String() + `
nodePortAddresses: [127.0.0.1/32, ` + gw + `/32]
iptables:
  localhostNodePorts: true
oomScoreAdj: 0
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
`
	return ac.startConfigured(k.daemon(ac), config)
}

// Down stops it only: its chains go with the iptables action's down.
func (k kubeProxy) Down(_ context.Context, ac *actionContext) error { return ac.stop(k.daemon(ac)) }
