package reconciler

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/internal/function/resources"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
	"github.com/kyma-project/serverless-manager/operator/pkg/scaletozero"
)

func TestDrainAt(t *testing.T) {
	since := time.Date(2026, 2, 1, 12, 0, 0, 0, time.UTC)
	const settle, timeout = 10 * time.Second, 30 * time.Second
	tests := []struct {
		name      string
		after     time.Duration
		wantPhase drainPhase
		wantNext  time.Duration
	}{
		{"just parked", 0, drainSettling, settle},
		{"settling", 4 * time.Second, drainSettling, 6 * time.Second},
		{"settled", settle, drainScraping, drainScrapeEvery},
		{"scraping", settle + 29*time.Second, drainScraping, drainScrapeEvery},
		{"the Function's timeout after the settle", settle + timeout, drainOver, 0},
		{"long over", time.Hour, drainOver, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			phase, next := drainAt(since, since.Add(tt.after), settle, timeout)
			assert.Equal(t, tt.wantPhase, phase)
			assert.Equal(t, tt.wantNext, next)
		})
	}
}

// scrapes answers the drain's scrapes by address.
type scrapes struct {
	mu  sync.Mutex
	by  map[string]scaletozero.Sample
	err error
}

func (s *scrapes) set(addr string, calls, returned float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.by == nil {
		s.by = map[string]scaletozero.Sample{}
	}
	s.by[addr] = scaletozero.Sample{Calls: calls, Returned: returned, HasReturned: true}
}

func (s *scrapes) scrape(_ context.Context, addr string) (scaletozero.Sample, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return scaletozero.Sample{}, s.err
	}
	sample, ok := s.by[addr]
	if !ok {
		return scaletozero.Sample{}, fmt.Errorf("nothing answers on %s", addr)
	}
	return sample, nil
}

// activatorSlice is an EndpointSlice of the activator's Service as the
// cluster makes it.
func activatorServiceSlice(namespace string, addrs ...string) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: module.ActivatorServiceName + "-x1", Namespace: namespace, Labels: map[string]string{
			discoveryv1.LabelServiceName: module.ActivatorServiceName, discoveryv1.LabelManagedBy: resources.ClusterSliceManager}},
		AddressType: discoveryv1.AddressTypeIPv4,
	}
	for _, a := range addrs {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{a}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
	}
	return s
}

func stzFunction(name string) *v1alpha2.Function {
	fn := newFunction(name)
	fn.Spec.ScaleConfig = scaled(0, 1)
	return fn
}

// stzFixture is a buildless fixture with a scale-to-zero Function, two ready
// activator Pods, Pods read through the fake client and scrapes answered
// by s.
func stzFixture(t *testing.T, fns ...*v1alpha2.Function) (*fixture, *scrapes) {
	t.Helper()
	objs := []client.Object{activatorServiceSlice(buildlessTestConfig(t).BaseNamespace, "10.9.0.2", "10.9.0.1")}
	for _, fn := range fns {
		objs = append(objs, fn)
	}
	f, _ := newBuildlessFixture(t, nil, objs...)
	s := &scrapes{}
	f.r.scrape, f.r.api = s.scrape, f.client
	return f, s
}

func (f *fixture) service(t *testing.T, name string) *corev1.Service {
	t.Helper()
	svc := &corev1.Service{}
	require.NoError(t, f.client.Get(context.Background(), types.NamespacedName{Namespace: testNS, Name: name}, svc))
	return svc
}

func (f *fixture) activatorSlice(t *testing.T, name string) *discoveryv1.EndpointSlice {
	t.Helper()
	var l discoveryv1.EndpointSliceList
	require.NoError(t, f.client.List(context.Background(), &l, client.InNamespace(testNS),
		client.MatchingLabels{discoveryv1.LabelManagedBy: module.ActivatorSliceManagedBy, v1alpha2.LabelFunctionName: name}))
	if len(l.Items) == 0 {
		return nil
	}
	require.Len(t, l.Items, 1)
	return &l.Items[0]
}

func addresses(s *discoveryv1.EndpointSlice) []string {
	var out []string
	for _, ep := range s.Endpoints {
		out = append(out, ep.Addresses...)
	}
	return out
}

// setReady gives the Function's Deployment ready replicas (as the
// Deployment controller would).
func (f *fixture) setReady(t *testing.T, ready int32) {
	t.Helper()
	deps := f.deployments(t)
	require.Len(t, deps, 1)
	dep := deps[0]
	replicas := ptr.Deref(dep.Spec.Replicas, 1)
	dep.Status = appsv1.DeploymentStatus{ObservedGeneration: dep.Generation, Replicas: replicas, ReadyReplicas: ready, AvailableReplicas: ready,
		Conditions: []appsv1.DeploymentCondition{
			depCond(appsv1.DeploymentAvailable, corev1.ConditionTrue, "MinimumReplicasAvailable"),
			depCond(appsv1.DeploymentProgressing, corev1.ConditionTrue, "NewReplicaSetAvailable"),
		}}
	require.NoError(t, f.client.Status().Update(context.Background(), &dep))
	f.writes.take()
}

// ownSlice is the slice the cluster's EndpointSlice controller makes for
// the Function's Service: the Service's labels, the Pods' addresses.
func (f *fixture) ownSlice(t *testing.T, fn *v1alpha2.Function, ready bool, addrs ...string) {
	t.Helper()
	labels := resources.FunctionLabels(fn)
	labels[discoveryv1.LabelServiceName] = fn.Name
	labels[discoveryv1.LabelManagedBy] = resources.ClusterSliceManager
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: fn.Name + "-own", Namespace: testNS, Labels: labels},
		AddressType: discoveryv1.AddressTypeIPv4,
	}
	for _, a := range addrs {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{a}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready)}})
	}
	require.NoError(t, f.client.Create(context.Background(), s))
	f.writes.take()
}

// pod is a ready Pod of the Function at addr.
func (f *fixture) functionPod(t *testing.T, fn *v1alpha2.Function, name, addr string) {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS, UID: types.UID("uid-" + name), Labels: resources.SelectorLabels(fn)},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "function", Image: "x"}}},
	}
	require.NoError(t, f.client.Create(context.Background(), pod))
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: addr,
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
	require.NoError(t, f.client.Status().Update(context.Background(), pod))
	f.writes.take()
}

// A scale-to-zero Function from its start to zero and back: waking while
// no replica is ready (its selector on, so that the cluster lists the
// starting replicas for the activator to probe, and the activator its only
// ready endpoint), served once one is, parked when asked for zero, its
// replicas drained before the Deployment goes to zero.
func TestScaleToZeroParksServesAndDrains(t *testing.T) {
	fn := stzFunction("hello")
	f, s := stzFixture(t, fn)
	selector := resources.SelectorLabels(fn)

	// New, no replica ready: waking.
	f.reconcile(t, "hello")
	assert.Equal(t, map[string]int{"create *v1.Deployment": 1, "create *v1.EndpointSlice": 1, "create *v1.Service": 1}, f.writes.take())
	slice := f.activatorSlice(t, "hello")
	require.NotNil(t, slice)
	assert.Equal(t, "hello-activator", slice.Name)
	assert.Equal(t, []string{"10.9.0.1", "10.9.0.2"}, addresses(slice), "the activator's ready Pods")
	assert.EqualValues(t, module.ActivatorPortFirst, *slice.Ports[0].Port)
	assert.Equal(t, selector, f.service(t, "hello").Spec.Selector, "waking: the cluster lists the starting replicas")

	// A replica is ready: the slice keeps the activator until the
	// Service's own slice shows the replica.
	f.setReady(t, 1)
	f.reconcile(t, "hello")
	assert.Equal(t, selector, f.service(t, "hello").Spec.Selector, "served")
	assert.Len(t, addresses(f.activatorSlice(t, "hello")), 2, "the activator stays until the Service's own slice is ready")
	f.ownSlice(t, fn, false, "10.1.0.5")
	f.reconcile(t, "hello")
	assert.Len(t, addresses(f.activatorSlice(t, "hello")), 2, "a Pod that is not ready yet does not count")
	require.NoError(t, f.client.DeleteAllOf(context.Background(), &discoveryv1.EndpointSlice{}, client.InNamespace(testNS),
		client.MatchingLabels{discoveryv1.LabelManagedBy: resources.ClusterSliceManager}))
	f.ownSlice(t, fn, true, "10.1.0.5")
	f.reconcile(t, "hello")
	assert.Empty(t, addresses(f.activatorSlice(t, "hello")), "served by its Pods alone")
	assertCondition(t, f.function(t, "hello"), v1alpha2.ConditionRunning, corev1.ConditionTrue, v1alpha2.ReasonDeploymentReady)
	f.writes.take()
	f.reconcile(t, "hello")
	assert.Empty(t, f.writes.take(), "steady")

	// Asked for zero: parked at once; the drain begins once the Service is
	// parked, and the replicas stay for the settle time. What the cluster
	// keeps of the Pods (its slices, the Endpoints object and the slices
	// mirrored from it once the selector is gone) goes with the selector.
	f.functionPod(t, fn, "hello-a", "10.1.0.5")
	//nolint:staticcheck // the object the cluster's mirroring copies from
	require.NoError(t, f.client.Create(context.Background(), &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: testNS}}))
	mirrored := resources.FunctionLabels(fn)
	mirrored[discoveryv1.LabelServiceName], mirrored[discoveryv1.LabelManagedBy] = "hello", resources.MirroredSliceManager
	require.NoError(t, f.client.Create(context.Background(), &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "hello-mirrored", Namespace: testNS, Labels: mirrored},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.1.0.5"}}},
	}))
	f.writes.take()
	f.edit(t, "hello", func(fn *v1alpha2.Function) { fn.Spec.Replicas = ptr.To[int32](0) })
	next := f.reconcile(t, "hello")
	assert.Equal(t, DefaultDrainSettle, next)
	assert.Empty(t, f.service(t, "hello").Spec.Selector)
	assert.Len(t, addresses(f.activatorSlice(t, "hello")), 2)
	var kept discoveryv1.EndpointSliceList
	require.NoError(t, f.client.List(context.Background(), &kept, client.InNamespace(testNS),
		client.MatchingLabels{discoveryv1.LabelServiceName: "hello"}))
	require.Len(t, kept.Items, 1, "only our slice is left")
	assert.True(t, resources.IsActivatorSlice(&kept.Items[0]))
	//nolint:staticcheck // the object the cluster's mirroring copies from
	err := f.client.Get(context.Background(), types.NamespacedName{Namespace: testNS, Name: "hello"}, &corev1.Endpoints{})
	assert.True(t, apierrors.IsNotFound(err), "the Endpoints object is deleted: %v", err)
	assert.EqualValues(t, 1, *f.deployments(t)[0].Spec.Replicas, "not parked when the pass began")
	assert.Equal(t, DefaultDrainSettle, f.reconcile(t, "hello"), "the drain begins")
	assert.EqualValues(t, 1, *f.deployments(t)[0].Spec.Replicas, "the settle time")

	// Scraped every 2 s while a call runs.
	f.now = f.now.Add(DefaultDrainSettle)
	s.set("10.1.0.5:8080", 7, 6)
	assert.Equal(t, drainScrapeEvery, f.reconcile(t, "hello"))
	assert.EqualValues(t, 1, *f.deployments(t)[0].Spec.Replicas, "a call in flight")

	// Drained: the Deployment goes to zero; Running says so.
	f.now = f.now.Add(drainScrapeEvery)
	s.set("10.1.0.5:8080", 7, 7)
	f.reconcile(t, "hello")
	assert.EqualValues(t, 0, *f.deployments(t)[0].Spec.Replicas)
	got := f.function(t, "hello")
	c := assertCondition(t, got, v1alpha2.ConditionRunning, corev1.ConditionTrue, v1alpha2.ReasonScaledToZero)
	assert.Equal(t, "scaled to zero after 5m0s without a request; the next request starts it", c.Message)
	assert.Zero(t, got.Status.Replicas)
	assert.EqualValues(t, module.ActivatorPortFirst, *f.activatorSlice(t, "hello").Ports[0].Port, "its port for its life")

	f.setReady(t, 0) // the Deployment controller's report at zero
	f.reconcile(t, "hello")
	assertCondition(t, f.function(t, "hello"), v1alpha2.ConditionRunning, corev1.ConditionTrue, v1alpha2.ReasonScaledToZero)

	// Woken: scaled up at once, its selector back at once, the activator
	// its only ready endpoint until a replica is ready.
	f.edit(t, "hello", func(fn *v1alpha2.Function) { fn.Spec.Replicas = ptr.To[int32](1) })
	f.reconcile(t, "hello")
	assert.EqualValues(t, 1, *f.deployments(t)[0].Spec.Replicas)
	assert.Equal(t, selector, f.service(t, "hello").Spec.Selector, "waking")
	assert.Len(t, addresses(f.activatorSlice(t, "hello")), 2, "no replica ready yet")
	f.setReady(t, 1)
	f.reconcile(t, "hello")
	assert.Equal(t, selector, f.service(t, "hello").Spec.Selector)
	assert.Len(t, addresses(f.activatorSlice(t, "hello")), 2, "until the Service's own slice shows the replica")
}

// A drain whose replicas never answer ends with the Function's timeout.
func TestDrainEndsWithTheFunctionTimeout(t *testing.T) {
	fn := stzFunction("hello")
	fn.Spec.Env = []corev1.EnvVar{{Name: "FUNC_TIMEOUT", Value: "30"}}
	f, s := stzFixture(t, fn)
	f.reconcile(t, "hello")
	f.setReady(t, 1)
	f.functionPod(t, fn, "hello-a", "10.1.0.5")
	s.err = errors.New("connection refused")

	f.edit(t, "hello", func(fn *v1alpha2.Function) { fn.Spec.Replicas = ptr.To[int32](0) })
	f.reconcile(t, "hello") // parks the Service
	f.reconcile(t, "hello") // the drain begins
	f.now = f.now.Add(DefaultDrainSettle + 29*time.Second)
	assert.Equal(t, drainScrapeEvery, f.reconcile(t, "hello"))
	assert.EqualValues(t, 1, *f.deployments(t)[0].Spec.Replicas, "not drained, not timed out")
	f.now = f.now.Add(time.Second)
	f.reconcile(t, "hello")
	assert.EqualValues(t, 0, *f.deployments(t)[0].Spec.Replicas, "FUNC_TIMEOUT after the settle")
}

// Without a ready Pod there is nothing to wait for once the nodes settled.
func TestDrainWithoutPodsEndsAfterTheSettle(t *testing.T) {
	f, _ := stzFixture(t, stzFunction("hello"))
	f.reconcile(t, "hello")
	f.setReady(t, 1)
	f.edit(t, "hello", func(fn *v1alpha2.Function) { fn.Spec.Replicas = ptr.To[int32](0) })
	f.reconcile(t, "hello") // parks the Service
	f.reconcile(t, "hello") // the drain begins
	assert.EqualValues(t, 1, *f.deployments(t)[0].Spec.Replicas)
	f.now = f.now.Add(DefaultDrainSettle)
	f.reconcile(t, "hello")
	assert.EqualValues(t, 0, *f.deployments(t)[0].Spec.Replicas)
}

// Functions without minReplicas 0 get no slice and keep their selector; a
// Function that turns scale to zero off gets its selector back and loses
// its slice.
func TestScaleToZeroOnlyForMinReplicasZero(t *testing.T) {
	plain := newFunction("plain")
	plain.Spec.ScaleConfig = scaled(1, 1)
	f, _ := stzFixture(t, plain, stzFunction("hello"))
	f.reconcile(t, "plain")
	assert.Equal(t, map[string]int{"create *v1.Deployment": 1, "create *v1.Service": 1}, f.writes.take())
	assert.Nil(t, f.activatorSlice(t, "plain"))
	assert.Equal(t, resources.SelectorLabels(plain), f.service(t, "plain").Spec.Selector)

	f.reconcile(t, "hello")
	require.NotNil(t, f.activatorSlice(t, "hello"))
	f.edit(t, "hello", func(fn *v1alpha2.Function) { fn.Spec.ScaleConfig = scaled(1, 1) })
	f.reconcile(t, "hello")
	assert.Nil(t, f.activatorSlice(t, "hello"), "scale to zero off")
	assert.Equal(t, resources.SelectorLabels(f.function(t, "hello")), f.service(t, "hello").Spec.Selector)
}

// Each scale-to-zero Function gets the lowest port no other slice of ours
// has, in any namespace, and keeps it.
func TestActivatorPortsAreAllocatedLowestFirst(t *testing.T) {
	other := stzFunction("elsewhere")
	other.Namespace = "other"
	f, _ := stzFixture(t, stzFunction("a"), stzFunction("b"), stzFunction("c"))
	port := func(name string) int32 { return *f.activatorSlice(t, name).Ports[0].Port }
	for _, name := range []string{"a", "b", "c"} {
		f.reconcile(t, name)
	}
	assert.EqualValues(t, []int32{20000, 20001, 20002}, []int32{port("a"), port("b"), port("c")})
	require.NoError(t, f.client.Delete(context.Background(), f.activatorSlice(t, "b")))
	f.reconcile(t, "c")
	assert.EqualValues(t, 20002, port("c"), "kept")
	f.reconcile(t, "b")
	assert.EqualValues(t, 20001, port("b"), "the lowest free one")
}

// With no ready activator Pod, dropping the selector would leave the
// Service without endpoints: it keeps it.
func TestNoActivatorKeepsTheSelector(t *testing.T) {
	fn := stzFunction("hello")
	f, _ := newBuildlessFixture(t, nil, fn, activatorServiceSlice(buildlessTestConfig(t).BaseNamespace))
	f.reconcile(t, "hello")
	assert.Equal(t, resources.SelectorLabels(fn), f.service(t, "hello").Spec.Selector)
	slice := f.activatorSlice(t, "hello")
	require.NotNil(t, slice, "the port is taken all the same")
	assert.Empty(t, slice.Endpoints)

	// Asked for zero, it keeps its replicas: without the activator nothing
	// would answer or wake it.
	f.setReady(t, 1)
	f.edit(t, "hello", func(fn *v1alpha2.Function) { fn.Spec.Replicas = ptr.To[int32](0) })
	for range 3 {
		f.reconcile(t, "hello")
		f.now = f.now.Add(DefaultDrainSettle + scaletozero.DefaultFunctionTimeout)
	}
	assert.EqualValues(t, 1, *f.deployments(t)[0].Spec.Replicas, "not drained while the Service is not parked")
	assert.Equal(t, resources.SelectorLabels(fn), f.service(t, "hello").Spec.Selector)
}

// Build mode: the same parking and drain around the built Deployment.
func TestScaleToZeroInBuildMode(t *testing.T) {
	fn := stzFunction("hello")
	f := builtFixture(t, fn, activatorServiceSlice(testConfig(t).BaseNamespace, "10.9.0.1"))
	f.r.api = f.client
	f.reconcile(t, "hello")
	require.Len(t, f.deployments(t), 1)
	assert.Equal(t, resources.SelectorLabels(fn), f.service(t, "hello").Spec.Selector, "waking until a replica is ready")
	assert.Equal(t, []string{"10.9.0.1"}, addresses(f.activatorSlice(t, "hello")))
	assert.Empty(t, f.hpas(t), "minReplicas 0, maxReplicas 1: no autoscaler")

	f.edit(t, "hello", func(fn *v1alpha2.Function) { fn.Spec.Replicas = ptr.To[int32](0) })
	f.reconcile(t, "hello") // parks the Service: the drain begins at the next pass
	f.reconcile(t, "hello")
	assert.EqualValues(t, 1, *f.deployments(t)[0].Spec.Replicas, "the settle time")
	f.now = f.now.Add(DefaultDrainSettle)
	f.reconcile(t, "hello")
	assert.EqualValues(t, 0, *f.deployments(t)[0].Spec.Replicas, "no Pod to drain")
	assertCondition(t, f.function(t, "hello"), v1alpha2.ConditionRunning, corev1.ConditionTrue, v1alpha2.ReasonScaledToZero)
}

// Slice changes wake scale-to-zero Functions, and any Function with a
// slice of ours; every other Function's Service slices wake nothing.
func TestSliceFunction(t *testing.T) {
	plain, stz := newFunction("plain"), stzFunction("hello")
	f := newFixture(t, plain, stz)
	own := func(fn *v1alpha2.Function) *discoveryv1.EndpointSlice {
		labels := resources.FunctionLabels(fn)
		labels[discoveryv1.LabelServiceName] = fn.Name
		labels[discoveryv1.LabelManagedBy] = resources.ClusterSliceManager
		return &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: fn.Name + "-x", Namespace: testNS, Labels: labels}}
	}
	tests := []struct {
		name  string
		slice *discoveryv1.EndpointSlice
		want  []string
	}{
		{"the Service's own, scale to zero", own(stz), []string{"hello"}},
		{"the Service's own, no scale to zero", own(plain), nil},
		{"ours, scale to zero", resources.ActivatorSlice(stz, 20000, "", nil), []string{"hello"}},
		{"ours left on a Function without scale to zero", resources.ActivatorSlice(plain, 20000, "", nil), []string{"plain"}},
		{"not a Function's", &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: testNS}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, req := range f.r.sliceFunction(context.Background(), tt.slice) {
				assert.Equal(t, testNS, req.Namespace)
				got = append(got, req.Name)
			}
			assert.Equal(t, tt.want, got)
		})
	}
}

// A Service of the Function's name that is not the Function's gets no
// slice of ours: it would send that Service's clients to the scaletozero.
func TestForeignServiceGetsNoActivatorSlice(t *testing.T) {
	foreign := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: testNS},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 1234}}, Selector: map[string]string{"app": "theirs"}}}
	f, _ := stzFixture(t, stzFunction("hello"))
	require.NoError(t, f.client.Create(context.Background(), foreign))
	f.reconcile(t, "hello")
	assertCondition(t, f.function(t, "hello"), v1alpha2.ConditionRunning, corev1.ConditionFalse, v1alpha2.ReasonServiceFailed)
	assert.Nil(t, f.activatorSlice(t, "hello"))
	assert.Equal(t, map[string]string{"app": "theirs"}, f.service(t, "hello").Spec.Selector, "left alone")
}

// The drain's scrape reads a replica's /metrics as the runtimes serve it.
func TestHTTPScraper(t *testing.T) {
	const metrics = "# HELP function_calls_total Number of calls\n# TYPE function_calls_total counter\n" +
		"function_calls_total{method=\"GET\"} 3\nfunction_calls_total{method=\"POST\"} 2\n" +
		"# TYPE function_duration_seconds histogram\n" +
		"function_duration_seconds_bucket{method=\"GET\",le=\"+Inf\"} 4\nfunction_duration_seconds_sum{method=\"GET\"} 0.4\nfunction_duration_seconds_count{method=\"GET\"} 4\n"
	tests := []struct {
		name    string
		status  int
		body    string
		want    scaletozero.Sample
		wantErr string
	}{
		{"a call in flight", http.StatusOK, metrics, scaletozero.Sample{Calls: 5, Returned: 4, HasReturned: true}, ""},
		{"no call counter", http.StatusOK, "# TYPE other counter\nother 1\n", scaletozero.Sample{}, "function_calls_total"},
		{"an error status", http.StatusServiceUnavailable, "", scaletozero.Sample{}, "503"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/metrics" {
					http.NotFound(w, r)
					return
				}
				w.WriteHeader(tt.status)
				_, _ = w.Write([]byte(tt.body))
			}))
			defer srv.Close()
			got, err := HTTPScraper(srv.Client())(context.Background(), strings.TrimPrefix(srv.URL, "http://"))
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}
