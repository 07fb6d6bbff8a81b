package main

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"time"

	"github.com/kyma-project/serverless-manager/hack/cluster/process"
)

// coreDNS is the cluster DNS: Services and Pods by name from the API
// server, everything else through this machine's resolver. It listens on the
// node's address, kubelet's clusterDNS.
type coreDNS struct{}

func (coreDNS) Name() string { return "coredns" }

func (coreDNS) daemon(ac *actionContext) daemon {
	config := ac.path("Corefile")
	return daemon{name: "coredns", path: filepath.Join(ac.assets, "coredns"), args: []string{"-conf", config}, config: config, grace: 5 * time.Second}
}

// Up writes the Corefile, starts it and waits until it resolves the API
// server's Service.
func (c coreDNS) Up(ctx context.Context, ac *actionContext) error {
	corefile := `.:53 {
    bind ` + ac.gateway().String() + `
    errors
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig ` + ac.kubeconfig("coredns") + `
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }
    forward . /etc/resolv.conf
    cache 30
}
`
	if err := ac.startConfigured(c.daemon(ac), corefile); err != nil {
		return err
	}
	resolver := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, net.JoinHostPort(ac.gateway().String(), "53"))
	}}
	return waitFor(ctx, 30*time.Second, "CoreDNS to resolve kubernetes.default.svc.cluster.local", func() error {
		if err := ac.checkAlive("coredns"); err != nil {
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
}

func (c coreDNS) Down(_ context.Context, ac *actionContext) error { return ac.stop(c.daemon(ac)) }
