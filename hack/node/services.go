package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/kyma-project/serverless-manager/operator/pkg/process"
)

// kubeProxy makes Services answer on the node: ClusterIPs for Pods and this
// machine, NodePorts on the node's address and on localhost, where nodes
// pull the internal registry's images (localhost:<NodePort>). Settings this
// machine needs: no negative OOM score (no CAP_SYS_RESOURCE) and conntrack
// left as it is.
func (n *node) kubeProxy() action {
	return action{
		name: "kube-proxy",
		up: func(context.Context) error {
			gw := n.gateway().String()
			config := `apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: ` + n.kubeconfig("kube-proxy") + `
mode: iptables
hostnameOverride: ` + n.name + `
bindAddress: ` + gw + `
healthzBindAddress: ` + gw + `:10256
metricsBindAddress: ` + gw + `:10249
clusterCIDR: ` + n.podCIDR.String() + `
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
			if err := os.WriteFile(n.path("kube-proxy.yaml"), []byte(config), 0o644); err != nil {
				return err
			}
			return n.start(n.kubeProxyDaemon())
		},
		// Its chains go with the iptables action's down.
		down: func(context.Context) error { return n.stop(n.kubeProxyDaemon()) },
	}
}

// coreDNS is the cluster DNS: Services and Pods by name from the API
// server, everything else through this machine's resolver. It listens on the
// node's address, kubelet's clusterDNS.
func (n *node) coreDNS() action {
	return action{
		name: "coredns",
		up: func(ctx context.Context) error {
			corefile := `.:53 {
    bind ` + n.gateway().String() + `
    errors
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig ` + n.kubeconfig("coredns") + `
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }
    forward . /etc/resolv.conf
    cache 30
}
`
			if err := os.WriteFile(n.path("Corefile"), []byte(corefile), 0o644); err != nil {
				return err
			}
			if err := n.start(n.coreDNSDaemon()); err != nil {
				return err
			}
			resolver := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, network, net.JoinHostPort(n.gateway().String(), "53"))
			}}
			return waitFor(ctx, 30*time.Second, "CoreDNS to resolve kubernetes.default.svc.cluster.local", func() error {
				if err := n.checkAlive("coredns"); err != nil {
					return process.StopWaiting{Err: err}
				}
				ctx, cancel := context.WithTimeout(ctx, time.Second)
				defer cancel()
				addrs, err := resolver.LookupHost(ctx, "kubernetes.default.svc.cluster.local")
				if err != nil {
					return err
				}
				if len(addrs) == 0 {
					return errors.New("no address")
				}
				return nil
			})
		},
		down: func(context.Context) error { return n.stop(n.coreDNSDaemon()) },
	}
}

// metricsServer serves the resource metrics API (kubectl top, the
// HorizontalPodAutoscalers' CPU) from the real node's kubelet: kwok's
// simulated nodes have none to give. The API server reaches it through the
// APIService of the bootstrap objects and trusts it by the cluster CA; it
// trusts the API server's front-proxy certificate for the user the API
// server forwards.
func (n *node) metricsServer() action {
	return action{
		name: "metrics-server",
		up: func(ctx context.Context) error {
			if err := n.start(n.metricsServerDaemon()); err != nil {
				return err
			}
			addr := net.JoinHostPort(n.gateway().String(), strconv.Itoa(n.metricsServerPort))
			return waitFor(ctx, 30*time.Second, "metrics-server at "+addr, func() error {
				if err := n.checkAlive("metrics-server"); err != nil {
					return process.StopWaiting{Err: err}
				}
				conn, err := net.DialTimeout("tcp", addr, time.Second)
				if err != nil {
					return err
				}
				return conn.Close()
			})
		},
		down: func(context.Context) error { return n.stop(n.metricsServerDaemon()) },
	}
}

// imageRegistry runs the registry the node pulls every image from
// (distribution, as the chart's internal registry), on the node's address:
// Pods reach it too, which build steps do to read the runtime images. It
// starts with the images the node needs for itself (localimage.NodeImages).
func (n *node) imageRegistry() action {
	return action{
		name: "image registry",
		up: func(ctx context.Context) error {
			config := `version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: ` + n.path("registry") + `
  delete:
    enabled: true
http:
  addr: ` + n.registry() + `
`
			if err := os.MkdirAll(n.dir(), 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(n.path("registry.yaml"), []byte(config), 0o644); err != nil {
				return err
			}
			if err := n.start(n.registryDaemon()); err != nil {
				return err
			}
			if err := waitFor(ctx, 30*time.Second, "the image registry at "+n.registry(), func() error {
				if err := n.checkAlive("image-registry"); err != nil {
					return process.StopWaiting{Err: err}
				}
				conn, err := net.DialTimeout("tcp", n.registry(), time.Second)
				if err != nil {
					return err
				}
				return conn.Close()
			}); err != nil {
				return err
			}
			if err := n.pushNodeImages(ctx); err != nil {
				return fmt.Errorf("the node's own images: %w", err)
			}
			return nil
		},
		down: func(context.Context) error { return n.stop(n.registryDaemon()) },
	}
}

func (n *node) kubeProxyDaemon() daemon {
	config := n.path("kube-proxy.yaml")
	return daemon{name: "kube-proxy", path: filepath.Join(n.assets, "kube-proxy"), args: []string{"--config=" + config}, config: config, grace: 5 * time.Second}
}

func (n *node) coreDNSDaemon() daemon {
	config := n.path("Corefile")
	return daemon{name: "coredns", path: filepath.Join(n.assets, "coredns"), args: []string{"-conf", config}, config: config, grace: 5 * time.Second}
}

// metricsServerDaemon scrapes the real node only, every 10 s (the least
// it allows; 15 s by default), so that HorizontalPodAutoscalers react soon.
func (n *node) metricsServerDaemon() daemon {
	kubeconfig := n.kubeconfig("metrics-server")
	return daemon{name: "metrics-server", path: filepath.Join(n.assets, "metrics-server"), args: []string{
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--authentication-skip-lookup",
		"--client-ca-file=" + n.pki("ca.crt"),
		"--requestheader-client-ca-file=" + n.pki("front-proxy-ca.crt"),
		"--requestheader-allowed-names=front-proxy-client",
		"--bind-address=" + n.gateway().String(),
		"--secure-port=" + strconv.Itoa(n.metricsServerPort),
		"--tls-cert-file=" + n.pki("metrics-server-serving.crt"),
		"--tls-private-key-file=" + n.pki("metrics-server-serving.key"),
		"--kubelet-certificate-authority=" + n.pki("ca.crt"),
		"--kubelet-preferred-address-types=InternalIP",
		"--kubelet-use-node-status-port",
		"--node-selector=" + labelType + "=" + typeReal,
		"--metric-resolution=10s",
		"--kubelet-request-timeout=5s", // less than the resolution, which metrics-server requires
	}, config: kubeconfig, grace: 5 * time.Second}
}

func (n *node) registryDaemon() daemon {
	config := n.path("registry.yaml")
	return daemon{name: "image-registry", path: filepath.Join(n.assets, "registry"), args: []string{"serve", config}, config: config, grace: 5 * time.Second}
}
