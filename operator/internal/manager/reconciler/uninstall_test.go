package reconciler

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/watch"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
	"github.com/kyma-project/serverless-manager/tests/support/testenv"
)

// cacheMissedAll is a Live whose cache saw none of the module's objects, as
// after watches that were down while they were created; the API server
// still answers ListManagedFromAPI.
type cacheMissedAll struct{ *watch.Live }

func (cacheMissedAll) LiveMeta(context.Context, schema.GroupVersionKind, types.NamespacedName) (metav1.Object, error) {
	return nil, nil
}
func (cacheMissedAll) Object(context.Context, schema.GroupVersionKind, types.NamespacedName) (*unstructured.Unstructured, error) {
	return nil, nil
}
func (cacheMissedAll) ListManaged(context.Context) ([]metav1.Object, error) { return nil, nil }

// uninstallEnv is an API server holding a served Serverless CR that is
// being deleted, and a Reconciler whose Live is live(c).
func uninstallEnv(t *testing.T, live func(c client.Client) Live, inv ...v1alpha1.InventoryEntry) (client.Client, *Reconciler, *v1alpha1.Serverless) {
	t.Helper()
	return uninstallEnvWith(t, nil, live, inv...)
}

// uninstallEnvWith is uninstallEnv with the CRDs of crdDirs installed too.
func uninstallEnvWith(t *testing.T, crdDirs []string, live func(c client.Client) Live, inv ...v1alpha1.InventoryEntry) (client.Client, *Reconciler, *v1alpha1.Serverless) {
	t.Helper()
	env := testenv.Start(t, append([]string{"config/crd/bases"}, crdDirs...)...)
	ctx := t.Context()
	c := env.Client
	r := New(c, c, live(c), nil, nil, &countEvents{}, nil, Options{Namespace: uninstallNS})
	cr := &v1alpha1.Serverless{ObjectMeta: metav1.ObjectMeta{Namespace: uninstallNS, Name: "default", Finalizers: []string{module.Finalizer}}}
	require.NoError(t, c.Create(ctx, cr))
	cr.Status.Served = metav1.ConditionTrue
	cr.Status.Inventory = inv
	require.NoError(t, c.Status().Update(ctx, cr))
	require.NoError(t, c.Delete(ctx, cr))
	return c, r, cr
}

const uninstallNS = "default"

// reconcileUninstall runs one reconcile of cr and returns its stored
// Deleted condition, nil when the CR is gone.
func reconcileUninstall(t *testing.T, c client.Client, r *Reconciler, cr *v1alpha1.Serverless) *metav1.Condition {
	t.Helper()
	ctx := t.Context()
	_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(cr)})
	require.NoError(t, err)
	got := &v1alpha1.Serverless{}
	err = c.Get(ctx, client.ObjectKeyFromObject(cr), got)
	if apierrors.IsNotFound(err) {
		return nil
	}
	require.NoError(t, err)
	return meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionDeleted)
}

// renders is a chart that renders objs (without their namespace, as a
// chart does).
func renders(t *testing.T, objs ...client.Object) *fakeRenderer {
	t.Helper()
	f := &fakeRenderer{}
	for _, o := range objs {
		content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		require.NoError(t, err)
		u := &unstructured.Unstructured{Object: content}
		gvks, _, err := scheme.Scheme.ObjectKinds(o)
		require.NoError(t, err)
		u.SetGroupVersionKind(gvks[0])
		u.SetNamespace("")
		f.objs = append(f.objs, u)
	}
	return f
}

func cacheMissing(c client.Client) Live {
	return cacheMissedAll{watch.NewLive(c, c, c.Scheme(), uninstallNS)}
}

func TestUninstallAsksTheAPIServerBeforeTheFinalizerGoes(t *testing.T) {
	t.Parallel() // its own API server
	c, r, cr := uninstallEnv(t, cacheMissing)
	ctx := t.Context()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: uninstallNS, Name: "serverless-configuration", Labels: module.Labels()}}
	require.NoError(t, c.Create(ctx, cm))
	r.renderer = renders(t, cm)

	c1 := reconcileUninstall(t, c, r, cr)
	require.NotNil(t, c1, "the finalizer stays while the ConfigMap was there")
	assert.Equal(t, v1alpha1.ReasonDeletion, c1.Reason, "upstream's reason")
	assert.Equal(t, v1alpha1.ReasonDeleting, v1alpha1.Cause(*c1))
	assert.Contains(t, c1.Message, "1 objects the API server still holds: ConfigMap serverless-configuration")
	assert.True(t, apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{})), "the ConfigMap the cache missed is deleted")

	assert.Nil(t, reconcileUninstall(t, c, r, cr), "then the finalizer goes")
}

// An object already being deleted but held by the Function controller's
// finalizer (the controller is gone) is released on the API server's word
// too, not only on the cache's: otherwise it would stay forever.
func TestUninstallReleasesTheFunctionControllersFinalizerOfAnObjectBeingDeleted(t *testing.T) {
	t.Parallel() // its own API server
	c, r, cr := uninstallEnv(t, cacheMissing)
	ctx := t.Context()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: uninstallNS, Name: module.RegistrySecretName, Labels: module.Labels(),
		Finalizers: []string{"serverless.kyma-project.io/deletion-hook", "example.com/keep"}}}
	require.NoError(t, c.Create(ctx, secret))
	require.NoError(t, c.Delete(ctx, secret))
	r.renderer = renders(t, secret)

	cond := reconcileUninstall(t, c, r, cr)
	require.NotNil(t, cond)
	assert.Contains(t, cond.Message, "Secret "+module.RegistrySecretName)
	got := &corev1.Secret{}
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(secret), got))
	assert.Equal(t, []string{"example.com/keep"}, got.Finalizers, "only the Function controller's finalizer is dropped")
	assert.NotNil(t, got.DeletionTimestamp)

	got.Finalizers = nil
	require.NoError(t, c.Update(ctx, got))
	assert.Nil(t, reconcileUninstall(t, c, r, cr), "once the Secret is gone the CR goes")
}

// An object of the inventory that someone took over by removing the module
// labels is left alone, as the prune leaves it, and does not hold the
// uninstall back.
func TestUninstallLeavesAnObjectThatLostTheModuleLabels(t *testing.T) {
	t.Parallel() // its own API server
	direct := func(c client.Client) Live { return watch.NewLive(c, c, c.Scheme(), uninstallNS) }
	c, r, cr := uninstallEnv(t, direct, v1alpha1.InventoryEntry{ID: "/ConfigMap/" + uninstallNS + "/taken-over", Digest: "d", Version: "rv1"})
	ctx := t.Context()
	taken := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: uninstallNS, Name: "taken-over"}}
	require.NoError(t, c.Create(ctx, taken))

	assert.Nil(t, reconcileUninstall(t, c, r, cr), "the CR goes in one pass")
	assert.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(taken), &corev1.ConfigMap{}), "the ConfigMap stays")
}

// The Function controller's record of an external registry's repositories
// (no module labels: the controller writes it) goes with the module.
func TestUninstallDeletesTheRegistryRepositoriesRecord(t *testing.T) {
	t.Parallel() // its own API server
	c, r, cr := uninstallEnv(t, cacheMissing)
	ctx := t.Context()
	record := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: uninstallNS, Name: module.RegistryRepositoriesName},
		Data: map[string]string{"ns-fn": "ghcr.example/team"}}
	require.NoError(t, c.Create(ctx, record))
	r.renderer = renders(t)

	assert.Nil(t, reconcileUninstall(t, c, r, cr), "the finalizer goes")
	assert.True(t, apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(record), &corev1.ConfigMap{})), "the record is deleted")
}

// A Pod that stopped after its Role went could not release its Lease; the
// uninstall removes the module's Leases so that the next installation's
// leaders start at once. Other Leases of the namespace stay.
func TestUninstallDeletesTheModulesLeases(t *testing.T) {
	t.Parallel() // its own API server
	c, r, cr := uninstallEnv(t, cacheMissing)
	ctx := t.Context()
	var leases []*coordinationv1.Lease
	for _, name := range []string{module.FunctionControllerLeaseName, module.ActivatorLeaseName, "someone-elses"} {
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: uninstallNS, Name: name},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(name + "-pod-gone"), LeaseDurationSeconds: ptr.To[int32](15)}}
		require.NoError(t, c.Create(ctx, l))
		leases = append(leases, l)
	}
	r.renderer = renders(t)

	assert.Nil(t, reconcileUninstall(t, c, r, cr), "the finalizer goes")
	for _, l := range leases[:2] {
		assert.True(t, apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(l), &coordinationv1.Lease{})), "Lease %s is deleted", l.Name)
	}
	assert.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(leases[2]), &coordinationv1.Lease{}), "a Lease not of the module stays")
}

// staleCR is a cache that has not seen the Serverless CR go: it still
// serves the copy it held before the finalizer was removed.
type staleCR struct {
	client.Client
	cr *v1alpha1.Serverless
}

func (s staleCR) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if cr, ok := obj.(*v1alpha1.Serverless); ok && key == client.ObjectKeyFromObject(s.cr) {
		s.cr.DeepCopyInto(cr)
		return nil
	}
	return s.Client.Get(ctx, key, obj, opts...)
}

func (s staleCR) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if l, ok := list.(*v1alpha1.ServerlessList); ok {
		l.Items = []v1alpha1.Serverless{*s.cr.DeepCopy()}
		return nil
	}
	return s.Client.List(ctx, list, opts...)
}

// enters records the namespaces a reconcile takes up.
type enters struct{ namespaces []string }

func (e *enters) Enter(_ context.Context, namespace string) error {
	e.namespaces = append(e.namespaces, namespace)
	return nil
}
func (*enters) Leave(context.Context, string) error { return nil }
func (*enters) Watch(context.Context, func(context.Context, cache.Cache) error) error {
	return nil
}

// The pass after the one that removed the finalizer may read the CR from a
// cache that has not seen it go. That pass does nothing: it neither takes
// the namespace up again (the manager's RoleBinding there would be
// recreated and left) nor deletes what the next served CR installed.
func TestUninstallOfACRAlreadyGoneDoesNothing(t *testing.T) {
	t.Parallel() // its own API server
	c, r, cr := uninstallEnv(t, cacheMissing)
	ctx := t.Context()
	stale := &v1alpha1.Serverless{}
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(cr), stale))
	r.renderer = renders(t)
	require.Nil(t, reconcileUninstall(t, c, r, cr), "the uninstall ends")

	next := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: uninstallNS, Name: "serverless-configuration", Labels: module.Labels()}}
	require.NoError(t, c.Create(ctx, next), "installed for the next served CR")
	scope := &enters{}
	late := New(staleCR{Client: c, cr: stale}, c, cacheMissing(c), renders(t, next), nil, &countEvents{}, nil,
		Options{Namespace: uninstallNS, Scope: scope})
	res, err := late.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(cr)})
	require.NoError(t, err)
	assert.Equal(t, ctrl.Result{}, res)
	assert.Empty(t, scope.namespaces, "no namespace taken up")
	assert.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(next), &corev1.ConfigMap{}), "the next installation's ConfigMap stays")
}
