package reconciler

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/watch"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
)

func labelled(extra map[string]string) map[string]string {
	l := module.Labels()
	for k, v := range extra {
		l[k] = v
	}
	return l
}

// Scenario: an admin copied the registry Secret with `kubectl get -o yaml`
// (labels included) in the module namespace and in a user namespace, and
// someone wrote the copy into status.inventory. The uninstall removes the
// chart's objects, what the manager applied and the Function controller's
// copies by name, never an object only because of its labels.
func TestUninstallDeletesOnlyWhatTheModuleOwns(t *testing.T) {
	t.Parallel() // its own API server
	direct := func(c client.Client) Live { return watch.NewLive(c, c, c.Scheme(), uninstallNS) }
	c, r, cr := uninstallEnv(t, direct,
		v1alpha1.InventoryEntry{ID: "/ConfigMap/" + uninstallNS + "/from-an-older-chart", Digest: "d", Version: "rv1"},
		v1alpha1.InventoryEntry{ID: "/Secret/" + uninstallNS + "/my-registry-copy", Digest: "d", Version: "rv1"})
	ctx := t.Context()
	for _, ns := range []string{"team-a", "team-b"} {
		require.NoError(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	}
	meta := func(ns, name string, extra map[string]string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labelled(extra)}
	}
	registry := &corev1.Secret{ObjectMeta: meta(uninstallNS, module.RegistrySecretName, map[string]string{v1alpha2.LabelConfig: v1alpha2.ConfigCredentials})}
	functionSA := &corev1.ServiceAccount{ObjectMeta: meta(uninstallNS, "serverless-function", map[string]string{v1alpha2.LabelConfig: v1alpha2.ConfigServiceAccount})}
	older := &corev1.ConfigMap{ObjectMeta: meta(uninstallNS, "from-an-older-chart", nil)}
	gone := []client.Object{
		registry, functionSA, older,
		&corev1.Secret{ObjectMeta: meta("team-a", module.RegistrySecretName, nil)},
		&corev1.ConfigMap{ObjectMeta: meta("team-a", "dockerfile-nodejs22", nil)},
		&corev1.ServiceAccount{ObjectMeta: meta("team-a", "serverless-function", nil)},
	}
	kept := []client.Object{
		&corev1.Secret{ObjectMeta: meta(uninstallNS, "my-registry-copy", nil)},
		&corev1.Secret{ObjectMeta: meta("team-a", "my-registry-copy", nil)},
		&corev1.ConfigMap{ObjectMeta: meta("team-b", "dockerfile-nodejs22", map[string]string{v1alpha2.LabelManagedBy: v1alpha2.ManagedByUser})},
	}
	for _, o := range append(append([]client.Object{}, gone...), kept...) {
		require.NoError(t, c.Create(ctx, o))
	}
	// The older chart's ConfigMap is no longer rendered: its managedFields
	// show the manager's apply.
	applyAsManager(t, c, schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, uninstallNS, older.Name)
	r.renderer = renders(t, registry, functionSA)

	for i := 0; i < 10 && reconcileUninstall(t, c, r, cr) != nil; i++ {
	}
	assert.True(t, apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(cr), &v1alpha1.Serverless{})), "the uninstall ends")
	for _, o := range gone {
		err := c.Get(ctx, client.ObjectKeyFromObject(o), o.DeepCopyObject().(client.Object))
		assert.True(t, apierrors.IsNotFound(err), "%T %s/%s is removed: %v", o, o.GetNamespace(), o.GetName(), err)
	}
	for _, o := range kept {
		assert.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(o), o.DeepCopyObject().(client.Object)), "%T %s/%s stays", o, o.GetNamespace(), o.GetName())
	}
}

// recordEvents keeps the reasons of the events emitted.
type recordEvents struct{ reasons, notes []string }

func (e *recordEvents) Eventf(_ runtime.Object, _ runtime.Object, _, reason, _, note string, args ...any) {
	e.reasons = append(e.reasons, reason)
	e.notes = append(e.notes, note)
}

// Entries anyone with access to serverlesses/status may write are dropped
// with one Warning event and never reach the prune or the uninstall.
func TestStepInventoryDropsEntriesThatCannotBeTheModules(t *testing.T) {
	events := &recordEvents{}
	r := New(nil, nil, fakeLive{}, nil, nil, events, nil, Options{Namespace: "kyma-system"})
	s := newTestState(1)
	valid := []v1alpha1.InventoryEntry{
		{ID: "/Secret/kyma-system/serverless-registry-config-default"},
		{ID: "apiextensions.k8s.io/CustomResourceDefinition//functions.serverless.kyma-project.io"},
	}
	s.cr.Status.Inventory = append([]v1alpha1.InventoryEntry{
		{ID: "/Pod/kyma-system/p"},
		{ID: "/Secret/kube-system/admin-token"},
		{ID: "apiextensions.k8s.io/CustomResourceDefinition/kyma-system/x"},
		{ID: "garbage"},
	}, valid...)

	goOn, _, _ := runStep(context.Background(), s, r.stepInventory)
	require.True(t, goOn)
	assert.Equal(t, valid, s.cr.Status.Inventory)
	require.Len(t, events.reasons, 1)
	assert.Equal(t, v1alpha1.ReasonInventoryEntryIgnored, events.reasons[0])

	s = &state{cr: s.cr, before: s.cr.Status.DeepCopy(), log: log.FromContext(context.Background())}
	goOn, _, _ = runStep(context.Background(), s, r.stepInventory)
	require.True(t, goOn)
	assert.Len(t, events.reasons, 1, "once: the entries are gone from the status")
}

// forbidding answers Forbidden for reads of one name, as the API server
// does for objects outside the manager's resourceNames.
type forbidding struct {
	client.Reader
	name string
}

func (f forbidding) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if key.Name == f.name {
		return apierrors.NewForbidden(schema.GroupResource{Resource: "clusterroles"}, key.Name, errors.New("RBAC: not allowed"))
	}
	return f.Reader.Get(ctx, key, obj, opts...)
}

// A hand-written entry for an object the manager may not even read neither
// blocks the uninstall nor gets the object deleted.
func TestUninstallIsNotBlockedByAnEntryTheManagerMayNotRead(t *testing.T) {
	t.Parallel() // its own API server
	direct := func(c client.Client) Live { return watch.NewLive(c, c, c.Scheme(), uninstallNS) }
	c, r, cr := uninstallEnv(t, direct, v1alpha1.InventoryEntry{ID: "rbac.authorization.k8s.io/ClusterRole//someone-elses", Digest: "d"})
	ctx := t.Context()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "someone-elses", Labels: module.Labels()}}
	require.NoError(t, c.Create(ctx, role))
	r.api = forbidding{Reader: c, name: role.Name}

	assert.Nil(t, reconcileUninstall(t, c, r, cr), "the CR goes in one pass")
	assert.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(role), &rbacv1.ClusterRole{}), "the ClusterRole stays")
}
