package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/kyma-project/serverless-manager/operator/pkg/process"
)

// controlPlaneActions run after the network (the API server listens on the
// bridge's address) and before the node's own daemons, which talk to the
// API server.
func (n *node) controlPlaneActions() []action {
	return []action{
		n.certificates(),
		n.daemonAction(n.etcdDaemon(), n.waitForEtcd),
		n.daemonAction(n.apiServerDaemon(), n.waitForAPIServer),
		n.daemonAction(n.controllerManagerDaemon(), nil),
		n.daemonAction(n.schedulerDaemon(), nil),
		n.kwok(),
		n.bootstrapObjects(),
		n.volumeRecycler(),
	}
}

// daemonAction starts d and waits until ready says it serves; its down
// stops d.
func (n *node) daemonAction(d daemon, ready func(context.Context) error) action {
	return action{
		name: d.name,
		up: func(ctx context.Context) error {
			if err := n.start(d); err != nil {
				return err
			}
			if ready == nil {
				return nil
			}
			return ready(ctx)
		},
		down: func(context.Context) error { return n.stop(d) },
	}
}

// etcdDaemon keeps its data below the state directory; a throw-away cluster
// does not need durable writes (--unsafe-no-fsync).
func (n *node) etcdDaemon() daemon {
	dir := filepath.Join(n.state, "etcd")
	client := "http://127.0.0.1:" + strconv.Itoa(n.etcdPort)
	peer := "http://127.0.0.1:" + strconv.Itoa(n.etcdPeerPort)
	return daemon{name: "etcd", path: filepath.Join(n.assets, "etcd"), config: dir, grace: 5 * time.Second, args: []string{
		"--name=local", "--unsafe-no-fsync",
		"--listen-client-urls=" + client, "--advertise-client-urls=" + client,
		"--listen-peer-urls=" + peer, "--initial-advertise-peer-urls=" + peer,
		"--initial-cluster=local=" + peer,
		"--data-dir=" + dir, // last: stop tells its process by it
	}}
}

func (n *node) waitForEtcd(ctx context.Context) error {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(n.etcdPort))
	return waitFor(ctx, 30*time.Second, "etcd at "+addr, func() error {
		if err := n.checkAlive("etcd"); err != nil {
			return process.StopWaiting{Err: err}
		}
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return err
		}
		return conn.Close()
	})
}

// apiServerDaemon listens on the real node's address, which Pods reach (the
// kubernetes Service's endpoint). Pods without a node selector of their own
// go to the real node; a namespace annotated
// scheduler.alpha.kubernetes.io/node-selector=type=kwok sends its Pods to the
// simulated nodes (PodNodeSelector). Audit events are written synchronously
// by the request handler (none dropped) into one file (maxsize 0 would
// rotate at 100 MB). The metrics API is reached at the EndpointSlice's
// address (--enable-aggregator-routing).
func (n *node) apiServerDaemon() daemon {
	gw := n.gateway().String()
	pki := filepath.Join(n.state, "pki")
	return daemon{name: "kube-apiserver", path: filepath.Join(n.assets, "kube-apiserver"), config: pki, grace: 5 * time.Second, args: []string{
		"--etcd-servers=http://127.0.0.1:" + strconv.Itoa(n.etcdPort),
		"--bind-address=" + gw, "--advertise-address=" + gw, "--secure-port=" + strconv.Itoa(n.apiServerPort),
		"--tls-cert-file=" + n.pki("apiserver.crt"), "--tls-private-key-file=" + n.pki("apiserver.key"), "--client-ca-file=" + n.pki("ca.crt"),
		"--kubelet-client-certificate=" + n.pki("kube-apiserver-kubelet-client.crt"), "--kubelet-client-key=" + n.pki("kube-apiserver-kubelet-client.key"),
		"--kubelet-preferred-address-types=InternalIP",
		"--authorization-mode=Node,RBAC", "--allow-privileged=true",
		"--enable-admission-plugins=PodNodeSelector", "--admission-control-config-file=" + filepath.Join(n.repo, "hack", "cluster", "admission.yaml"),
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + n.pki("sa.pub"), "--service-account-signing-key-file=" + n.pki("sa.key"),
		"--service-cluster-ip-range=" + n.serviceCIDR.String(),
		"--audit-policy-file=" + filepath.Join(n.repo, "hack", "cluster", "audit-policy.yaml"),
		"--audit-log-path=" + filepath.Join(n.state, "audit.log"), "--audit-log-mode=blocking", "--audit-log-maxsize=100000",
		"--requestheader-client-ca-file=" + n.pki("front-proxy-ca.crt"), "--requestheader-allowed-names=front-proxy-client",
		"--requestheader-username-headers=X-Remote-User", "--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file=" + n.pki("front-proxy-client.crt"), "--proxy-client-key-file=" + n.pki("front-proxy-client.key"),
		"--enable-aggregator-routing=true",
		"--cert-dir=" + pki, // last: stop tells its process by it
	}}
}

func (n *node) waitForAPIServer(ctx context.Context) error {
	return waitFor(ctx, 120*time.Second, "kube-apiserver /readyz ok", func() error {
		if err := n.checkAlive("kube-apiserver"); err != nil {
			return process.StopWaiting{Err: err}
		}
		return n.apiServerReady()
	})
}

// controllerManagerDaemon lets HorizontalPodAutoscalers act within seconds
// (every 5 s instead of 15, down after 30 s without a higher recommendation
// instead of 5 minutes), so that tests see a Function scale out and back
// in.
func (n *node) controllerManagerDaemon() daemon {
	kubeconfig := n.kubeconfig("kube-controller-manager")
	return daemon{name: "kube-controller-manager", path: filepath.Join(n.assets, "kube-controller-manager"), config: kubeconfig, grace: 5 * time.Second, args: []string{
		"--authentication-kubeconfig=" + kubeconfig, "--authorization-kubeconfig=" + kubeconfig,
		"--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(n.kcmPort), "--leader-elect=false",
		"--controllers=*,-nodeipam", "--use-service-account-credentials=true",
		"--service-account-private-key-file=" + n.pki("sa.key"), "--root-ca-file=" + n.pki("ca.crt"),
		"--cluster-signing-cert-file=" + n.pki("ca.crt"), "--cluster-signing-key-file=" + n.pki("ca.key"),
		"--horizontal-pod-autoscaler-sync-period=5s", "--horizontal-pod-autoscaler-downscale-stabilization=30s",
		"--kube-api-qps=100", "--kube-api-burst=200",
		"--kubeconfig=" + kubeconfig, // last: stop tells its process by it
	}}
}

func (n *node) schedulerDaemon() daemon {
	kubeconfig := n.kubeconfig("kube-scheduler")
	return daemon{name: "kube-scheduler", path: filepath.Join(n.assets, "kube-scheduler"), config: kubeconfig, grace: 5 * time.Second, args: []string{
		"--authentication-kubeconfig=" + kubeconfig, "--authorization-kubeconfig=" + kubeconfig,
		"--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(n.schedulerPort), "--leader-elect=false",
		"--kubeconfig=" + kubeconfig, // last: stop tells its process by it
	}}
}

// kwok plays the kubelet of the simulated nodes (those annotated
// kwok.x-k8s.io/node=fake), with kwok's stock stages: nodes become Ready,
// Pods Running and Ready, Job Pods Succeed.
func (n *node) kwok() action {
	return action{
		name: "kwok",
		up: func(context.Context) error {
			stages, err := n.kwokStages()
			if err != nil {
				return err
			}
			return n.start(n.kwokDaemon(stages))
		},
		down: func(context.Context) error { return n.stop(n.kwokDaemon("")) },
	}
}

func (n *node) kwokDaemon(stages string) daemon {
	kubeconfig := n.kubeconfig("kwok")
	return daemon{name: "kwok", path: filepath.Join(n.assets, "kwok"), config: kubeconfig, grace: 5 * time.Second, args: []string{
		"--config=" + stages,
		"--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
		"--node-lease-duration-seconds=40", "--cidr=" + n.fakePodCIDR.String(),
		"--server-address=127.0.0.1:" + strconv.Itoa(n.kwokPort),
		"--kubeconfig=" + kubeconfig, // last: stop tells its process by it
	}}
}

// kwokStages are the stock stages shipped in the kwok Go module that
// hack/tools.sh built kwok from; `go mod download` finds it in the module
// cache (or fetches it).
func (n *node) kwokStages() (string, error) {
	cmd := exec.Command("go", "mod", "download", "-json", "sigs.k8s.io/kwok")
	cmd.Dir = filepath.Join(n.repo, "hack", "tools", "kwok")
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("finding the kwok module (go mod download sigs.k8s.io/kwok in %s): %w", cmd.Dir, err)
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil {
		return "", fmt.Errorf("reading go mod download's answer: %w", err)
	}
	s := filepath.Join(mod.Dir, "kustomize", "stage")
	if _, err := os.Stat(s); err != nil {
		return "", fmt.Errorf("kwok's stages: %w", err)
	}
	return strings.Join([]string{
		filepath.Join(s, "node", "fast", "node-initialize.yaml"),
		filepath.Join(s, "node", "heartbeat-with-lease", "node-heartbeat-with-lease.yaml"),
		filepath.Join(s, "pod", "fast", "pod-ready.yaml"),
		filepath.Join(s, "pod", "fast", "pod-complete.yaml"),
		filepath.Join(s, "pod", "fast", "pod-delete.yaml"),
	}, ","), nil
}

// bootstrapObjects creates what the cluster needs beyond its defaults
// (bootstrap.go) and waits until kwok reports the simulated nodes Ready.
// Its down has nothing to do: the objects go with etcd's data.
func (n *node) bootstrapObjects() action {
	return action{
		name: "bootstrap objects",
		up: func(ctx context.Context) error {
			for i := range n.pvs {
				if err := os.MkdirAll(n.volumeDir(i), 0o755); err != nil {
					return err
				}
			}
			ca, err := os.ReadFile(n.pki("ca.crt"))
			if err != nil {
				return err
			}
			cmd := n.kubectlCommand("apply", "-f", "-")
			cmd.Stdin = strings.NewReader(n.bootstrapYAML(ca))
			if out, err := cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("kubectl apply: %w: %s", err, out)
			}
			return waitFor(ctx, 120*time.Second, fmt.Sprintf("%d simulated nodes Ready", n.nodes), func() error {
				if err := n.checkAlive("kwok"); err != nil {
					return process.StopWaiting{Err: err}
				}
				return n.simulatedNodesReady()
			})
		},
	}
}

// simulatedNodesReady counts the simulated nodes that are Ready and carry
// no taint (the node-lifecycle controller lifts node.kubernetes.io/not-ready
// once kwok reports Ready).
func (n *node) simulatedNodesReady() error {
	out, err := n.kubectl("get", "nodes", "-l", labelType+"=kwok", "-o", "json")
	if err != nil {
		return err
	}
	var list struct {
		Items []struct {
			Spec struct {
				Taints []struct{ Key string } `json:"taints"`
			} `json:"spec"`
			Status struct {
				Conditions []struct{ Type, Status string } `json:"conditions"`
			} `json:"status"`
		} `json:"items"`
	}
	if err := json.Unmarshal(out, &list); err != nil {
		return fmt.Errorf("reading the node list: %w", err)
	}
	ready := 0
	for _, item := range list.Items {
		for _, c := range item.Status.Conditions {
			if c.Type == "Ready" && c.Status == "True" && len(item.Spec.Taints) == 0 {
				ready++
			}
		}
	}
	if ready < n.nodes {
		return fmt.Errorf("%d of %d Ready and untainted", ready, n.nodes)
	}
	return nil
}

// kubectlCommand is kubectl as the cluster's admin.
func (n *node) kubectlCommand(args ...string) *exec.Cmd {
	return exec.Command(filepath.Join(n.assets, "kubectl"),
		append([]string{"--kubeconfig=" + filepath.Join(n.state, "kubeconfig"), "--request-timeout=10s"}, args...)...)
}

func (n *node) kubectl(args ...string) ([]byte, error) {
	cmd := n.kubectlCommand(args...)
	out, err := cmd.Output()
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return out, fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(exit.Stderr)))
		}
		return out, fmt.Errorf("kubectl %s: %w", strings.Join(args, " "), err)
	}
	return out, nil
}

// restartAPIServer kills the API server as a crash would (SIGKILL) and
// starts it again with the same state, for fault tests. The controller
// manager and the scheduler restart with it: the controller manager's
// garbage collector did not recover from a hard API server restart here
// (ReplicaSets of deleted Deployments stayed orphaned for minutes), and the
// scheduler reported its cache corrupted after one and was gone minutes
// later, Pods left Pending. kube-proxy and CoreDNS recover by themselves
// but late: the new API server refuses their watches (403) until its
// authorizer has loaded, and client-go then backs off for up to a minute
// (measured: a new Service had rules 62 s after it was created). So they
// restart too.
func (n *node) restartAPIServer(ctx context.Context) error {
	if err := n.daemons().Kill(n.proc(n.apiServerDaemon())); err != nil {
		return err
	}
	if err := n.start(n.apiServerDaemon()); err != nil {
		return err
	}
	if err := n.waitForAPIServer(ctx); err != nil {
		return err
	}
	for _, d := range []daemon{n.controllerManagerDaemon(), n.schedulerDaemon()} {
		if err := n.daemons().Restart(n.proc(d)); err != nil {
			return err
		}
	}
	if err := redo(ctx, n.kubeProxy()); err != nil {
		return err
	}
	return redo(ctx, n.coreDNS())
}

func (c config) volumeDir(i int) string {
	return filepath.Join(c.state, "volumes", "pv-"+strconv.Itoa(i))
}
