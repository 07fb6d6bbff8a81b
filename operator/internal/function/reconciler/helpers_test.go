package reconciler

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/internal/function/config"
)

const testNS = "fn-test"

func testConfig(t testing.TB) config.Config {
	t.Helper()
	cfg, err := config.Load(func(string) (string, bool) { return "", false })
	require.NoError(t, err)
	cfg.Build.MaxSimultaneousJobs = 2
	cfg.Build.RepoFetcherImage = "example.org/function-controller:test" // the chart sets it
	return cfg
}

func testScheme(t testing.TB) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(s))
	require.NoError(t, v1alpha2.AddToScheme(s))
	return s
}

func newFunction(name string) *v1alpha2.Function {
	return &v1alpha2.Function{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: testNS, UID: types.UID("uid-" + name), Generation: 1,
			CreationTimestamp: metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)),
		},
		Spec: v1alpha2.FunctionSpec{
			Runtime:  v1alpha2.RuntimeNodejs22,
			Source:   v1alpha2.Source{Inline: &v1alpha2.InlineSource{Source: "module.exports = { main: () => 'hi' }"}},
			Replicas: ptr.To[int32](1),
		},
	}
}

// prerequisites are the per-namespace copies a Function needs.
func prerequisites(ns string) []client.Object {
	copyLabels := map[string]string{v1alpha2.LabelManagedBy: v1alpha2.ManagedByController}
	var objs []client.Object
	objs = append(objs, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: config.DefaultRegistrySecretName, Namespace: ns, Labels: copyLabels},
		Data: map[string][]byte{
			"isInternal": []byte("false"), "registryAddress": []byte("registry.example:5000"),
			corev1.DockerConfigJsonKey: []byte(`{"auths":{}}`),
		},
	}, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: config.DefaultImagePullAccountName, Namespace: ns, Labels: copyLabels}})
	for _, rt := range v1alpha2.Runtimes() {
		objs = append(objs, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "dockerfile-" + string(rt), Namespace: ns, Labels: copyLabels},
			Data:       map[string]string{"Dockerfile": fmt.Sprintf("ARG base_image=example.org/runtime-%s:1\nFROM ${base_image}\n", rt)},
		})
	}
	return objs
}

type recorded struct{ kind, reason, message string }

// recorder keeps the events it is given.
type recorder struct {
	mu     sync.Mutex
	events []recorded
}

func (r *recorder) Eventf(_ runtime.Object, _ runtime.Object, eventtype, reason, _, note string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, recorded{eventtype, reason, fmt.Sprintf(note, args...)})
}

type fixture struct {
	reg    *prometheus.Registry
	writes *writeCounter
	client client.Client
	rec    *recorder
	r      *Reconciler
	now    time.Time
}

func newFixture(t *testing.T, objs ...client.Object) *fixture {
	t.Helper()
	writes := &writeCounter{}
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).
		WithStatusSubresource(&v1alpha2.Function{}).
		WithObjects(objs...).WithInterceptorFuncs(writes.funcs()).Build()
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	require.NoError(t, err)
	f := &fixture{client: c, rec: &recorder{}, writes: writes, reg: reg, now: time.Date(2026, 2, 1, 12, 0, 0, 0, time.UTC)}
	f.r = New(c, f.rec, m, NewBuildSlots(c, 2, m), Options{Config: testConfig(t), CacheWait: time.Second, Now: func() time.Time { return f.now }})
	f.r.started = f.now.Add(-time.Hour) // a controller long running, unless a test says otherwise
	return f
}

func (f *fixture) reconcile(t *testing.T, name string) time.Duration {
	t.Helper()
	res, err := f.r.Reconcile(context.Background(), reconcileRequest(name))
	require.NoError(t, err)
	return res.RequeueAfter
}

func (f *fixture) function(t *testing.T, name string) *v1alpha2.Function {
	t.Helper()
	fn := &v1alpha2.Function{}
	require.NoError(t, f.client.Get(context.Background(), types.NamespacedName{Namespace: testNS, Name: name}, fn))
	return fn
}

func reconcileRequest(name string) ctrl.Request {
	return ctrl.Request{NamespacedName: types.NamespacedName{Namespace: testNS, Name: name}}
}

// writeCounter counts the writes that go through a client, by verb and
// kind; refuseCreate, when set, answers creates as the API server would.
type writeCounter struct {
	mu           sync.Mutex
	counts       map[string]int
	refuseCreate func(client.Object) error
}

func (w *writeCounter) add(verb string, obj client.Object) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.counts == nil {
		w.counts = map[string]int{}
	}
	w.counts[verb+" "+fmt.Sprintf("%T", obj)]++
}

// take returns the counts since the last call.
func (w *writeCounter) take() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.counts
	w.counts = nil
	if out == nil {
		out = map[string]int{}
	}
	return out
}

func (w *writeCounter) funcs() interceptor.Funcs {
	return interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			w.add("create", obj)
			if w.refuseCreate != nil {
				if err := w.refuseCreate(obj); err != nil {
					return err
				}
			}
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			w.add("update", obj)
			return c.Update(ctx, obj, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			w.add("delete", obj)
			return c.Delete(ctx, obj, opts...)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			w.add("patch/"+sub, obj)
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
	}
}

// counter reads a counter of the fixture's metrics.
func (f *fixture) counter(t *testing.T, name string) float64 {
	t.Helper()
	families, err := f.reg.Gather()
	require.NoError(t, err)
	for _, mf := range families {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// histogram reads the sample count and sum of a histogram of the fixture's metrics.
func (f *fixture) histogram(t *testing.T, name string) (uint64, float64) {
	t.Helper()
	families, err := f.reg.Gather()
	require.NoError(t, err)
	for _, mf := range families {
		if mf.GetName() == name {
			h := mf.GetMetric()[0].GetHistogram()
			return h.GetSampleCount(), h.GetSampleSum()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0, 0
}
