package watch_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/kyma-project/serverless-manager/operator/internal/manager/watch"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
	"github.com/kyma-project/serverless-manager/tests/support/testenv"
)

const ns = "kyma-system"

// On a real API server: the manager's cache holds only the module's
// Secrets and Services, and the users' few it reads are watched by name,
// each change of them (and nothing else) reported.
func TestCacheAndNamedWatchesOnAnAPIServer(t *testing.T) {
	env := testenv.Start(t, "config/crd/bases")
	c := env.Client
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	require.NoError(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))

	t.Run("the cache holds the module's Secrets and Services only", func(t *testing.T) {
		testCacheSelection(ctx, t, env.Config, c)
	})
	t.Run("a Secret watched by name", func(t *testing.T) {
		testNamedWatch(ctx, t, env.Config, c)
	})
}

func testCacheSelection(ctx context.Context, t *testing.T, cfg *rest.Config, c client.Client) {
	s, err := watch.NewScheme()
	require.NoError(t, err)
	opts, err := watch.NamespaceCacheOptions(s, ns)
	require.NoError(t, err)
	cch, err := cache.New(cfg, opts)
	require.NoError(t, err)
	cctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() { _ = cch.Start(cctx) }()
	// As the controller's watches do: an informer per cached kind (reads of
	// anything else fail).
	for obj := range opts.ByObject {
		_, err := cch.GetInformer(cctx, obj)
		require.NoError(t, err)
	}
	require.True(t, cch.WaitForCacheSync(cctx))

	objs := []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "module-secret", Labels: module.Labels()}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "user-secret"}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "module-svc", Labels: module.Labels()},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "user-svc"},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}},
	}
	for _, o := range objs {
		require.NoError(t, c.Create(ctx, o))
	}
	tests := []struct {
		kind, name string
		cached     bool
	}{
		{"Secret", "module-secret", true},
		{"Secret", "user-secret", false},
		{"Service", "module-svc", true},
		{"Service", "user-svc", false},
	}
	for _, tt := range tests {
		t.Run(tt.kind+" "+tt.name, func(t *testing.T) {
			m := &metav1.PartialObjectMetadata{}
			m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(tt.kind))
			key := types.NamespacedName{Namespace: ns, Name: tt.name}
			if tt.cached {
				require.Eventually(t, func() bool { return cch.Get(ctx, key, m) == nil }, 10*time.Second, 20*time.Millisecond)
				return
			}
			// The labelled one of the same kind, created after it, is cached
			// by now: the informer has seen this one and left it out.
			other := &metav1.PartialObjectMetadata{}
			other.SetGroupVersionKind(m.GroupVersionKind())
			otherName := map[string]string{"Secret": "module-secret", "Service": "module-svc"}[tt.kind]
			require.Eventually(t, func() bool {
				return cch.Get(ctx, types.NamespacedName{Namespace: ns, Name: otherName}, other) == nil
			}, 10*time.Second, 20*time.Millisecond)
			assert.True(t, apierrors.IsNotFound(cch.Get(ctx, key, m)), "an unlabelled %s is not cached", tt.kind)
		})
	}
}

func testNamedWatch(ctx context.Context, t *testing.T, cfg *rest.Config, c client.Client) {
	httpClient, err := rest.HTTPClientFor(cfg)
	require.NoError(t, err)
	mc, err := metadata.NewForConfigAndClient(cfg, httpClient)
	require.NoError(t, err)
	mapper, err := apiutil.NewDynamicRESTMapper(cfg, httpClient)
	require.NoError(t, err)
	named := watch.NewNamed(mc, mapper)
	nctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() { _ = named.Start(nctx) }()

	key := watch.NamedKey{GVK: corev1.SchemeGroupVersion.WithKind("Secret"), NamespacedName: types.NamespacedName{Namespace: ns, Name: "my-registry"}}
	_, _, err = named.Get(key)
	require.ErrorIs(t, err, watch.ErrNotWatched)

	require.NoError(t, named.Use(ctx, "kyma-system/default", key))
	_, found, err := named.Get(key)
	require.NoError(t, err)
	assert.False(t, found, "not created yet")
	assert.Equal(t, []watch.NamedKey{key}, named.Watched())

	// Another Secret of the namespace neither reports nor shows.
	require.NoError(t, c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "unrelated"}}))
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "my-registry",
		Annotations: map[string]string{"kubectl.kubernetes.io/last-applied-configuration": `{"data":{"password":"c2VjcmV0"}}`}},
		StringData: map[string]string{"password": "secret"}}
	require.NoError(t, c.Create(ctx, secret))
	got := nextEvent(t, named.Events())
	assert.Equal(t, "my-registry", got.GetName(), "the first event is the watched Secret's creation")
	m, found, err := named.Get(key)
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, secret.ResourceVersion, m.ResourceVersion)
	assert.Empty(t, m.Annotations, "the last-applied copy of the data is not kept")

	// A change of its data (the user's new credentials) is reported.
	secret.StringData = map[string]string{"password": "rotated"}
	require.NoError(t, c.Update(ctx, secret))
	got = nextEvent(t, named.Events())
	assert.Equal(t, "my-registry", got.GetName())
	assert.Eventually(t, func() bool {
		m, _, _ := named.Get(key)
		return m != nil && m.ResourceVersion == secret.ResourceVersion
	}, 5*time.Second, 20*time.Millisecond)

	// A second owner keeps the watch while the first lets go.
	require.NoError(t, named.Use(ctx, "other/default", key))
	require.NoError(t, named.Use(ctx, "kyma-system/default"))
	assert.Equal(t, []watch.NamedKey{key}, named.Watched())
	// The CR names another Secret: the old watch stops, changes of the old
	// Secret are not reported any more.
	other := watch.NamedKey{GVK: key.GVK, NamespacedName: types.NamespacedName{Namespace: ns, Name: "unrelated"}}
	require.NoError(t, named.Use(ctx, "other/default", other))
	assert.Equal(t, []watch.NamedKey{other}, named.Watched())
	require.NoError(t, c.Delete(ctx, secret))
	select {
	case e := <-named.Events():
		t.Fatalf("unexpected event for %s", e.Object.GetName())
	case <-time.After(500 * time.Millisecond):
	}
	_, found, err = named.Get(other)
	require.NoError(t, err)
	assert.True(t, found)
}

func nextEvent(t *testing.T, events <-chan event.GenericEvent) client.Object {
	t.Helper()
	select {
	case e := <-events:
		return e.Object
	case <-time.After(10 * time.Second):
		t.Fatal("no event within 10s")
		return nil
	}
}
