package copies

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/internal/function/config"
	"github.com/kyma-project/serverless-manager/tests/support/testenv"
)

// laggingCache writes to the API server's store and reads from a cache
// store that only catches up when the test says so.
type laggingCache struct {
	client.Client // the API server: writes
	cache         client.Client
}

func (c *laggingCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return c.cache.Get(ctx, key, obj, opts...)
}

func (c *laggingCache) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return c.cache.List(ctx, list, opts...)
}

// writeCounter counts the writes that reach the API server by verb and
// kind (testenv.RecordWrites).
type writeCounter map[string]int

func (w writeCounter) add(verb string, obj client.Object) { w[verb+" "+kindOf(obj)]++ }

// The write memory keeps a pass that runs before the cache has seen the
// previous pass's writes from writing again, and a user's copy from being
// tried at every pass.
func TestReconcileWithLaggingCache(t *testing.T) {
	s := testScheme(t)
	cm := baseConfigMap("dockerfile-nodejs22", "ARG base_image=node")
	cm.ResourceVersion = ""
	sec := baseSecret()
	sec.ResourceVersion = ""
	sa := baseServiceAccount()
	sa.ResourceVersion = ""
	fn := &v1alpha2.Function{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fn"}}
	userCM := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "dockerfile-python312",
		Labels: map[string]string{v1alpha2.LabelConfig: v1alpha2.ConfigRuntime, v1alpha2.LabelManagedBy: v1alpha2.ManagedByUser}},
		Data: map[string]string{"Dockerfile": "mine"}}
	py := baseConfigMap("dockerfile-python312", "ARG base_image=py")
	py.ResourceVersion = ""
	cacheObjects := []client.Object{fn, &cm, &py, sec, &sa}

	writes := writeCounter{}
	api := fake.NewClientBuilder().WithScheme(s).WithObjects(userCM.DeepCopy()).WithInterceptorFuncs(testenv.RecordWrites(writes.add)).Build()
	cache := &laggingCache{Client: api, cache: fake.NewClientBuilder().WithScheme(s).WithObjects(cacheObjects...).Build()}
	// catchUp makes the cache show what the API server holds (the user's
	// copy excepted: its label keeps it out of the cache).
	catchUp := func() {
		objs := append([]client.Object(nil), cacheObjects...)
		for _, l := range []client.ObjectList{&corev1.ConfigMapList{}, &corev1.SecretList{}, &corev1.ServiceAccountList{}} {
			require.NoError(t, api.List(context.Background(), l, client.InNamespace(ns)))
			for _, o := range pointersOf(l) {
				if IsCopy(o) {
					objs = append(objs, o)
				}
			}
		}
		cache.cache = fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).Build()
	}

	clk := &clock{t: time.Unix(1000, 0)}
	cfg := &config.Config{BaseNamespace: base, BaseDefaultSecretName: sec.Name, ConfigMapRequeueDuration: time.Minute}
	r := New(cache, api, cfg)
	r.mem = newMemory(clk.now)
	pass := func() ctrl.Result {
		t.Helper()
		res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Name: ns}})
		require.NoError(t, err)
		return res
	}

	res := pass()
	assert.Equal(t, writeCounter{"create ConfigMap": 2, "create Secret": 1, "create ServiceAccount": 1}, writes,
		"three copies created, the user's Dockerfile found by a refused create")
	assert.Zero(t, res.RequeueAfter)

	clear(writes)
	res = pass()
	assert.Empty(t, writes, "the cache lags: the writes are trusted, the user's copy is not tried again")
	assert.Equal(t, writeWait, res.RequeueAfter, "fallback in case the writes' events never come")

	catchUp()
	res = pass()
	assert.Empty(t, writes)
	assert.Zero(t, res.RequeueAfter)

	// The base Secret changes; the update is written once while the cache
	// still shows the old copy.
	sec.Data["password"] = []byte("two")
	catchUp()
	pass()
	assert.Equal(t, writeCounter{"update Secret": 1}, writes)
	clear(writes)
	pass()
	assert.Empty(t, writes)

	// After the opt-out's ttl, the user's copy is looked at again.
	clk.t = clk.t.Add(time.Minute)
	catchUp()
	pass()
	assert.Equal(t, writeCounter{"create ConfigMap": 1}, writes)
	live := &corev1.ConfigMap{}
	require.NoError(t, api.Get(context.Background(), client.ObjectKeyFromObject(userCM), live))
	assert.Equal(t, "mine", live.Data["Dockerfile"], "the user's copy is never written")

	// The last Function goes: the copies are deleted once, then the lagging
	// cache still showing them causes no second delete.
	cacheObjects = cacheObjects[1:]
	catchUp()
	clear(writes)
	pass()
	assert.Equal(t, writeCounter{"delete ConfigMap": 1, "delete Secret": 1, "delete ServiceAccount": 1}, writes)
	clear(writes)
	pass()
	assert.Empty(t, writes)
	require.NoError(t, api.Get(context.Background(), client.ObjectKeyFromObject(userCM), live), "the user's copy stays")
}

func pointersOf(l client.ObjectList) []client.Object {
	switch l := l.(type) {
	case *corev1.ConfigMapList:
		return pointers(l.Items)
	case *corev1.SecretList:
		return pointers(l.Items)
	case *corev1.ServiceAccountList:
		return pointers(l.Items)
	}
	return nil
}
