package main

import (
	"context"
	"path/filepath"
	"strconv"
	"time"

	"github.com/kyma-project/serverless-manager/hack/cluster/process"
)

// apiServer listens on the real node's address, which Pods reach (the
// kubernetes Service's endpoint).
type apiServer struct{}

func (apiServer) Name() string { return "kube-apiserver" }

// daemon: Pods without a node selector of their own go to the real node;
// a namespace annotated
// scheduler.alpha.kubernetes.io/node-selector=type=kwok sends its Pods to the
// simulated nodes (PodNodeSelector). Audit events are written synchronously
// by the request handler (none dropped) into one file (maxsize 0 would
// rotate at 100 MB). The metrics API is reached at the EndpointSlice's
// address (--enable-aggregator-routing).
func (apiServer) daemon(ac *actionContext) daemon {
	gw := ac.gateway().String()
	pki := filepath.Join(ac.state, "pki")
	return daemon{name: "kube-apiserver", path: filepath.Join(ac.assets, "kube-apiserver"), config: pki, grace: 5 * time.Second, args: []string{
		"--etcd-servers=http://127.0.0.1:" + strconv.Itoa(ac.etcdPort),
		"--bind-address=" + gw, "--advertise-address=" + gw, "--secure-port=" + strconv.Itoa(ac.apiServerPort),
		"--tls-cert-file=" + ac.pki("apiserver.crt"), "--tls-private-key-file=" + ac.pki("apiserver.key"), "--client-ca-file=" + ac.pki("ca.crt"),
		"--kubelet-client-certificate=" + ac.pki("kube-apiserver-kubelet-client.crt"), "--kubelet-client-key=" + ac.pki("kube-apiserver-kubelet-client.key"),
		"--kubelet-preferred-address-types=InternalIP",
		"--authorization-mode=Node,RBAC", "--allow-privileged=true",
		"--enable-admission-plugins=PodNodeSelector", "--admission-control-config-file=" + filepath.Join(ac.repo, "hack", "cluster", "admission.yaml"),
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + ac.pki("sa.pub"), "--service-account-signing-key-file=" + ac.pki("sa.key"),
		"--service-cluster-ip-range=" + ac.serviceCIDR.String(),
		"--audit-policy-file=" + filepath.Join(ac.repo, "hack", "cluster", "audit-policy.yaml"),
		"--audit-log-path=" + filepath.Join(ac.state, "audit.log"), "--audit-log-mode=blocking", "--audit-log-maxsize=100000",
		"--requestheader-client-ca-file=" + ac.pki("front-proxy-ca.crt"), "--requestheader-allowed-names=front-proxy-client",
		"--requestheader-username-headers=X-Remote-User", "--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file=" + ac.pki("front-proxy-client.crt"), "--proxy-client-key-file=" + ac.pki("front-proxy-client.key"),
		"--enable-aggregator-routing=true",
		"--cert-dir=" + pki, // last: stop tells its process by it
	}}
}

// Up starts it and waits for /readyz.
func (a apiServer) Up(ctx context.Context, ac *actionContext) error {
	if err := ac.start(a.daemon(ac)); err != nil {
		return err
	}
	return a.waitReady(ctx, ac)
}

func (a apiServer) Down(_ context.Context, ac *actionContext) error { return ac.stop(a.daemon(ac)) }

func (apiServer) waitReady(ctx context.Context, ac *actionContext) error {
	return waitFor(ctx, 120*time.Second, "kube-apiserver /readyz ok", func() error {
		if err := ac.checkAlive("kube-apiserver"); err != nil {
			return process.StopWaiting{Err: err}
		}
		return ac.apiServerReady()
	})
}

// restart kills the API server as a crash would (SIGKILL) and starts it
// again with the same state, for fault tests. The controller manager and
// the scheduler restart with it: the controller manager's garbage
// collector did not recover from a hard API server restart here
// (ReplicaSets of deleted Deployments stayed orphaned for minutes), and the
// scheduler reported its cache corrupted after one and was gone minutes
// later, Pods left Pending. kube-proxy and CoreDNS recover by themselves
// but late: the new API server refuses their watches (403) until its
// authorizer has loaded, and client-go then backs off for up to a minute
// (measured: a new Service had rules 62 s after it was created). So they
// restart too.
func (a apiServer) restart(ctx context.Context, ac *actionContext) error {
	if err := ac.daemons().Kill(ac.proc(a.daemon(ac))); err != nil {
		return err
	}
	if err := a.Up(ctx, ac); err != nil {
		return err
	}
	for _, d := range []daemon{controllerManager{}.daemon(ac), scheduler{}.daemon(ac)} {
		if err := ac.daemons().Restart(ac.proc(d)); err != nil {
			return err
		}
	}
	if err := redo(ctx, ac, kubeProxy{}); err != nil {
		return err
	}
	return redo(ctx, ac, coreDNS{})
}
