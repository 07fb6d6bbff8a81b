package activator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
	"github.com/kyma-project/serverless-manager/tests/support/loopback"
	"github.com/kyma-project/serverless-manager/tests/support/repo"
)

// cluster is an API server with the Function CRD, a client, and the
// activator's cache of it.
type cluster struct {
	cfg   *rest.Config
	c     client.Client
	cache cache.Cache
}

// startCluster starts envtest with the Function CRD. Its minReplicas is
// admitted down to 0 here whatever the CRD says: the CRD's change is the
// Function controller's part of scale to zero, and the activator's tests
// need such Functions. With -short the test is skipped.
func startCluster(t *testing.T) *cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("starts an API server")
	}
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		assets = filepath.Join(repo.MustRoot(), "bin", "assets")
	}
	data, err := os.ReadFile(filepath.Join(repo.MustRoot(), "charts", "serverless", "crds",
		"serverless.kyma-project.io_functions.yaml"))
	require.NoError(t, err)
	crd := &apiextensionsv1.CustomResourceDefinition{}
	require.NoError(t, yaml.Unmarshal(data, crd))
	for i := range crd.Spec.Versions {
		v := &crd.Spec.Versions[i]
		if v.Name != v1alpha2.GroupVersion.Version {
			continue
		}
		sc := v.Schema.OpenAPIV3Schema.Properties["spec"].Properties["scaleConfig"]
		min := sc.Properties["minReplicas"]
		min.Minimum = ptr.To(0.0)
		sc.Properties["minReplicas"] = min
		v.Schema.OpenAPIV3Schema.Properties["spec"].Properties["scaleConfig"] = sc
	}
	env := &envtest.Environment{BinaryAssetsDirectory: assets,
		CRDInstallOptions: envtest.CRDInstallOptions{CRDs: []*apiextensionsv1.CustomResourceDefinition{crd}}}
	cfg, err := env.Start()
	require.NoError(t, err, "starting the API server (KUBEBUILDER_ASSETS=%s)", assets)
	t.Cleanup(func() { _ = env.Stop() })
	scheme, err := NewScheme()
	require.NoError(t, err)
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	require.NoError(t, err)
	opts := CacheOptions()
	opts.Scheme = scheme
	cc, err := cache.New(cfg, opts)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _ = cc.Start(ctx) }()
	// Informers start on first use: ask for both before waiting.
	for _, obj := range []client.Object{&v1alpha2.Function{}, &discoveryv1.EndpointSlice{}} {
		_, err := cc.GetInformer(ctx, obj)
		require.NoError(t, err)
	}
	require.True(t, cc.WaitForCacheSync(ctx), "the cache did not sync")
	return &cluster{cfg: cfg, c: c, cache: cc}
}

// eventually polls cond until it holds or 20 s pass, then fails with
// what cond saw last.
func eventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ok, saw := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 20s; last saw %s", what, saw)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (k *cluster) namespace(t *testing.T, name string) string {
	t.Helper()
	require.NoError(t, client.IgnoreAlreadyExists(k.c.Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})))
	return name
}

// function creates a Function; minReplicas nil leaves scaleConfig out.
func (k *cluster) function(t *testing.T, ns, name string, replicas int32, minReplicas *int32, annotations map[string]string) *v1alpha2.Function {
	t.Helper()
	f := &v1alpha2.Function{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: annotations},
		Spec: v1alpha2.FunctionSpec{
			Runtime:  v1alpha2.RuntimeNodejs22,
			Source:   v1alpha2.Source{Inline: &v1alpha2.InlineSource{Source: "module.exports = { main: () => 'hi' }"}},
			Replicas: ptr.To(replicas),
		},
	}
	if minReplicas != nil {
		f.Spec.ScaleConfig = &v1alpha2.ScaleConfig{MinReplicas: minReplicas, MaxReplicas: ptr.To[int32](3)}
	}
	require.NoError(t, k.c.Create(context.Background(), f))
	// The cache sees it before the test goes on.
	eventually(t, "the cache has the Function", func() (bool, string) {
		err := k.cache.Get(context.Background(), client.ObjectKeyFromObject(f), &v1alpha2.Function{})
		return err == nil, fmt.Sprint(err)
	})
	return f
}

// caseFunction is k.function for one case of a table, deleted (and gone
// from the cache) when the case ends: each round sees every Function, and
// the next case must not see this one.
func (k *cluster) caseFunction(t *testing.T, ns, name string, replicas int32, minReplicas *int32, annotations map[string]string) *v1alpha2.Function {
	t.Helper()
	f := k.function(t, ns, name, replicas, minReplicas, annotations)
	t.Cleanup(func() {
		require.NoError(t, k.c.Delete(context.Background(), f))
		eventually(t, "the cache loses the Function", func() (bool, string) {
			err := k.cache.Get(context.Background(), client.ObjectKeyFromObject(f), &v1alpha2.Function{})
			return apierrors.IsNotFound(err), fmt.Sprint(err)
		})
	})
	return f
}

func (k *cluster) scale(t *testing.T, fn types.NamespacedName) int32 {
	t.Helper()
	f := &v1alpha2.Function{}
	require.NoError(t, k.c.Get(context.Background(), fn, f))
	require.NotNil(t, f.Spec.Replicas)
	return *f.Spec.Replicas
}

// setScale writes the scale subresource as the HPA or a user would.
func setScale(ctx context.Context, c client.Client, fn types.NamespacedName, n int32) error {
	f := &v1alpha2.Function{ObjectMeta: metav1.ObjectMeta{Namespace: fn.Namespace, Name: fn.Name}}
	s := &autoscalingv1.Scale{}
	if err := c.SubResource("scale").Get(ctx, f, s); err != nil {
		return err
	}
	s.Spec.Replicas = n
	return c.SubResource("scale").Update(ctx, f, client.WithSubResourceBody(s))
}

// raiseBeforeFirstWrite is a client whose first scale write is preceded
// by another writer raising the Function to `to`: the write it makes
// carries a stale resourceVersion.
func raiseBeforeFirstWrite(c client.Client, to int32, writes *atomic.Int32) client.Client {
	return interceptor.NewClient(c.(client.WithWatch), interceptor.Funcs{
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			if writes.Add(1) == 1 {
				if err := setScale(ctx, c, client.ObjectKeyFromObject(obj), to); err != nil {
					return err
				}
			}
			return c.SubResource(sub).Update(ctx, obj, opts...)
		},
	})
}

type endpoint struct {
	ip    string
	ready *bool
	uid   string
}

// slice creates an EndpointSlice for the Function's Service: ours (with
// the activator's managed-by and a port) or the cluster's.
func (k *cluster) slice(t *testing.T, ns, name, service string, ours bool, port int32, eps ...endpoint) *discoveryv1.EndpointSlice {
	t.Helper()
	owner := "endpointslice-controller.k8s.io"
	if ours {
		owner = module.ActivatorSliceManagedBy
	}
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{
			discoveryv1.LabelServiceName: service,
			discoveryv1.LabelManagedBy:   owner,
			v1alpha2.LabelManagedBy:      v1alpha2.ManagedByController,
			v1alpha2.LabelFunctionName:   service,
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To(SlicePortName), Port: ptr.To(port), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	for _, e := range eps {
		ep := discoveryv1.Endpoint{Addresses: []string{e.ip}, Conditions: discoveryv1.EndpointConditions{Ready: e.ready}}
		if e.uid != "" {
			ep.TargetRef = &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: e.uid, UID: types.UID(e.uid)}
		}
		s.Endpoints = append(s.Endpoints, ep)
	}
	require.NoError(t, k.c.Create(context.Background(), s))
	eventually(t, "the cache has the EndpointSlice", func() (bool, string) {
		err := k.cache.Get(context.Background(), client.ObjectKeyFromObject(s), &discoveryv1.EndpointSlice{})
		return err == nil, fmt.Sprint(err)
	})
	return s
}

func TestCluster(t *testing.T) {
	k := startCluster(t)
	t.Run("Waker", func(t *testing.T) { testWaker(t, k) })
	t.Run("Replicas", func(t *testing.T) { testReplicas(t, k) })
	t.Run("Listeners", func(t *testing.T) { testListeners(t, k) })
	t.Run("ListenersOfAStoppingReplica", func(t *testing.T) { testListenersOfAStoppingReplica(t, k) })
	t.Run("ScaleDowns", func(t *testing.T) { testScaleDowns(t, k) })
	t.Run("FailureRecorder", func(t *testing.T) { testFailureRecorder(t, k) })
	t.Run("WaitCause", func(t *testing.T) { testWaitCause(t, k) })
}

type event struct {
	regarding            string
	kind, reason, action string
	note                 string
}

type events struct{ got []event }

func (e *events) Eventf(regarding, _ runtime.Object, kind, reason, action, note string, args ...any) {
	obj := regarding.(client.Object)
	e.got = append(e.got, event{obj.GetNamespace() + "/" + obj.GetName(), kind, reason, action, fmt.Sprintf(note, args...)})
}

func testFailureRecorder(t *testing.T, k *cluster) {
	ns := k.namespace(t, "recorder")
	k.function(t, ns, "broken", 0, nil, nil)
	tests := []struct {
		name    string
		fn      string
		failure *Failure
		want    []event
	}{
		{name: "a Warning with the reason and the details for the owner", fn: "broken",
			failure: &Failure{Reason: StartFailed, Cause: "DeploymentFailed", Detail: "image example/x cannot be pulled"},
			want: []event{{regarding: "recorder/broken", kind: corev1.EventTypeWarning, reason: "StartFailed", action: "Wake",
				note: "StartFailed (DeploymentFailed): image example/x cannot be pulled"}}},
		{name: "a Function that is gone gets none", fn: "gone",
			failure: &Failure{Reason: WakeFailed, Detail: "not found"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := &events{}
			kube := &Kube{Cache: k.cache, Client: k.c, Events: rec}
			kube.WakeFailed(types.NamespacedName{Namespace: ns, Name: tc.fn}, tc.failure)
			assert.Equal(t, tc.want, rec.got)
		})
	}
}

func testWaker(t *testing.T, k *cluster) {
	ns := k.namespace(t, "waker")
	tests := []struct {
		name     string
		replicas int32
		// raiseTo, when set, is written by another writer between the
		// wake's read and its write.
		raiseTo    int32
		want       int32
		wantWrites int32
	}{
		{name: "at zero: 0 becomes 1", replicas: 0, want: 1, wantWrites: 1},
		{name: "running: 3 stays 3, nothing written", replicas: 3, want: 3, wantWrites: 0},
		{name: "raised meanwhile: the conflict is read again and 2 stays", replicas: 0, raiseTo: 2, want: 2, wantWrites: 1},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := k.function(t, ns, "fn-"+strconv.Itoa(i), tc.replicas, nil, nil)
			fn := client.ObjectKeyFromObject(f)
			var writes atomic.Int32
			c := client.Client(countWrites(k.c, &writes))
			if tc.raiseTo != 0 {
				c = raiseBeforeFirstWrite(k.c, tc.raiseTo, &writes)
			}
			kube := &Kube{Cache: k.cache, Client: c}
			require.NoError(t, kube.Wake(context.Background(), fn))
			assert.Equal(t, tc.want, k.scale(t, fn))
			assert.Equal(t, tc.wantWrites, writes.Load(), "scale writes")
		})
	}
	t.Run("a Function that does not exist is an error", func(t *testing.T) {
		kube := &Kube{Cache: k.cache, Client: k.c}
		err := kube.Wake(context.Background(), types.NamespacedName{Namespace: ns, Name: "missing"})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "waker/missing")
	})
}

func countWrites(c client.Client, writes *atomic.Int32) client.Client {
	return interceptor.NewClient(c.(client.WithWatch), interceptor.Funcs{
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			writes.Add(1)
			return c.SubResource(sub).Update(ctx, obj, opts...)
		},
	})
}

func testReplicas(t *testing.T, k *cluster) {
	ns := k.namespace(t, "replicas")
	t.Run("the Service's own ready endpoints count, ours and unready ones do not", func(t *testing.T) {
		f := k.function(t, ns, "ready", 1, nil, nil)
		fn := client.ObjectKeyFromObject(f)
		// The unready endpoint is probed: it never answers.
		kube := &Kube{Cache: k.cache, Client: k.c, Probe: (&fakeProbes{}).probe}
		_, ok := kube.Ready(fn)
		assert.False(t, ok, "no slices yet")

		k.slice(t, ns, "ready-activator", "ready", true, 20000, endpoint{ip: "198.51.100.9"})
		k.slice(t, ns, "ready-abcde", "ready", false, 8080,
			endpoint{ip: "198.51.100.1", ready: ptr.To(false), uid: "pod-a"})
		_, ok = kube.Ready(fn)
		assert.False(t, ok, "only our slice and an unready endpoint")

		done := awaitInBackground(t, kube, fn)
		k.slice(t, ns, "ready-fghij", "ready", false, 8080, endpoint{ip: "198.51.100.2", ready: ptr.To(true), uid: "pod-b"})
		r := <-done
		require.NoError(t, r.err)
		assert.Equal(t, "http://198.51.100.2:8080", r.u.String())

		replicas, err := kube.ReadyReplicas(context.Background(), fn)
		require.NoError(t, err)
		require.Len(t, replicas, 1)
		assert.Equal(t, "pod-b", replicas[0].UID)
	})

	t.Run("a starting replica that answers the probe is taken before the cluster calls it ready", func(t *testing.T) {
		f := k.function(t, ns, "starting", 1, nil, nil)
		fn := client.ObjectKeyFromObject(f)
		probes := &fakeProbes{}
		kube := &Kube{Cache: k.cache, Client: k.c, Probe: probes.probe, ProbeEvery: 10 * time.Millisecond}
		// Addresses that must never be probed: the activator's own (our
		// slice) and another Function's starting replica.
		k.slice(t, ns, "starting-activator", "starting", true, 20001, endpoint{ip: "198.51.100.14"})
		k.slice(t, ns, "other-abcde", "other", false, 8080, endpoint{ip: "198.51.100.15", ready: ptr.To(false), uid: "pod-o"})
		probes.answer("198.51.100.14:8080", "198.51.100.15:8080")
		// Two starting replicas: one never answers, one answers a moment
		// after the wait began.
		k.slice(t, ns, "starting-abcde", "starting", false, 8080,
			endpoint{ip: "198.51.100.12", ready: ptr.To(false), uid: "pod-silent"},
			endpoint{ip: "198.51.100.13", ready: ptr.To(false), uid: "pod-late"})
		_, ok := kube.Ready(fn)
		require.False(t, ok, "nothing answered a probe yet")

		done := awaitInBackground(t, kube, fn)
		eventually(t, "both starting replicas probed", func() (bool, string) {
			n := probes.count()
			return n["198.51.100.12:8080"] > 2 && n["198.51.100.13:8080"] > 2, fmt.Sprint(n)
		})
		probes.answer("198.51.100.13:8080")
		r := <-done
		require.NoError(t, r.err)
		const want = "http://198.51.100.13:8080"
		assert.Equal(t, want, r.u.String(), "the replica that answered, while the slice still calls it not ready")
		n := probes.count()
		assert.Zero(t, n["198.51.100.14:8080"], "the activator's own address is never probed")
		assert.Zero(t, n["198.51.100.15:8080"], "another Function's replica is never probed")

		u, ok := kube.Ready(fn)
		require.True(t, ok, "the replica that answered serves the next requests")
		assert.Equal(t, want, u.String())

		// Its container fails: forwarding to it fails, and it is not used
		// again until it answers a probe anew.
		probes.silence("198.51.100.13:8080")
		kube.Failed(fn, u)
		_, ok = kube.Ready(fn)
		assert.False(t, ok, "a replica that failed after its answer is not used again")
		short, cancelShort := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancelShort()
		_, err := kube.Await(short, fn)
		assert.ErrorIs(t, err, context.DeadlineExceeded, "no replica answers now")
	})

	running := func(reason string, at time.Time) v1alpha2.Condition {
		return v1alpha2.Condition{Type: v1alpha2.ConditionRunning, Status: corev1.ConditionFalse,
			Reason: reason, Message: "image example/x cannot be pulled",
			LastTransitionTime: metav1.NewTime(at)}
	}
	tests := []struct {
		name   string
		reason string
		// conditionAge is how long before the wake the condition was set;
		// negative: after it.
		conditionAge time.Duration
		wantFailure  bool
	}{
		{name: "DeploymentFailed after the wake is StartFailed", reason: v1alpha2.ReasonDeploymentFailed, conditionAge: -2 * time.Second, wantFailure: true},
		{name: "DeploymentFailed from before the wake is not", reason: v1alpha2.ReasonDeploymentFailed, conditionAge: time.Hour, wantFailure: false},
		{name: "ReplicaImagePullFailed after the wake is StartFailed", reason: v1alpha2.ReasonReplicaImagePullFailed, conditionAge: -2 * time.Second, wantFailure: true},
		{name: "ReplicaCrashLoop after the wake is StartFailed", reason: v1alpha2.ReasonReplicaCrashLoop, conditionAge: -2 * time.Second, wantFailure: true},
		{name: "ReplicaConfigError after the wake is StartFailed", reason: v1alpha2.ReasonReplicaConfigError, conditionAge: -2 * time.Second, wantFailure: true},
		{name: "ReplicaRefused after the wake is StartFailed", reason: v1alpha2.ReasonReplicaRefused, conditionAge: -2 * time.Second, wantFailure: true},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := k.function(t, ns, "failing-"+strconv.Itoa(i), 0, nil, nil)
			fn := client.ObjectKeyFromObject(f)
			kube := &Kube{Cache: k.cache, Client: k.c, Recheck: 100 * time.Millisecond}
			wokeAt := time.Now()
			require.NoError(t, kube.Wake(context.Background(), fn))
			require.NoError(t, k.c.Get(context.Background(), fn, f))
			k.setCondition(t, f, running(tc.reason, wokeAt.Add(-tc.conditionAge)))

			// Without a failure Await waits for a replica until ctx ends.
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_, err := kube.Await(ctx, fn)
			var failure *Failure
			if tc.wantFailure {
				require.ErrorAs(t, err, &failure)
				assert.Equal(t, StartFailed, failure.Reason)
				assert.Equal(t, tc.reason, failure.Cause)
				assert.Equal(t, "image example/x cannot be pulled", failure.Detail)
				return
			}
			require.Error(t, err)
			assert.False(t, errors.As(err, &failure), "an old condition is no failure: %v", err)
			assert.ErrorIs(t, err, context.DeadlineExceeded)
		})
	}
}

// setCondition writes c as f's only condition and waits for the cache to
// have it.
func (k *cluster) setCondition(t *testing.T, f *v1alpha2.Function, c v1alpha2.Condition) {
	t.Helper()
	f.Status.Conditions = []v1alpha2.Condition{c}
	require.NoError(t, k.c.Status().Update(context.Background(), f))
	eventually(t, "the cache has the condition", func() (bool, string) {
		got := &v1alpha2.Function{}
		err := k.cache.Get(context.Background(), client.ObjectKeyFromObject(f), got)
		return err == nil && len(got.Status.Conditions) == 1, fmt.Sprint(err, got.Status.Conditions)
	})
}

// awaited is what Kube.Await returned.
type awaited struct {
	u   *url.URL
	err error
}

// awaitInBackground runs kube.Await for fn, bounded by 20 s, and hands its
// result over.
func awaitInBackground(t *testing.T, kube *Kube, fn types.NamespacedName) <-chan awaited {
	done := make(chan awaited, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	go func() {
		u, err := kube.Await(ctx, fn)
		done <- awaited{u, err}
	}()
	return done
}

// fakeProbes answers the probes of the addresses the test says answer,
// and counts every probe by address: no connection is made.
type fakeProbes struct {
	mu        sync.Mutex
	answering map[string]bool
	probed    map[string]int
}

func (p *fakeProbes) probe(_ context.Context, r Replica) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.probed == nil {
		p.probed = map[string]int{}
	}
	p.probed[r.URL.Host]++
	if p.answering[r.URL.Host] {
		return nil
	}
	return errors.New("connection refused")
}

func (p *fakeProbes) answer(hosts ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.answering == nil {
		p.answering = map[string]bool{}
	}
	for _, h := range hosts {
		p.answering[h] = true
	}
}

func (p *fakeProbes) silence(host string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.answering, host)
}

func (p *fakeProbes) count() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.probed)
}

// testWaitCause: a wake that times out while the Function reports that the
// cluster cannot place its replica says so in its Failure.
func testWaitCause(t *testing.T, k *cluster) {
	ns := k.namespace(t, "waitcause")
	f := k.function(t, ns, "big", 0, ptr.To[int32](0), nil)
	fn := client.ObjectKeyFromObject(f)
	kube := &Kube{Cache: k.cache, Client: k.c, Recheck: 100 * time.Millisecond}
	k.setCondition(t, f, v1alpha2.Condition{Type: v1alpha2.ConditionRunning, Status: corev1.ConditionUnknown,
		Reason: v1alpha2.ReasonReplicaUnschedulable, LastTransitionTime: metav1.Now(),
		Message: "Deployment big-abcde: Pod big-abcde-12345 is not placed: 0/4 nodes are available: 1 Insufficient cpu."})
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	_, err := kube.Await(ctx, fn)
	var failure *Failure
	require.ErrorAs(t, err, &failure)
	assert.Equal(t, WakeTimeout, failure.Reason)
	assert.Equal(t, "ReplicaUnschedulable: 0/4 nodes are available: 1 Insufficient cpu.", failure.Cause, "the scheduler's words, for any caller")
	assert.Contains(t, failure.Detail, "Pod big-abcde-12345", "the Pod's name for the owner only")

	// A Function's own hold timeout, read from the cache.
	assert.Equal(t, time.Minute, kube.HoldTimeout(fn, time.Minute), "none set")
	f = &v1alpha2.Function{}
	require.NoError(t, k.c.Get(context.Background(), fn, f))
	f.Annotations = map[string]string{v1alpha2.AnnotationWakeTimeout: "150s"}
	require.NoError(t, k.c.Update(context.Background(), f))
	eventually(t, "the Function's own hold timeout", func() (bool, string) {
		got := kube.HoldTimeout(fn, time.Minute)
		return got == 150*time.Second, got.String()
	})
}

func freePort(t *testing.T) int32 {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	return int32(port)
}

// getLocal GETs / on the port of this machine: the body, or the error.
func getLocal(port int32) string {
	resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(int(port)) + "/") //nolint:gosec // test URL
	if err != nil {
		return "error: " + err.Error()
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(resp.Body)
	return string(body)
}

// nameHandler answers with the Function's name.
func nameHandler(fn types.NamespacedName) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, fn.String()) })
}

func testListeners(t *testing.T, k *cluster) {
	a, b := k.namespace(t, "listeners-a"), k.namespace(t, "listeners-b")
	kube := &Kube{Cache: k.cache, Client: k.c}
	l := &Listeners{
		Cache: k.cache, Log: logr.Discard(), Host: "127.0.0.1", ShutdownTimeout: time.Second,
		Handler: nameHandler,
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	require.NoError(t, Notify(ctx, k.cache, kube, l))
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		_ = l.Start(ctx)
	}()
	port := freePort(t)
	get := func() string { return getLocal(port) }
	serves := func(want string) func() (bool, string) {
		return func() (bool, string) { got := get(); return got == want, got }
	}
	refused := func() (bool, string) {
		got := get()
		_, open := l.Ports()[port]
		return !open && got != "listeners-a/hello" && got != "listeners-b/other", got
	}

	first := k.slice(t, a, "hello-activator", "hello", true, port)
	eventually(t, "the slice's port serves its Function", serves("listeners-a/hello"))

	second := k.slice(t, b, "other-activator", "other", true, port)
	eventually(t, "a port claimed twice is served for neither", refused)

	require.NoError(t, k.c.Delete(context.Background(), second))
	eventually(t, "the remaining claim is served again", serves("listeners-a/hello"))

	require.NoError(t, k.c.Delete(context.Background(), first))
	eventually(t, "the port closes with its slice", refused)

	k.slice(t, b, "next-activator", "next", true, port)
	eventually(t, "the free port serves the Function given it next", serves("listeners-b/next"))

	cancel()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("the listeners did not stop within 10s of their context")
	}
}

// testListenersOfAStoppingReplica: a replica whose address a slice of ours
// lists keeps serving after it was told to stop, until the slice drops the
// address and the settle time passed; one no slice lists serves for the
// settle time; one still listed stops after its bound.
func testListenersOfAStoppingReplica(t *testing.T, k *cluster) {
	ns := k.namespace(t, "leaving")
	// Addresses no other subtest puts in a slice.
	const self, other, unlisted = "192.0.2.7", "192.0.2.8", "192.0.2.9"
	port := freePort(t)
	slice := k.slice(t, ns, "parked-activator", "parked", true, port, endpoint{ip: self}, endpoint{ip: other})
	get := func() string { return getLocal(port) }
	// start runs a replica with address; it returns its cancel and a
	// channel closed when Start returned.
	start := func(address string, leave time.Duration) (*Listeners, context.CancelFunc, chan struct{}) {
		l := &Listeners{
			Cache: k.cache, Log: testr.New(t), Host: "127.0.0.1", ShutdownTimeout: time.Second,
			Address: address, Settle: 500 * time.Millisecond, Leave: leave,
			Handler: nameHandler,
		}
		require.Error(t, l.Ready(nil), "ready before the listeners opened their ports")
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		require.NoError(t, Notify(ctx, k.cache, &Kube{Cache: k.cache, Client: k.c}, l))
		stopped := make(chan struct{})
		go func() {
			defer close(stopped)
			_ = l.Start(ctx)
		}()
		eventually(t, "the replica serves the parked Function", func() (bool, string) {
			got := get()
			return got == ns+"/parked" && l.Ready(nil) == nil, got
		})
		return l, cancel, stopped
	}
	// stopsWithin returns how long after since the replica stopped; since
	// is taken before the cause, so the replica's own clock starts later.
	stopsWithin := func(since time.Time, stopped chan struct{}, d time.Duration, what string) time.Duration {
		t.Helper()
		select {
		case <-stopped:
			return time.Since(since)
		case <-time.After(d):
			t.Fatalf("%s: still listening after %s; the port answers %q", what, d, get())
			return 0
		}
	}

	// stopNow tells the replica to stop and returns how long it took.
	stopNow := func(cancel context.CancelFunc, stopped chan struct{}, d time.Duration, what string) time.Duration {
		t.Helper()
		stop := time.Now()
		cancel()
		return stopsWithin(stop, stopped, d, what)
	}

	t.Run("no slice lists it any more: serves for the settle time, the nodes may not have followed", func(t *testing.T) {
		_, cancel, stopped := start(unlisted, 20*time.Second)
		took := stopNow(cancel, stopped, 5*time.Second, "a replica no slice lists")
		assert.GreaterOrEqual(t, took, 500*time.Millisecond, "serves for the settle time")
	})

	t.Run("listed: serves until the slice drops it and the nodes settled", func(t *testing.T) {
		_, cancel, stopped := start(self, 20*time.Second)
		cancel()
		time.Sleep(time.Second)
		require.Equal(t, ns+"/parked", get(), "a stopping replica that a slice lists still answers")
		select {
		case <-stopped:
			t.Fatal("stopped while a slice lists the replica")
		default:
		}
		fresh := &discoveryv1.EndpointSlice{}
		require.NoError(t, k.c.Get(context.Background(), client.ObjectKeyFromObject(slice), fresh))
		fresh.Endpoints = fresh.Endpoints[1:]
		dropped := time.Now()
		require.NoError(t, k.c.Update(context.Background(), fresh))
		took := stopsWithin(dropped, stopped, 10*time.Second, "a replica the slice dropped")
		assert.GreaterOrEqual(t, took, 500*time.Millisecond, "serves for the settle time after the slice dropped it")
		assert.Contains(t, get(), "connection refused", "the port is closed once it stopped")
	})

	t.Run("still listed: stops after its bound", func(t *testing.T) {
		_, cancel, stopped := start(other, 2*time.Second)
		took := stopNow(cancel, stopped, 10*time.Second, "a replica past its bound")
		assert.GreaterOrEqual(t, took, 2*time.Second, "serves until its bound")
	})
}

// replicaMetrics is a replica's /metrics with a call counter the test sets.
type replicaMetrics struct {
	calls    atomic.Int64
	inFlight atomic.Int64
	fail     atomic.Bool
	scrapes  atomic.Int64
	host     atomic.Value
}

func (m *replicaMetrics) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m.scrapes.Add(1)
	m.host.Store(r.Host)
	if m.fail.Load() || r.URL.Path != "/metrics" {
		http.Error(w, "no", http.StatusInternalServerError)
		return
	}
	calls := m.calls.Load()
	fmt.Fprintf(w, "# TYPE function_calls_total counter\nfunction_calls_total{method=\"GET\"} %d\n"+
		"# TYPE function_duration_seconds histogram\nfunction_duration_seconds_bucket{method=\"GET\",le=\"+Inf\"} %d\n"+
		"function_duration_seconds_sum{method=\"GET\"} 0\nfunction_duration_seconds_count{method=\"GET\"} %d\n",
		calls, calls-m.inFlight.Load(), calls-m.inFlight.Load())
}

func testScaleDowns(t *testing.T, k *cluster) {
	ns := k.namespace(t, "scale-downs")
	window := map[string]string{v1alpha2.AnnotationScaleToZeroAfter: "10s"}
	tests := []struct {
		name        string
		minReplicas *int32
		annotations map[string]string
		// each round, before it is scraped
		round func(i int, m *replicaMetrics)
		// raiseTo is written by another writer between the leader's read
		// of the scale and its write.
		raiseTo     int32
		want        int32
		wantResult  string
		wantScrapes bool
	}{
		{name: "idle for its window: scaled to zero", minReplicas: ptr.To[int32](0), annotations: window,
			round: func(int, *replicaMetrics) {}, want: 0, wantResult: scaleDownScaled, wantScrapes: true},
		{name: "a call each round: kept", minReplicas: ptr.To[int32](0), annotations: window,
			round: func(_ int, m *replicaMetrics) { m.calls.Add(1) }, want: 1, wantScrapes: true},
		{name: "a call running the whole time: kept", minReplicas: ptr.To[int32](0), annotations: window,
			round: func(_ int, m *replicaMetrics) { m.calls.Store(1); m.inFlight.Store(1) }, want: 1, wantScrapes: true},
		{name: "scrapes failing since before the window ended: kept", minReplicas: ptr.To[int32](0), annotations: window,
			round: func(i int, m *replicaMetrics) { m.fail.Store(i >= 4) }, want: 1, wantScrapes: true},
		{name: "raised while scaling down: the conflict leaves it", minReplicas: ptr.To[int32](0), annotations: window,
			round: func(int, *replicaMetrics) {}, raiseTo: 2, want: 2, wantResult: scaleDownConflict, wantScrapes: true},
		{name: "minReplicas 1: not watched", minReplicas: ptr.To[int32](1), annotations: window,
			round: func(int, *replicaMetrics) {}, want: 1},
		{name: "no scaleConfig: not watched", annotations: window,
			round: func(int, *replicaMetrics) {}, want: 1},
		{name: "an invalid window: not watched", minReplicas: ptr.To[int32](0),
			annotations: map[string]string{v1alpha2.AnnotationScaleToZeroAfter: "5s"},
			round:       func(int, *replicaMetrics) {}, want: 1},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			metrics := &replicaMetrics{}
			srv := httptest.NewServer(metrics)
			defer srv.Close()
			// The API server admits no loopback endpoint: the replica's
			// address is made up, and dialled at the test server.
			replica := &http.Client{Transport: &http.Transport{
				DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
					return (&net.Dialer{}).DialContext(ctx, network, srv.Listener.Addr().String())
				}}}
			name := "fn-" + strconv.Itoa(i)
			fn := client.ObjectKeyFromObject(k.caseFunction(t, ns, name, 1, tc.minReplicas, tc.annotations))
			k.slice(t, ns, name+"-abcde", name, false, 8080, endpoint{ip: "10.1.0." + strconv.Itoa(i+1), uid: "pod-" + name})

			var writes atomic.Int32
			c := client.Client(k.c)
			if tc.raiseTo != 0 {
				c = raiseBeforeFirstWrite(k.c, tc.raiseTo, &writes)
			}
			s, err := NewScaleDowns(ScaleDowns{Cache: k.cache, Client: c, Log: testr.New(t), HTTP: replica,
				Kube: &Kube{Cache: k.cache, Client: c}}, nil)
			require.NoError(t, err)
			// Rounds every scrape interval (2 s for 10 s) over 10 s of
			// made-up time: the window ends at the last.
			start := time.Now()
			for r := 0; r <= 5; r++ {
				tc.round(r, metrics)
				require.NoError(t, s.Round(context.Background(), start.Add(time.Duration(r)*2*time.Second)))
			}
			assert.Equal(t, tc.want, k.scale(t, fn))
			for _, result := range []string{scaleDownScaled, scaleDownConflict, scaleDownError} {
				want := 0.0
				if result == tc.wantResult {
					want = 1
				}
				assert.Equal(t, want, counterValue(t, s.scaleDowns.WithLabelValues(result)), "scale-downs %s", result)
			}
			assert.Equal(t, tc.wantScrapes, metrics.scrapes.Load() > 0, "scraped %d times", metrics.scrapes.Load())
			if tc.wantScrapes {
				assert.Equal(t, "10.1.0."+strconv.Itoa(i+1)+":8080", metrics.host.Load(), "the replica's address and port 8080")
			}
		})
	}
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	m := &dto.Metric{}
	require.NoError(t, c.Write(m))
	return m.GetCounter().GetValue()
}

// TestClusterScrapeRefused runs the leader's rounds against a replica that
// refuses plaintext as a service mesh with STRICT mutual TLS does: the
// Function gets one Warning event that names the cause and the fix per
// scrapeRefusedEvery, and is never scaled to zero. A refusal seen once
// (a replica that just went) and failures a mesh does not cause get none.
func TestClusterScrapeRefused(t *testing.T) {
	k := startCluster(t)
	ns := k.namespace(t, "scrape-refused")
	window := map[string]string{v1alpha2.AnnotationScaleToZeroAfter: "10s"}

	// A replica that accepts only TLS on its port, as its sidecar does.
	tlsOnly := httptest.NewUnstartedServer(&replicaMetrics{})
	tlsOnly.Config.ErrorLog = log.New(io.Discard, "", 0)
	tlsOnly.StartTLS()
	defer tlsOnly.Close()
	plain := httptest.NewServer(&replicaMetrics{})
	defer plain.Close()
	failing := &replicaMetrics{}
	failing.fail.Store(true)
	plain500 := httptest.NewServer(failing)
	defer plain500.Close()
	resets := loopback.Serve(t, "127.0.0.1", resetAfterRequest)
	gone, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	refuses := gone.Addr().String()
	require.NoError(t, gone.Close())

	tests := []struct {
		name string
		// target is the local address the replica is dialled at in a round.
		target func(round int) string
		// wantEvents is how many events the rounds of the window gave,
		// then how many after one more round 11 minutes later.
		wantEvents [2]int
		wantCause  string
		want       int32
	}{
		{name: "TLS only: a warning, kept", target: func(int) string { return tlsOnly.Listener.Addr().String() },
			wantEvents: [2]int{1, 2}, wantCause: answersTLS, want: 1},
		{name: "reset by a proxy: a warning, kept", target: func(int) string { return resets },
			wantEvents: [2]int{1, 2}, wantCause: resetConnection, want: 1},
		{name: "refused in one round only: no warning, scaled to zero", target: func(r int) string {
			if r == 1 {
				return refuses
			}
			return plain.Listener.Addr().String()
		}, want: 0},
		{name: "a 500 every round: no warning, kept", target: func(int) string { return plain500.Listener.Addr().String() }, want: 1},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var target atomic.Value
			// The API server admits no loopback endpoint: the replica's
			// address is made up, and dialled at the round's local server.
			replica := &http.Client{Transport: &http.Transport{DisableKeepAlives: true,
				DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
					return (&net.Dialer{}).DialContext(ctx, network, target.Load().(string))
				}}}
			name := "fn-" + strconv.Itoa(i)
			fn := client.ObjectKeyFromObject(k.caseFunction(t, ns, name, 1, ptr.To[int32](0), window))
			ip := "10.2.0." + strconv.Itoa(i+1)
			k.slice(t, ns, name+"-abcde", name, false, 8080, endpoint{ip: ip, uid: "pod-" + name})

			rec := &events{}
			s, err := NewScaleDowns(ScaleDowns{Cache: k.cache, Client: k.c, Log: testr.New(t), HTTP: replica,
				Kube: &Kube{Cache: k.cache, Client: k.c, Events: rec}}, nil)
			require.NoError(t, err)
			// Rounds every scrape interval (2 s for 10 s) over twice the
			// window of made-up time.
			start := time.Now()
			for r := 0; r <= 10; r++ {
				target.Store(tc.target(r))
				require.NoError(t, s.Round(context.Background(), start.Add(time.Duration(r)*2*time.Second)))
			}
			assert.Len(t, rec.got, tc.wantEvents[0], "events within the window: %v", rec.got)
			target.Store(tc.target(11))
			require.NoError(t, s.Round(context.Background(), start.Add(11*time.Minute)))
			assert.Len(t, rec.got, tc.wantEvents[1], "events after 11 minutes: %v", rec.got)
			assert.Equal(t, tc.want, k.scale(t, fn))

			for _, e := range rec.got {
				assert.Equal(t, event{regarding: ns + "/" + name, kind: corev1.EventTypeWarning, reason: ReasonScrapeRefused,
					action: "Scrape", note: scrapeRefusedNote(ns+"/"+name, ip+":8080", tc.wantCause)}, e)
			}
			if tc.want != 0 {
				assert.Zero(t, counterValue(t, s.scaleDowns.WithLabelValues(scaleDownScaled)), "never scaled to zero")
			}
		})
	}
}
