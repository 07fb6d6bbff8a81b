package apply

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/inventory"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
)

func u(apiVersion, kind, name string) *unstructured.Unstructured {
	o := &unstructured.Unstructured{}
	o.SetAPIVersion(apiVersion)
	o.SetKind(kind)
	o.SetName(name)
	return o
}

func TestSortForApplyAndDelete(t *testing.T) {
	objs := []*unstructured.Unstructured{
		u("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", "hook"),
		u("apps/v1", "Deployment", "ctrl"),
		u("v1", "ConfigMap", "cm-b"),
		u("example.com/v1", "Widget", "w"),
		u("v1", "Service", "svc"),
		u("v1", "ConfigMap", "cm-a"),
		u("rbac.authorization.k8s.io/v1", "ClusterRole", "role"),
		u("apiextensions.k8s.io/v1", "CustomResourceDefinition", "crd"),
		u("scheduling.k8s.io/v1", "PriorityClass", "prio"),
		u("v1", "Namespace", "ns"),
	}
	SortForApply(objs)
	var names []string
	for _, o := range objs {
		names = append(names, o.GetName())
	}
	assert.Equal(t, []string{"crd", "ns", "prio", "role", "cm-b", "cm-a", "svc", "ctrl", "w", "hook"}, names,
		"tiers in dependency order, render order kept within a tier")

	var refs []inventory.Ref
	for _, o := range objs {
		ref, ok := inventory.ParseID(inventory.ID(o))
		require.True(t, ok)
		refs = append(refs, ref)
	}
	SortForDelete(refs)
	names = nil
	for _, r := range refs {
		names = append(names, r.Name)
	}
	assert.Equal(t, []string{"hook", "w", "ctrl", "svc", "cm-a", "cm-b", "role", "prio", "ns", "crd"}, names)
}

// fakeLive serves live metadata from a map.
type fakeLive map[types.NamespacedName]metav1.Object

func (f fakeLive) LiveMeta(_ context.Context, _ schema.GroupVersionKind, key types.NamespacedName) (metav1.Object, error) {
	if o, ok := f[key]; ok {
		return o, nil
	}
	return nil, nil
}

// recorder remembers what would have been sent, with the UID the apply
// named; refuse, when set, answers every apply.
type recorder struct {
	applied []string
	uids    []types.UID
	deleted []string
	refuse  error
}

func (r *recorder) Apply(_ context.Context, obj runtime.ApplyConfiguration, _ ...client.ApplyOption) error {
	o := obj.(interface {
		GetName() string
		GetUID() types.UID
	})
	r.applied = append(r.applied, o.GetName())
	r.uids = append(r.uids, o.GetUID())
	return r.refuse
}

func (r *recorder) Delete(_ context.Context, obj client.Object, _ ...client.DeleteOption) error {
	r.deleted = append(r.deleted, obj.GetName())
	return nil
}

func mapper() meta.RESTMapper {
	m := meta.NewDefaultRESTMapper([]schema.GroupVersion{{Version: "v1"}, {Group: "apps", Version: "v1"}, {Group: "rbac.authorization.k8s.io", Version: "v1"}})
	m.Add(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, meta.RESTScopeNamespace)
	m.Add(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, meta.RESTScopeNamespace)
	m.Add(schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole"}, meta.RESTScopeRoot)
	return m
}

func TestApplyPreparesObjects(t *testing.T) {
	rec := &recorder{}
	a := New(rec, fakeAPI{}, fakeLive{}, mapper())
	cm := u("v1", "ConfigMap", "cm")
	cm.SetLabels(map[string]string{"own": "label"})
	role := u("rbac.authorization.k8s.io/v1", "ClusterRole", "role")
	role.SetNamespace("wrong")

	res, err := a.Apply(context.Background(), "kyma-system", []*unstructured.Unstructured{cm, role}, nil, nil)
	require.NoError(t, err)
	assert.Equal(t, []string{"role", "cm"}, rec.applied)
	assert.Empty(t, cm.GetNamespace(), "the caller's objects are not modified")

	got := map[string]*unstructured.Unstructured{}
	for _, o := range res.Objects {
		got[o.GetName()] = o
	}
	assert.Equal(t, "kyma-system", got["cm"].GetNamespace(), "namespaced kinds get the release namespace")
	assert.Empty(t, got["role"].GetNamespace(), "cluster-scoped kinds have none")
	for _, o := range res.Objects {
		for k, v := range module.Labels() {
			assert.Equal(t, v, o.GetLabels()[k])
		}
		assert.Len(t, o.GetAnnotations()[module.DigestAnnotation], 24)
	}
	assert.Equal(t, "label", got["cm"].GetLabels()["own"])
	assert.Len(t, res.Inventory, 2)
}

func TestApplySkipsWhatIsInPlace(t *testing.T) {
	// First apply, to learn the digest.
	first := &recorder{}
	res, err := New(first, fakeAPI{}, fakeLive{}, mapper()).Apply(context.Background(), "ns", []*unstructured.Unstructured{u("apps/v1", "Deployment", "d")}, nil, nil)
	require.NoError(t, err)
	id := "apps/Deployment/ns/d"
	digest := res.Inventory[id].Digest
	key := types.NamespacedName{Namespace: "ns", Name: "d"}

	live := func(digest string, generation int64, deleting bool) metav1.Object {
		o := &metav1.ObjectMeta{Namespace: "ns", Name: "d", Generation: generation, Annotations: map[string]string{module.DigestAnnotation: digest}}
		if deleting {
			now := metav1.Now()
			o.DeletionTimestamp = &now
		}
		return o
	}
	tests := []struct {
		name     string
		recorded v1alpha1.InventoryEntry
		live     metav1.Object
		wantSend bool
	}{
		{"unchanged", v1alpha1.InventoryEntry{ID: id, Digest: digest, Version: "g3"}, live(digest, 3, false), false},
		{"never recorded", v1alpha1.InventoryEntry{}, live(digest, 3, false), true},
		{"rendered differently", v1alpha1.InventoryEntry{ID: id, Digest: "old", Version: "g3"}, live(digest, 3, false), true},
		{"deleted by someone", v1alpha1.InventoryEntry{ID: id, Digest: digest, Version: "g3"}, nil, true},
		{"being deleted: left alone until gone", v1alpha1.InventoryEntry{ID: id, Digest: digest, Version: "g3"}, live(digest, 3, true), false},
		{"being deleted and rendered differently: left alone until gone", v1alpha1.InventoryEntry{ID: id, Digest: "old", Version: "g3"}, live("old", 3, true), false},
		{"edited by someone", v1alpha1.InventoryEntry{ID: id, Digest: digest, Version: "g3"}, live(digest, 4, false), true},
		{"digest annotation removed", v1alpha1.InventoryEntry{ID: id, Digest: digest, Version: "g3"}, live("", 3, false), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{}
			l := fakeLive{}
			if tt.live != nil {
				l[key] = tt.live
			}
			prev := inventory.Inventory{}
			if tt.recorded.ID != "" {
				prev[id] = tt.recorded
			}
			_, err := New(rec, fakeAPI{}, l, mapper()).Apply(context.Background(), "ns", []*unstructured.Unstructured{u("apps/v1", "Deployment", "d")}, prev, nil)
			require.NoError(t, err)
			assert.Equal(t, tt.wantSend, len(rec.applied) == 1)
		})
	}
}

// A pinned object (rendered from its own live content) is sent with the
// UID of the object that content came from; when the API server refuses it
// for that UID (gone, or replaced) the apply stops Waiting there, with
// nothing after it applied and nothing pruned.
func TestApplyPinnedObject(t *testing.T) {
	const uid = types.UID("uid-1")
	render := func() []*unstructured.Unstructured {
		return []*unstructured.Unstructured{u("v1", "ConfigMap", "creds"), u("apps/v1", "Deployment", "d")}
	}
	// The first apply tells the digest the ConfigMap is rendered with.
	first, err := New(&recorder{}, fakeAPI{}, fakeLive{}, mapper()).Apply(context.Background(), "ns", render(), nil, nil)
	require.NoError(t, err)
	id := "/ConfigMap/ns/creds"
	digest := first.Inventory[id].Digest
	key := types.NamespacedName{Namespace: "ns", Name: "creds"}
	live := func(digest string) metav1.Object {
		return &metav1.ObjectMeta{Namespace: "ns", Name: "creds", UID: uid, ResourceVersion: "7", Annotations: map[string]string{module.DigestAnnotation: digest}}
	}
	gone := apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, "creds", errors.New("uid mismatch"))
	replaced := apierrors.NewInvalid(schema.GroupKind{Kind: "ConfigMap"}, "creds", field.ErrorList{field.Invalid(field.NewPath("metadata", "uid"), uid, "field is immutable")})
	other := apierrors.NewInvalid(schema.GroupKind{Kind: "ConfigMap"}, "creds", field.ErrorList{field.Invalid(field.NewPath("data"), "x", "too long")})
	tests := []struct {
		name        string
		live        metav1.Object
		pins        Pins
		refuse      error
		wantApplied []string
		wantUIDs    []types.UID
		wantWaiting bool
		wantErr     string
	}{
		{name: "not pinned: sent without a UID", wantApplied: []string{"creds", "d"}, wantUIDs: []types.UID{"", ""}},
		{name: "pinned, not in the cache: sent with its UID", pins: Pins{id: uid}, wantApplied: []string{"creds", "d"}, wantUIDs: []types.UID{uid, ""}},
		{name: "pinned, in place: not sent", live: live(digest), pins: Pins{id: uid}, wantApplied: []string{"d"}, wantUIDs: []types.UID{""}},
		{name: "pinned, rendered differently: sent with its UID", live: live("old"), pins: Pins{id: uid}, wantApplied: []string{"creds", "d"}, wantUIDs: []types.UID{uid, ""}},
		{name: "pinned, gone", pins: Pins{id: uid}, refuse: gone, wantApplied: []string{"creds"}, wantUIDs: []types.UID{uid}, wantWaiting: true},
		{name: "pinned, replaced", live: live("old"), pins: Pins{id: uid}, refuse: replaced, wantApplied: []string{"creds"}, wantUIDs: []types.UID{uid}, wantWaiting: true},
		{name: "pinned, refused for another cause: an error", pins: Pins{id: uid}, refuse: other, wantApplied: []string{"creds"}, wantUIDs: []types.UID{uid}, wantErr: "too long"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{refuse: tt.refuse}
			l := fakeLive{}
			prev := inventory.Inventory{}
			if tt.live != nil {
				l[key] = tt.live
				prev[id] = v1alpha1.InventoryEntry{ID: id, Digest: tt.live.GetAnnotations()[module.DigestAnnotation], Version: "rv7"}
			}
			res, err := New(rec, fakeAPI{}, l, mapper()).Apply(context.Background(), "ns", render(), prev, tt.pins)
			assert.Equal(t, tt.wantApplied, rec.applied)
			assert.Equal(t, tt.wantUIDs, rec.uids)
			if tt.wantErr != "" {
				assert.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			if !tt.wantWaiting {
				assert.Empty(t, res.Waiting)
				return
			}
			assert.Equal(t, `ConfigMap "creds" was deleted or replaced after the manager read it; reading it again`, res.Waiting)
			assert.Equal(t, prev, res.Inventory, "the inventory is the last apply's")
			assert.Empty(t, res.Pruned)
		})
	}
}
