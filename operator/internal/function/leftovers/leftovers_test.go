package leftovers

import (
	"context"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
)

const base = "kyma-system"

func function(ns, name string) *v1alpha2.Function {
	return &v1alpha2.Function{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name)}}
}

// child is what build mode made for a Function (its internal labels).
func child[T client.Object](obj T, ns, fn, name string) T {
	obj.SetNamespace(ns)
	obj.SetName(name)
	obj.SetUID(types.UID("uid-" + name))
	obj.SetLabels(map[string]string{
		v1alpha2.LabelFunctionName: fn, v1alpha2.LabelManagedBy: v1alpha2.ManagedByController, v1alpha2.LabelUUID: "uid-" + fn,
	})
	return obj
}

// copyOf is a per-namespace copy of the copies controller.
func copyOf[T client.Object](obj T, ns, name, config string) T {
	obj.SetNamespace(ns)
	obj.SetName(name)
	obj.SetUID(types.UID("uid-" + ns + "-" + name))
	obj.SetLabels(map[string]string{v1alpha2.LabelManagedBy: v1alpha2.ManagedByController, v1alpha2.LabelConfig: config})
	return obj
}

type deletes struct {
	mu   sync.Mutex
	objs []string
}

func (d *deletes) take() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := d.objs
	d.objs = nil
	sort.Strings(out)
	return out
}

func newSweeper(t *testing.T, objs ...client.Object) (*Sweeper, client.Client, *deletes) {
	t.Helper()
	s := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(s))
	require.NoError(t, v1alpha2.AddToScheme(s))
	d := &deletes{}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).WithInterceptorFuncs(interceptor.Funcs{
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			d.mu.Lock()
			d.objs = append(d.objs, obj.GetNamespace()+"/"+obj.GetName())
			d.mu.Unlock()
			return c.Delete(ctx, obj, opts...)
		},
	}).Build()
	return New(c, c, base, logr.Discard()), c, d
}

// start runs the listing and returns the Functions it woke.
func start(t *testing.T, s *Sweeper) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var woken []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case e := <-s.Wake():
				woken = append(woken, e.Object.GetNamespace()+"/"+e.Object.GetName())
			case <-ctx.Done():
				return
			}
		}
	}()
	require.NoError(t, s.Start(ctx))
	// The listing has sent every wake-up; let the reader take the last one.
	time.Sleep(50 * time.Millisecond)
	cancel()
	<-done
	sort.Strings(woken)
	return woken
}

func TestLeftovers(t *testing.T) {
	a, b := function("ns1", "a"), function("ns1", "b")
	objs := []client.Object{
		a, b, function("ns3", "c"),
		child(&batchv1.Job{}, "ns1", "a", "a-build-1"),
		child(&batchv1.Job{}, "ns1", "a", "a-build-2"),
		child(&corev1.ConfigMap{}, "ns1", "a", "a-src"),
		child(&autoscalingv2.HorizontalPodAutoscaler{}, "ns1", "a", "a-hpa"),
		child(&corev1.ConfigMap{}, "ns1", "b", "b-src"),
		copyOf(&corev1.Secret{}, "ns1", "serverless-registry-config-default", v1alpha2.ConfigCredentials),
		copyOf(&corev1.ConfigMap{}, "ns1", "dockerfile-nodejs22", v1alpha2.ConfigRuntime),
		copyOf(&corev1.ServiceAccount{}, "ns1", "serverless-function", v1alpha2.ConfigServiceAccount),
		// A namespace whose Functions are gone: its copies go at once.
		copyOf(&corev1.ServiceAccount{}, "ns2", "serverless-function", v1alpha2.ConfigServiceAccount),
		// The module's own objects and a user's are not leftovers.
		copyOf(&corev1.Secret{}, base, "serverless-registry-config-default", v1alpha2.ConfigCredentials),
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns3", Name: "users", Labels: map[string]string{v1alpha2.LabelConfig: v1alpha2.ConfigRuntime}}},
	}
	s, c, d := newSweeper(t, objs...)
	ctx := context.Background()

	require.NoError(t, s.Converted(ctx, a), "before the listing: nothing to do")
	assert.Empty(t, d.take())

	assert.Equal(t, []string{"ns1/a", "ns1/b"}, start(t, s), "the Functions with leftovers, and those of namespaces with copies")
	assert.Equal(t, []string{"ns2/serverless-function"}, d.take())

	require.NoError(t, s.Converted(ctx, a))
	assert.Equal(t, []string{"ns1/a-build-1", "ns1/a-build-2", "ns1/a-hpa", "ns1/a-src"}, d.take(),
		"a's children; ns1's copies wait for b")
	require.NoError(t, s.Converted(ctx, a))
	assert.Empty(t, d.take(), "once")

	require.NoError(t, s.Converted(ctx, b))
	assert.Equal(t, []string{"ns1/b-src", "ns1/dockerfile-nodejs22", "ns1/serverless-function", "ns1/serverless-registry-config-default"}, d.take())

	var cms corev1.ConfigMapList
	require.NoError(t, c.List(ctx, &cms))
	require.Len(t, cms.Items, 1)
	assert.Equal(t, "users", cms.Items[0].Name, "a user's object stays")
	var secrets corev1.SecretList
	require.NoError(t, c.List(ctx, &secrets))
	require.Len(t, secrets.Items, 1)
	assert.Equal(t, base, secrets.Items[0].Namespace, "the base namespace's stay")
}

// A Function that goes lets its namespace's copies go when the others run
// buildless.
func TestLeftoversForget(t *testing.T) {
	a, b := function("ns1", "a"), function("ns1", "b")
	s, c, d := newSweeper(t, a, b,
		copyOf(&corev1.ServiceAccount{}, "ns1", "serverless-function", v1alpha2.ConfigServiceAccount))
	ctx := context.Background()
	start(t, s)
	require.NoError(t, s.Converted(ctx, a))
	assert.Empty(t, d.take(), "b still runs its build-mode template")
	require.NoError(t, c.Delete(ctx, b))
	d.take()
	s.Forget(ctx, client.ObjectKeyFromObject(b))
	assert.Equal(t, []string{"ns1/serverless-function"}, d.take())
}
