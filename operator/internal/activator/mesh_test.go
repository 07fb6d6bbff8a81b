package activator

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/pkg/scaletozero"
)

// Mesh mode, against a stand-in for the activator's Istio sidecar: the
// activator dials a replica's Pod address, and the sidecar serves what it
// routes by the Host. A request whose Host names the Function's private
// Service reaches the replica (Istio keeps the address dialled for a
// headless Service and wraps the request in mutual TLS); any other passes
// through in plaintext, which the replica's sidecar in STRICT mode resets,
// and the activator's sidecar answers Envoy's 503.

// envoyReset is the body of Envoy's 503 when the upstream reset the
// connection.
const envoyReset = "upstream connect error or disconnect/reset before headers. reset reason: connection termination"

// seenRequest is what the replica behind the sidecar received.
type seenRequest struct {
	host, forwardedHost, path string
}

// meshSidecar is the stand-in: the replica serves requests for authority.
type meshSidecar struct {
	srv       *httptest.Server
	authority string
	mu        sync.Mutex
	seen      []seenRequest
	refused   []string // Hosts of the requests passed through and refused
}

func newMeshSidecar(t *testing.T, authority string, replica http.Handler) *meshSidecar {
	t.Helper()
	m := &meshSidecar{authority: authority}
	m.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.mu.Lock()
		if r.Host != m.authority {
			m.refused = append(m.refused, r.Host)
			m.mu.Unlock()
			http.Error(w, envoyReset, http.StatusServiceUnavailable)
			return
		}
		m.seen = append(m.seen, seenRequest{host: r.Host, forwardedHost: r.Header.Get("X-Forwarded-Host"), path: r.URL.Path})
		m.mu.Unlock()
		replica.ServeHTTP(w, r)
	}))
	t.Cleanup(m.srv.Close)
	return m
}

func (m *meshSidecar) requests() ([]seenRequest, []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]seenRequest(nil), m.seen...), append([]string(nil), m.refused...)
}

// transport dials the sidecar whatever Pod address a request names, as
// the Pod's traffic is redirected to it.
func (m *meshSidecar) transport() *http.Transport {
	addr := m.srv.Listener.Addr().String()
	return &http.Transport{DisableKeepAlives: true, DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}}
}

// A forwarded request names the private Service as its Host and keeps the
// caller's in X-Forwarded-Host (or the caller's own X-Forwarded-Host);
// without mesh mode it keeps the caller's Host, which the sidecar passes
// through in plaintext, and the replica's sidecar refuses it.
func TestMeshModeForwardsByThePrivateService(t *testing.T) {
	authority := scaletozero.MeshAuthority(hello.Namespace, hello.Name)
	replica := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "hi") })
	side := newMeshSidecar(t, authority, replica)
	target, err := url.Parse("http://10.1.0.7:8080")
	require.NoError(t, err)

	front := func(t *testing.T, opts Options) *httptest.Server {
		replicas := newFakeReplicas()
		replicas.set(target, nil)
		opts.Transport = side.transport()
		h, err := NewHolder(&fakeWaker{}, replicas, opts)
		require.NoError(t, err)
		srv := httptest.NewServer(h.Handler(hello))
		t.Cleanup(srv.Close)
		return srv
	}
	call := func(t *testing.T, srv *httptest.Server, header map[string]string) (int, string) {
		req, err := http.NewRequest(http.MethodGet, srv.URL+"/path", nil)
		require.NoError(t, err)
		req.Host = "hello.example.com"
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer func() { _ = resp.Body.Close() }()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(body)
	}

	mesh := front(t, Options{Authority: func(fn types.NamespacedName) string { return scaletozero.MeshAuthority(fn.Namespace, fn.Name) }})
	code, body := call(t, mesh, nil)
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "hi", body)
	code, _ = call(t, mesh, map[string]string{"X-Forwarded-Host": "gateway.example.com"})
	assert.Equal(t, http.StatusOK, code)
	seen, refused := side.requests()
	assert.Equal(t, []seenRequest{
		{host: "hello-private.default", forwardedHost: "hello.example.com", path: "/path"},
		{host: "hello-private.default", forwardedHost: "gateway.example.com", path: "/path"},
	}, seen)
	assert.Empty(t, refused)

	plain := front(t, Options{})
	code, body = call(t, plain, nil)
	assert.Equal(t, http.StatusServiceUnavailable, code, "the sidecar's answer reaches the caller")
	assert.Contains(t, body, "upstream connect error")
	_, refused = side.requests()
	assert.Equal(t, []string{"hello.example.com"}, refused, "the caller's Host is routed nowhere")
}

// slice is an EndpointSlice the cluster's EndpointSlice controller made
// for the Service named service, with the labels it copies from the
// Service (the Function's name) and, for a headless Service, its own.
func clusterSlice(ns, name, service, function string, headless bool, eps ...endpoint) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{
			discoveryv1.LabelServiceName: service,
			discoveryv1.LabelManagedBy:   "endpointslice-controller.k8s.io",
			v1alpha2.LabelManagedBy:      v1alpha2.ManagedByController,
			v1alpha2.LabelFunctionName:   function,
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	if headless {
		s.Labels[corev1.IsHeadlessService] = ""
	}
	for _, e := range eps {
		ep := discoveryv1.Endpoint{Addresses: []string{e.ip}, Conditions: discoveryv1.EndpointConditions{Ready: e.ready}}
		if e.uid != "" {
			ep.TargetRef = &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: e.uid, UID: types.UID(e.uid)}
		}
		s.Endpoints = append(s.Endpoints, ep)
	}
	return s
}

func fakeCache(t *testing.T, objs ...client.Object) client.Client {
	t.Helper()
	s, err := NewScheme()
	require.NoError(t, err)
	return fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).Build()
}

// In mesh mode a replica carries the private Service's Host when that
// Service's slices list it; the activator forwards to and probes only
// such replicas, and scrapes every ready one (those without a Host fail,
// and the leader says why). A Service of the private name that is not
// headless, or not the Function's, names nothing.
func TestMeshModeReplicasAreThoseThePrivateServiceLists(t *testing.T) {
	const ns = "default"
	yes, no := ptr.To(true), ptr.To(false)
	objs := []client.Object{
		&v1alpha2.Function{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hello"}},
		clusterSlice(ns, "hello-own", "hello", "hello", false,
			endpoint{ip: "10.1.0.1", ready: yes, uid: "a"}, endpoint{ip: "10.1.0.2", ready: yes, uid: "b"},
			endpoint{ip: "10.1.0.3", ready: no, uid: "c"}),
		clusterSlice(ns, "hello-private-x", "hello-private", "hello", true,
			endpoint{ip: "10.1.0.1", ready: yes}, endpoint{ip: "10.1.0.3", ready: yes}),
		clusterSlice(ns, "hello-private-lookalike", "hello-private", "hello", false, endpoint{ip: "10.1.0.2", ready: yes}),
		clusterSlice(ns, "hello-private-other", "hello-private", "hello-private", true, endpoint{ip: "10.1.0.2", ready: yes}),
	}
	c := fakeCache(t, objs...)
	const auth = "hello-private.default"

	off := &Kube{Cache: c}
	ready, err := off.ReadyReplicas(context.Background(), hello)
	require.NoError(t, err)
	assert.Equal(t, []Replica{{UID: "a", URL: mustURL(t, "http://10.1.0.1:8080")}, {UID: "b", URL: mustURL(t, "http://10.1.0.2:8080")}}, ready)

	mesh := &Kube{Cache: c, Mesh: v1alpha1.MeshIstio}
	ready, err = mesh.ReadyReplicas(context.Background(), hello)
	require.NoError(t, err)
	assert.Equal(t, []Replica{
		{UID: "a", URL: mustURL(t, "http://10.1.0.1:8080"), Authority: auth},
		{UID: "b", URL: mustURL(t, "http://10.1.0.2:8080")},
	}, ready, "all ready replicas are scraped")
	got, ok := mesh.Ready(hello)
	require.True(t, ok)
	assert.Equal(t, "10.1.0.1:8080", got.Host)

	r, s, err := mesh.replicas(context.Background(), hello)
	require.NoError(t, err)
	assert.Equal(t, []Replica{{UID: "a", URL: mustURL(t, "http://10.1.0.1:8080"), Authority: auth}}, mesh.reachable(r))
	assert.Equal(t, []Replica{{UID: "c", URL: mustURL(t, "http://10.1.0.3:8080"), Authority: auth}}, mesh.reachable(s),
		"the starting replica is listed too: the private Service publishes not-ready addresses")

	// Only unlisted ready replicas: none to forward to without a wait.
	c2 := fakeCache(t, &v1alpha2.Function{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hello"}},
		clusterSlice(ns, "hello-own", "hello", "hello", false, endpoint{ip: "10.1.0.2", ready: yes, uid: "b"}))
	_, ok = (&Kube{Cache: c2, Mesh: v1alpha1.MeshIstio}).Ready(hello)
	assert.False(t, ok, "a replica the private Service does not list cannot be reached in the mesh")
	_, ok = (&Kube{Cache: c2}).Ready(hello)
	assert.True(t, ok, "outside mesh mode it is ready")
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	require.NoError(t, err)
	return u
}

// A waking Function in mesh mode: the activator probes the starting
// replica the private Service lists, through the sidecar with its Host,
// and hands it to the held requests once it answers; a starting replica
// the private Service does not list is never probed.
func TestMeshModeProbesThroughThePrivateService(t *testing.T) {
	const ns = "default"
	no := ptr.To(false)
	up := make(chan struct{})
	replica := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-up:
		default:
			http.Error(w, "starting", http.StatusServiceUnavailable)
		}
	})
	side := newMeshSidecar(t, "hello-private.default", replica)
	c := fakeCache(t, &v1alpha2.Function{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hello"}},
		clusterSlice(ns, "hello-own", "hello", "hello", false,
			endpoint{ip: "10.1.0.4", ready: no, uid: "d"}, endpoint{ip: "10.1.0.5", ready: no, uid: "e"}),
		clusterSlice(ns, "hello-private-x", "hello-private", "hello", true, endpoint{ip: "10.1.0.4", ready: ptr.To(true)}))
	var mu sync.Mutex
	probed := map[string]string{}
	httpProbe := HTTPProbe(&http.Client{Transport: side.transport()})
	kube := &Kube{Cache: c, Mesh: v1alpha1.MeshIstio, ProbeEvery: 5 * time.Millisecond, Recheck: 50 * time.Millisecond,
		Probe: func(ctx context.Context, r Replica) error {
			mu.Lock()
			probed[r.URL.Host] = r.Authority
			mu.Unlock()
			return httpProbe(ctx, r)
		}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan *url.URL, 1)
	go func() {
		u, err := kube.Await(ctx, hello)
		assert.NoError(t, err)
		done <- u
	}()
	waitFor(t, "a probe of the listed replica", func() (bool, string) {
		_, refused := side.requests()
		mu.Lock()
		defer mu.Unlock()
		_, ok := probed["10.1.0.4:8080"]
		return ok, fmt.Sprintf("probed %v, refused %v", probed, refused)
	})
	close(up)
	select {
	case u := <-done:
		assert.Equal(t, "10.1.0.4:8080", u.Host)
	case <-ctx.Done():
		t.Fatal("the answering replica was not handed over")
	}
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, map[string]string{"10.1.0.4:8080": "hello-private.default"}, probed, "only the listed replica, with the private Service's Host")
	seen, refused := side.requests()
	assert.Empty(t, refused)
	require.NotEmpty(t, seen)
	assert.Equal(t, "/healthz", seen[len(seen)-1].path)
}

// A scrape in mesh mode names the private Service; one the sidecar passed
// through and the replica refused is a refusal the leader warns of. Outside
// mesh mode a 503 is no refusal (the replica's own answer).
func TestMeshModeScrapes(t *testing.T) {
	metrics := &replicaMetrics{}
	metrics.calls.Store(3)
	side := newMeshSidecar(t, "hello-private.default", metrics)
	hc := &http.Client{Transport: side.transport(), Timeout: scaletozero.ScrapeTimeout}
	listed := Replica{URL: mustURL(t, "http://10.1.0.1:8080"), Authority: "hello-private.default"}
	unlisted := Replica{URL: mustURL(t, "http://10.1.0.2:8080")}

	mesh, err := NewScaleDowns(ScaleDowns{HTTP: hc, Kube: &Kube{Mesh: v1alpha1.MeshIstio}}, nil)
	require.NoError(t, err)
	sample, err := mesh.scrapeOne(context.Background(), listed)
	require.NoError(t, err)
	assert.Equal(t, 3.0, sample.Calls)
	assert.Equal(t, "hello-private.default", metrics.host.Load())
	_, err = mesh.scrapeOne(context.Background(), unlisted)
	require.Error(t, err)
	assert.Equal(t, sidecarCannot, PlaintextRefusal(err), "error: %v", err)

	plain, err := NewScaleDowns(ScaleDowns{HTTP: hc, Kube: &Kube{}}, nil)
	require.NoError(t, err)
	_, err = plain.scrapeOne(context.Background(), unlisted)
	require.Error(t, err)
	assert.Empty(t, PlaintextRefusal(err), "no sidecar of the activator's: a 503 is the replica's")
}

// The mesh mode's note names the replica, the Function, the cause, the
// private Service and the sidecar, and points to the guide; it fits an
// event's note (1 KiB) for the longest names.
func TestMeshScrapeRefusedNote(t *testing.T) {
	note := meshScrapeRefusedNote(hello, "10.1.0.7:8080", sidecarCannot)
	for _, want := range []string{"10.1.0.7:8080", "default/hello", sidecarCannot, "Service hello-private", "hello-private.default",
		"istio-proxy", "never scaled to zero", ScrapeRefusedGuide} {
		assert.Contains(t, note, want)
	}
	long := types.NamespacedName{Namespace: "n" + strings.Repeat("n", 62), Name: "f" + strings.Repeat("a", 62)}
	assert.LessOrEqual(t, len(meshScrapeRefusedNote(long, "[fd00:1234:5678:9abc:def0:1234:5678:9abc]:8080", sidecarCannot)), 1024)
}
