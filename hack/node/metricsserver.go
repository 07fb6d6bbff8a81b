package main

import (
	"context"
	"net"
	"path/filepath"
	"strconv"
	"time"
)

// metricsServer serves the resource metrics API (kubectl top, the
// HorizontalPodAutoscalers' CPU) from the real node's kubelet: kwok's
// simulated nodes have none to give. The API server reaches it through the
// APIService of the bootstrap objects and trusts it by the cluster CA; it
// trusts the API server's front-proxy certificate for the user the API
// server forwards.
type metricsServer struct{}

func (metricsServer) Name() string { return "metrics-server" }

// daemon scrapes the real node only, every 10 s (the least it allows; 15 s
// by default), so that HorizontalPodAutoscalers react soon.
func (metricsServer) daemon(ac *actionContext) daemon {
	kubeconfig := ac.kubeconfig("metrics-server")
	return daemon{name: "metrics-server", path: filepath.Join(ac.assets, "metrics-server"), args: []string{
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--authentication-skip-lookup",
		"--client-ca-file=" + ac.pki("ca.crt"),
		"--requestheader-client-ca-file=" + ac.pki("front-proxy-ca.crt"),
		"--requestheader-allowed-names=front-proxy-client",
		"--bind-address=" + ac.gateway().String(),
		"--secure-port=" + strconv.Itoa(ac.metricsServerPort),
		"--tls-cert-file=" + ac.pki("metrics-server-serving.crt"),
		"--tls-private-key-file=" + ac.pki("metrics-server-serving.key"),
		"--kubelet-certificate-authority=" + ac.pki("ca.crt"),
		"--kubelet-preferred-address-types=InternalIP",
		"--kubelet-use-node-status-port",
		"--node-selector=" + labelType + "=" + typeReal,
		"--metric-resolution=10s",
		"--kubelet-request-timeout=5s", // less than the resolution, which metrics-server requires
	}, config: kubeconfig, grace: 5 * time.Second}
}

// Up starts it and waits for its port.
func (m metricsServer) Up(ctx context.Context, ac *actionContext) error {
	if err := ac.start(m.daemon(ac)); err != nil {
		return err
	}
	return ac.waitListening(ctx, "metrics-server", "metrics-server", net.JoinHostPort(ac.gateway().String(), strconv.Itoa(ac.metricsServerPort)))
}

func (m metricsServer) Down(_ context.Context, ac *actionContext) error { return ac.stop(m.daemon(ac)) }
