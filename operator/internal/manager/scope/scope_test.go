package scope_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/internal/manager/scope"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/scope/namespaced"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/watch"
	"github.com/kyma-project/serverless-manager/operator/pkg/manifest"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
	"github.com/kyma-project/serverless-manager/tests/support/repo"
	"github.com/kyma-project/serverless-manager/tests/support/testenv"
)

const home = module.DefaultNamespace

// seen records the ConfigMaps a namespace cache reports.
type seen struct {
	mu   sync.Mutex
	keys map[string]bool
}

func (s *seen) add(obj any) {
	if m, ok := obj.(metav1.Object); ok {
		s.mu.Lock()
		s.keys[m.GetNamespace()+"/"+m.GetName()] = true
		s.mu.Unlock()
	}
}

func (s *seen) has(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.keys[key]
}

func configMapMeta() *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	return m
}

// The scope runs as the manager's ServiceAccount with config/rbac as it is
// shipped: the module namespace moves to another namespace (the manager
// binds its namespaced role there, caches and watches follow) and back.
func TestScopeFollowsTheModuleNamespaceWithTheManagersRBAC(t *testing.T) {
	env := testenv.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	admin := env.Client
	for _, ns := range []string{home, "team-a", "team-b"} {
		require.NoError(t, admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	}
	objs, err := manifest.ReadDir(filepath.Join(repo.MustRoot(), "config", "rbac"))
	require.NoError(t, err)
	for _, o := range objs {
		if o.GetKind() == "RoleBinding" || o.GetKind() == "ServiceAccount" {
			o.SetNamespace(home)
		}
		require.NoError(t, admin.Create(ctx, o), "%s %s", o.GetKind(), o.GetName())
	}

	id := module.Manager()
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: id.User(home),
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + home, "system:authenticated"}}
	s, err := watch.NewScheme()
	require.NoError(t, err)
	asManager, err := client.New(cfg, client.Options{Scheme: s})
	require.NoError(t, err)

	// Outside its namespace the manager may not read the module's objects
	// until it binds its role there.
	err = asManager.List(ctx, &corev1.PersistentVolumeClaimList{}, client.InNamespace("team-a"))
	require.True(t, apierrors.IsForbidden(err), "listing PVCs of team-a before the binding: %v", err)

	newCache := func(namespace string) (cache.Cache, error) {
		opts, err := watch.NamespaceCacheOptions(s, namespace)
		if err != nil {
			return nil, err
		}
		return cache.New(cfg, opts)
	}
	sc, err := scope.New(home, newCache, scope.NewBinder(asManager, asManager, home, id.ServiceAccount), 0)
	require.NoError(t, err)
	events := &seen{keys: map[string]bool{}}
	var caches []string
	all, err := watch.NamespacedObjects(s)
	require.NoError(t, err)
	require.NoError(t, sc.Watch(ctx, func(ctx context.Context, c cache.Cache) error {
		for _, obj := range all { // every kind, as the controller's watches
			if _, err := c.GetInformer(ctx, obj.DeepCopyObject().(client.Object)); err != nil {
				return err
			}
		}
		inf, err := c.GetInformer(ctx, configMapMeta())
		if err != nil {
			return err
		}
		_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: events.add})
		caches = append(caches, "cache")
		return err
	}))
	done := make(chan error, 1)
	go func() { done <- sc.Start(ctx) }()

	labelled := func(ns, name string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: module.Labels()}}
	}
	eventually := func(what string, cond func() bool) {
		t.Helper()
		require.Eventually(t, cond, 10*time.Second, 20*time.Millisecond, what)
	}

	require.NoError(t, admin.Create(ctx, labelled(home, "a")))
	eventually("the home cache sees kyma-system/a", func() bool { return events.has(home + "/a") })
	require.NoError(t, sc.Get(ctx, client.ObjectKey{Namespace: home, Name: "a"}, configMapMeta()))
	assert.Equal(t, home, sc.Namespace())

	// A CR in team-a: the manager binds its role there and the cache moves.
	require.NoError(t, sc.Enter(ctx, "team-a"))
	assert.Equal(t, "team-a", sc.Namespace())
	assert.Len(t, caches, 2, "the watcher ran on the new cache")
	rb := &rbacv1.RoleBinding{}
	require.NoError(t, admin.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: namespaced.ClusterRole}, rb))
	assert.Equal(t, rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: namespaced.ClusterRole}, rb.RoleRef)
	assert.Equal(t, []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: id.ServiceAccount, Namespace: home}}, rb.Subjects)
	require.NoError(t, sc.Enter(ctx, "team-a"), "entering again changes nothing")
	assert.Equal(t, rb.UID, getUID(t, admin, "team-a"), "the binding is kept")

	// Someone deletes the binding: it stays, with the manager's rights,
	// until the manager lets it go.
	require.NoError(t, admin.Delete(ctx, rb))
	require.NoError(t, admin.Get(ctx, client.ObjectKeyFromObject(rb), rb))
	assert.NotNil(t, rb.DeletionTimestamp)
	assert.Equal(t, []string{module.Finalizer}, rb.Finalizers)
	require.NoError(t, sc.Enter(ctx, "team-a"))
	require.NoError(t, asManager.List(ctx, &corev1.PersistentVolumeClaimList{}, client.InNamespace("team-a")), "the rights hold while it is being deleted")

	// Forced away (finalizer removed): once the cache has seen it go,
	// entering again binds again.
	rb.Finalizers = nil
	require.NoError(t, admin.Update(ctx, rb))
	rbMeta := &metav1.PartialObjectMetadata{}
	rbMeta.SetGroupVersionKind(rbacv1.SchemeGroupVersion.WithKind("RoleBinding"))
	eventually("the cache to miss the binding", func() bool {
		return apierrors.IsNotFound(sc.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: namespaced.ClusterRole}, rbMeta))
	})
	require.NoError(t, sc.Enter(ctx, "team-a"))
	assert.NotEqual(t, rb.UID, getUID(t, admin, "team-a"), "a new binding")

	require.NoError(t, admin.Create(ctx, labelled("team-a", "b")))
	require.NoError(t, admin.Create(ctx, labelled(home, "c")))
	eventually("the team-a cache sees team-a/b", func() bool { return events.has("team-a/b") })
	require.NoError(t, sc.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: "b"}, configMapMeta()))
	assert.Error(t, sc.Get(ctx, client.ObjectKey{Namespace: home, Name: "c"}, configMapMeta()), "kyma-system is not cached any more")
	time.Sleep(300 * time.Millisecond)
	assert.False(t, events.has(home+"/c"), "the home cache was stopped")

	// The uninstall in team-a is done: back home, the binding goes, also
	// when it is being deleted already (its namespace goes).
	require.NoError(t, admin.Delete(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: namespaced.ClusterRole}}))
	require.NoError(t, sc.Leave(ctx, "team-a"))
	assert.Equal(t, home, sc.Namespace())
	err = admin.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: namespaced.ClusterRole}, rb)
	assert.True(t, apierrors.IsNotFound(err), "the RoleBinding in team-a is gone: %v", err)
	eventually("the new home cache lists kyma-system/c", func() bool { return events.has(home + "/c") })

	// A RoleBinding of that name granting something else is not the manager's.
	require.NoError(t, admin.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: namespaced.ClusterRole},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "someone", Namespace: "team-b"}},
	}))
	err = sc.Enter(ctx, "team-b")
	require.ErrorContains(t, err, "delete it")
	assert.Equal(t, home, sc.Namespace())
	require.NoError(t, sc.Leave(ctx, "team-b"))
	require.NoError(t, admin.Get(ctx, client.ObjectKey{Namespace: "team-b", Name: namespaced.ClusterRole}, rb), "leaving never deletes a foreign binding")

	// Without its binding the manager cannot list team-c: the move fails in
	// time and the module namespace stays where it was.
	unbound, err := scope.New(home, newCache, nil, 2*time.Second)
	require.NoError(t, err)
	require.NoError(t, unbound.Watch(ctx, func(ctx context.Context, c cache.Cache) error {
		for _, obj := range all {
			if _, err := c.GetInformer(ctx, obj.DeepCopyObject().(client.Object)); err != nil {
				return err
			}
		}
		return nil
	}))
	unboundDone := make(chan error, 1)
	go func() { unboundDone <- unbound.Start(ctx) }()
	require.NoError(t, admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-c"}}))
	err = unbound.Enter(ctx, "team-c")
	require.ErrorContains(t, err, "missing permissions?")
	assert.Equal(t, home, unbound.Namespace())
	require.NoError(t, unbound.Get(ctx, client.ObjectKey{Namespace: home, Name: "c"}, configMapMeta()), "the home cache still serves")

	cancel()
	require.NoError(t, <-done)
	require.NoError(t, <-unboundDone)
}

func getUID(t *testing.T, c client.Client, namespace string) types.UID {
	t.Helper()
	rb := &rbacv1.RoleBinding{}
	require.NoError(t, c.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: namespaced.ClusterRole}, rb))
	return rb.UID
}
