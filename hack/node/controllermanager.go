package main

import (
	"context"
	"path/filepath"
	"strconv"
	"time"
)

// controllerManager runs kube-controller-manager; its down stops it.
type controllerManager struct{}

func (controllerManager) Name() string { return "kube-controller-manager" }

// daemon lets HorizontalPodAutoscalers act within seconds (every 5 s
// instead of 15, down after 30 s without a higher recommendation instead
// of 5 minutes), so that tests see a Function scale out and back in.
func (controllerManager) daemon(ac *actionContext) daemon {
	kubeconfig := ac.kubeconfig("kube-controller-manager")
	args := append(componentArgs(kubeconfig, ac.kcmPort),
		"--controllers=*,-nodeipam", "--use-service-account-credentials=true",
		"--service-account-private-key-file="+ac.pki("sa.key"), "--root-ca-file="+ac.pki("ca.crt"),
		"--cluster-signing-cert-file="+ac.pki("ca.crt"), "--cluster-signing-key-file="+ac.pki("ca.key"),
		"--horizontal-pod-autoscaler-sync-period=5s", "--horizontal-pod-autoscaler-downscale-stabilization=30s",
		"--kube-api-qps=100", "--kube-api-burst=200",
		"--kubeconfig="+kubeconfig, // last: stop tells its process by it
	)
	return daemon{name: "kube-controller-manager", path: filepath.Join(ac.assets, "kube-controller-manager"), config: kubeconfig, grace: 5 * time.Second, args: args}
}

// componentArgs are what kube-controller-manager and kube-scheduler are
// given alike: who they are to the API server, and their port on
// 127.0.0.1 (one instance each: no leader election).
func componentArgs(kubeconfig string, port int) []string {
	return []string{
		"--authentication-kubeconfig=" + kubeconfig, "--authorization-kubeconfig=" + kubeconfig,
		"--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(port), "--leader-elect=false",
	}
}

func (c controllerManager) Up(_ context.Context, ac *actionContext) error {
	return ac.start(c.daemon(ac))
}

func (c controllerManager) Down(_ context.Context, ac *actionContext) error {
	return ac.stop(c.daemon(ac))
}
