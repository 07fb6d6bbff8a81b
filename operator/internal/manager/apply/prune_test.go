package apply

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/inventory"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
)

// fakeAPI is the API server's answer by "Kind/namespace/name": metadata for
// the managed kinds, typed CRDs; lists of a CRD's objects by list kind.
type fakeAPI struct {
	// forbidden keys the manager may not read.
	forbidden map[string]bool
	objs      map[string]metav1.Object
	crds      map[string]*apiextensionsv1.CustomResourceDefinition
	lists     map[string][]metav1.PartialObjectMetadata
}

func (f fakeAPI) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	notFound := apierrors.NewNotFound(schema.GroupResource{Resource: "any"}, key.Name)
	if crd, ok := obj.(*apiextensionsv1.CustomResourceDefinition); ok {
		c, found := f.crds[key.Name]
		if !found {
			return notFound
		}
		*crd = *c
		return nil
	}
	m := obj.(*metav1.PartialObjectMetadata)
	if f.forbidden[m.Kind+"/"+key.Namespace+"/"+key.Name] {
		return apierrors.NewForbidden(schema.GroupResource{Resource: m.Kind}, key.Name, errors.New("RBAC: not allowed"))
	}
	o, ok := f.objs[m.Kind+"/"+key.Namespace+"/"+key.Name]
	if !ok {
		return notFound
	}
	m.ObjectMeta = *o.(*metav1.ObjectMeta)
	return nil
}

func (f fakeAPI) List(_ context.Context, list client.ObjectList, _ ...client.ListOption) error {
	l := list.(*metav1.PartialObjectMetadataList)
	l.Items = f.lists[l.Kind]
	return nil
}

// appliedMeta is an object the manager applied.
func appliedMeta(ns, name string, finalizers ...string) *metav1.ObjectMeta {
	return &metav1.ObjectMeta{Namespace: ns, Name: name, Labels: module.Labels(), Finalizers: finalizers,
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: module.ManagerName, Operation: metav1.ManagedFieldsOperationApply}}}
}

func functionsCRD(established bool) *apiextensionsv1.CustomResourceDefinition {
	status := apiextensionsv1.ConditionTrue
	if !established {
		status = apiextensionsv1.ConditionFalse
	}
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: *appliedMeta("", "functions.serverless.kyma-project.io"),
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "serverless.kyma-project.io",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: "Function", ListKind: "FunctionList", Plural: "functions"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{
				{Name: "v1alpha1", Served: false}, {Name: "v1alpha2", Served: true, Storage: true}},
		},
		Status: apiextensionsv1.CustomResourceDefinitionStatus{Conditions: []apiextensionsv1.CustomResourceDefinitionCondition{
			{Type: apiextensionsv1.NamesAccepted, Status: apiextensionsv1.ConditionTrue},
			{Type: apiextensionsv1.Established, Status: status}}},
	}
}

func entries(ids ...string) inventory.Inventory {
	inv := inventory.Inventory{}
	for _, id := range ids {
		inv[id] = inventoryEntry(id)
	}
	return inv
}

func TestPruneDeletesOnlyWhatTheManagerApplied(t *testing.T) {
	copied := appliedMeta("ns", "my-registry-copy")
	copied.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl-create", Operation: metav1.ManagedFieldsOperationUpdate}}
	unlabelled := appliedMeta("ns", "adopted-by-user")
	unlabelled.Labels = nil
	api := fakeAPI{objs: map[string]metav1.Object{
		"ConfigMap/ns/gone":            appliedMeta("ns", "gone"),
		"ConfigMap/ns/finalized":       appliedMeta("ns", "finalized", "example.com/cleanup"),
		"ConfigMap/ns/adopted-by-user": unlabelled,
		"Secret/ns/my-registry-copy":   copied,
		"Secret/other/registry":        appliedMeta("other", "registry"),
	}, forbidden: map[string]bool{"ClusterRole//cluster-admin": true}}
	prev := entries(
		"/ConfigMap/ns/gone", "/ConfigMap/ns/finalized", "/ConfigMap/ns/adopted-by-user", "/ConfigMap/ns/already-gone",
		// Entries someone wrote into the status by hand.
		"/Secret/ns/my-registry-copy", "/Secret/other/registry", "/Pod/ns/p", "rbac.authorization.k8s.io/ClusterRole/ns/r", "garbage",
		"rbac.authorization.k8s.io/ClusterRole//cluster-admin",
	)
	rec := &recorder{}
	res, err := New(rec, api, fakeLive{}, mapper()).Apply(context.Background(), "ns", nil, prev, nil)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"finalized", "gone"}, rec.deleted,
		"only objects with the module labels that the manager applied, of a managed kind, in the module namespace")
	assert.ElementsMatch(t, []string{"/ConfigMap/ns/already-gone", "/ConfigMap/ns/gone"}, res.Pruned,
		"deleted without finalizers is gone at once")
	assert.ElementsMatch(t, []string{"/ConfigMap/ns/adopted-by-user", "/Secret/ns/my-registry-copy", "/Secret/other/registry",
		"/Pod/ns/p", "rbac.authorization.k8s.io/ClusterRole/ns/r", "garbage", "rbac.authorization.k8s.io/ClusterRole//cluster-admin"},
		res.Dropped, "left alone and forgotten; one the manager may not even read does not block the prune")
	assert.Equal(t, []string{"/ConfigMap/ns/finalized"}, ids(res.Inventory), "deleted but kept by a finalizer: still recorded")
}

func ids(inv inventory.Inventory) []string {
	var out []string
	for _, e := range inv.Entries() {
		out = append(out, e.ID)
	}
	return out
}

func inventoryEntry(id string) v1alpha1.InventoryEntry {
	return v1alpha1.InventoryEntry{ID: id, Digest: "x", Version: "rv1"}
}

// A CRD that left the chart goes only when the API server confirms that it
// has no objects: deleting it would delete them all.
func TestPruneKeepsACRDWithObjects(t *testing.T) {
	const id = "apiextensions.k8s.io/CustomResourceDefinition//functions.serverless.kyma-project.io"
	fn := metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "hello"}}
	tests := []struct {
		name        string
		crd         *apiextensionsv1.CustomResourceDefinition
		functions   []metav1.PartialObjectMetadata
		wantErr     string
		wantDeleted bool
	}{
		{name: "no objects", crd: functionsCRD(true), wantDeleted: true},
		{name: "objects exist", crd: functionsCRD(true), functions: []metav1.PartialObjectMetadata{fn},
			wantErr: "1 of its objects exist (team-a/hello)"},
		{name: "not established: its objects cannot be listed", crd: functionsCRD(false),
			wantErr: "CustomResourceDefinition functions.serverless.kyma-project.io is not Established"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := fakeAPI{
				objs: map[string]metav1.Object{
					"CustomResourceDefinition//functions.serverless.kyma-project.io": &tt.crd.ObjectMeta,
				},
				lists: map[string][]metav1.PartialObjectMetadata{"FunctionList": tt.functions},
			}
			api.crds = map[string]*apiextensionsv1.CustomResourceDefinition{tt.crd.Name: tt.crd}
			rec := &recorder{}
			res, err := New(rec, api, fakeLive{}, mapper()).Apply(context.Background(), "ns", nil, entries(id), nil)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				assert.Empty(t, rec.deleted)
				assert.Equal(t, []string{id}, ids(res.Inventory), "still recorded, pruned later")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, []string{"functions.serverless.kyma-project.io"}, rec.deleted)
		})
	}
}
