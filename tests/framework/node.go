package framework

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/hack/cluster/localimage"
)

// Where Pods go. The local cluster has one real node (kubelet, containerd)
// and kwok's simulated nodes; a Pod goes to the real node unless its
// namespace's node selector annotation (the PodNodeSelector admission
// plugin, hack/cluster/admission.yaml) names the simulated ones.
const (
	NodeSelectorAnnotation = "scheduler.alpha.kubernetes.io/node-selector"
	// SimulatedNodes selects kwok's nodes: Pods are Running at once and
	// no container runs.
	SimulatedNodes = "type=kwok"
)

// Placement is where a namespace's Pods go.
type Placement bool

const (
	// RealNode runs Pods for real: images are pulled, containers start.
	RealNode Placement = false
	// Simulated puts Pods on kwok's nodes.
	Simulated Placement = true
)

func (p Placement) String() string {
	if p == Simulated {
		return "the simulated nodes"
	}
	return "the real node"
}

// PlacePods makes the Pods created in namespace ns from now on go to p (the
// namespace is created when missing). Pods that exist stay where they are.
func (c *Cluster) PlacePods(ctx context.Context, ns string, p Placement) error {
	n := &corev1.Namespace{}
	if err := c.client.Get(ctx, types.NamespacedName{Name: ns}, n); apierrors.IsNotFound(err) {
		n = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
		placeIn(n, p)
		if err := c.client.Create(ctx, n); err == nil || !apierrors.IsAlreadyExists(err) {
			return err
		}
		return c.PlacePods(ctx, ns, p)
	} else if err != nil {
		return err
	}
	patch := client.MergeFrom(n.DeepCopy())
	placeIn(n, p)
	return c.client.Patch(ctx, n, patch)
}

func placeIn(n *corev1.Namespace, p Placement) {
	if p == Simulated {
		if n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		n.Annotations[NodeSelectorAnnotation] = SimulatedNodes
		return
	}
	delete(n.Annotations, NodeSelectorAnnotation)
}

// SimulatedNamespace is Namespace whose Pods go to the simulated nodes.
func (c *Cluster) SimulatedNamespace(t testing.TB, prefix string) string {
	t.Helper()
	ns := c.Namespace(t, prefix)
	if err := c.PlacePods(t.Context(), ns, Simulated); err != nil {
		t.Fatalf("namespace %s on the simulated nodes: %v", ns, err)
	}
	return ns
}

// NodeRegistry is the registry (host:port, plain HTTP) the real node pulls
// the local images from.
func (c *Cluster) NodeRegistry() string { return c.Setting("NODE_REGISTRY") }

// NodeIP is the real node's address: the host as its Pods see it.
func (c *Cluster) NodeIP() string { return c.Setting("NODE_IP") }

// LocalImageEnv is the manager's environment that points the chart's
// runtime, registry and init images at the local images (IMAGE_<KEY>):
// what the published ones are for a Kyma cluster, these are here.
func (c *Cluster) LocalImageEnv() []string { return localimage.ManagerEnv(c.NodeRegistry()) }

// LoadImages pushes what `make image` wrote (bin/image) to the real node.
func (c *Cluster) LoadImages(ctx context.Context) error {
	if _, err := os.Stat(filepath.Join(c.root, "bin", "image", "manager")); err != nil {
		return fmt.Errorf("no images in bin/image: run make image first (make test-e2e does): %w", err)
	}
	_, err := runScript(ctx, c.root, "load")
	return err
}

// TrustRegistry lets the real node pull from a registry at addr (host:port)
// over plain HTTP, as an external registry without TLS is configured on a
// node.
func (c *Cluster) TrustRegistry(ctx context.Context, addr string) error {
	_, err := runScript(ctx, c.root, "insecure-registry", addr)
	return err
}

// Clientset is a client-go clientset (admin), for what controller-runtime's
// client does not do: logs.
func (c *Cluster) Clientset() (kubernetes.Interface, error) {
	return kubernetes.NewForConfig(c.RESTConfig())
}

// PodLog is the log of a container of a Pod ("" container: its only one).
func (c *Cluster) PodLog(ctx context.Context, ns, pod, container string) (string, error) {
	cs, err := c.Clientset()
	if err != nil {
		return "", err
	}
	data, err := cs.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: container}).DoRaw(ctx)
	if err != nil {
		return "", fmt.Errorf("log of %s/%s %s: %w", ns, pod, container, err)
	}
	return string(data), nil
}

// DumpPodLogs is a WaitFor dump of the last n lines of every container of
// the Pods matching labels in ns.
func (c *Cluster) DumpPodLogs(ns string, labels map[string]string, n int) func() string {
	return func() string {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var pods corev1.PodList
		if err := c.client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels(labels)); err != nil {
			return "listing Pods: " + err.Error()
		}
		var b strings.Builder
		for _, p := range pods.Items {
			for _, ctr := range append(append([]corev1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...) {
				log, err := c.PodLog(ctx, ns, p.Name, ctr.Name)
				if err != nil {
					log = err.Error()
				}
				lines := strings.Split(strings.TrimRight(log, "\n"), "\n")
				fmt.Fprintf(&b, "--- log of Pod %s/%s container %s (last %d lines)\n%s\n", ns, p.Name, ctr.Name, n,
					strings.Join(lines[max(0, len(lines)-n):], "\n"))
			}
		}
		if b.Len() == 0 {
			return fmt.Sprintf("no Pod in %s matches %v", ns, labels)
		}
		return b.String()
	}
}

// HTTPResponse is what a Service answered.
type HTTPResponse struct {
	Status int
	Header http.Header
	Body   string
}

// CallService sends one request to port 80 of Service ns/name at its
// ClusterIP, from this machine (through kube-proxy's rules, as from any
// node). A connection that fails is an error (kube-proxy programs a new
// Service asynchronously: callers that just created it poll).
func (c *Cluster) CallService(ctx context.Context, ns, name, method, path string, header http.Header, body []byte) (HTTPResponse, error) {
	svc := &corev1.Service{}
	if err := c.client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, svc); err != nil {
		return HTTPResponse{}, err
	}
	if svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == corev1.ClusterIPNone {
		return HTTPResponse{}, fmt.Errorf("Service %s/%s has no cluster IP", ns, name)
	}
	url := "http://" + net.JoinHostPort(svc.Spec.ClusterIP, "80") + path
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	if err != nil {
		return HTTPResponse{}, err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil}}
	resp, err := client.Do(req)
	if err != nil {
		return HTTPResponse{}, err
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return HTTPResponse{}, err
	}
	return HTTPResponse{Status: resp.StatusCode, Header: resp.Header, Body: string(data)}, nil
}

// WaitForAnswer calls GET path of Service ns/name until it answers 200 with
// a body for which ok holds, and returns that answer.
func (c *Cluster) WaitForAnswer(t testing.TB, timeout time.Duration, ns, name, path string, ok func(body string) bool, dumps ...func() string) HTTPResponse {
	t.Helper()
	var last HTTPResponse
	WaitFor(t, timeout, fmt.Sprintf("Service %s/%s to answer GET %s", ns, name, path), func(ctx context.Context) (bool, string, error) {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		r, err := c.CallService(ctx, ns, name, http.MethodGet, path, nil, nil)
		if err != nil {
			return false, err.Error(), nil
		}
		last = r
		return r.Status == http.StatusOK && ok(r.Body), fmt.Sprintf("HTTP %d: %.300s", r.Status, r.Body), nil
	}, dumps...)
	return last
}

// errNoReadyPod is RunningPod's when no Pod matches and is Ready.
var errNoReadyPod = errors.New("no Ready Pod")

// ReadyPod is the one Ready, not terminating Pod matching labels in ns.
func (c *Cluster) ReadyPod(ctx context.Context, ns string, labels map[string]string) (*corev1.Pod, error) {
	var pods corev1.PodList
	if err := c.client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels(labels)); err != nil {
		return nil, err
	}
	var ready []*corev1.Pod
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.DeletionTimestamp == nil && PodReady(p) {
			ready = append(ready, p)
		}
	}
	switch len(ready) {
	case 0:
		return nil, fmt.Errorf("%w in %s matches %v (%d Pods)", errNoReadyPod, ns, labels, len(pods.Items))
	case 1:
		return ready[0], nil
	default:
		return nil, fmt.Errorf("%d Ready Pods in %s match %v, not one", len(ready), ns, labels)
	}
}

// PodReady says the Pod's Ready condition is True.
func PodReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// ServiceAddress is host:port of Service ns/name's port at its ClusterIP,
// which this machine reaches through kube-proxy as a node does: how a test
// talks to what runs in the cluster (a registry, an agent) by Service.
func (c *Cluster) ServiceAddress(ctx context.Context, ns, name string, port int32) (string, error) {
	svc := &corev1.Service{}
	if err := c.client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, svc); err != nil {
		return "", err
	}
	if svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == corev1.ClusterIPNone {
		return "", fmt.Errorf("Service %s/%s has no cluster IP", ns, name)
	}
	for _, p := range svc.Spec.Ports {
		if p.Port == port {
			return net.JoinHostPort(svc.Spec.ClusterIP, fmt.Sprint(port)), nil
		}
	}
	return "", fmt.Errorf("Service %s/%s has no port %d", ns, name, port)
}
