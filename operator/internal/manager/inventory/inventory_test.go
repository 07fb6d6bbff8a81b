package inventory

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
)

func obj(apiVersion, kind, ns, name string, data map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind, "data": data}}
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

func TestIDRoundTrip(t *testing.T) {
	tests := []struct {
		obj  *unstructured.Unstructured
		want string
	}{
		{obj("v1", "ConfigMap", "kyma-system", "a", nil), "/ConfigMap/kyma-system/a"},
		{obj("apps/v1", "Deployment", "ns", "d", nil), "apps/Deployment/ns/d"},
		{obj("rbac.authorization.k8s.io/v1", "ClusterRole", "", "r", nil), "rbac.authorization.k8s.io/ClusterRole//r"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			id := ID(tt.obj)
			assert.Equal(t, tt.want, id)
			ref, ok := ParseID(id)
			require.True(t, ok)
			assert.Equal(t, tt.obj.GroupVersionKind().GroupKind(), ref.GroupKind)
			assert.Equal(t, tt.obj.GetNamespace(), ref.Namespace)
			assert.Equal(t, tt.obj.GetName(), ref.Name)
		})
	}
	for _, bad := range []string{"", "a/b", "g/Kind/ns/", "g//ns/n", "a/b/c/d/e"} {
		_, ok := ParseID(bad)
		assert.False(t, ok, bad)
	}
}

func TestDigestFollowsContent(t *testing.T) {
	a := obj("v1", "ConfigMap", "ns", "a", map[string]any{"x": "1", "y": "2"})
	sameContent := obj("v1", "ConfigMap", "ns", "a", map[string]any{"y": "2", "x": "1"})
	changed := obj("v1", "ConfigMap", "ns", "a", map[string]any{"x": "1", "y": "3"})

	da, err := Digest(a)
	require.NoError(t, err)
	db, err := Digest(sameContent)
	require.NoError(t, err)
	dc, err := Digest(changed)
	require.NoError(t, err)

	assert.Equal(t, da, db, "key order must not matter")
	assert.NotEqual(t, da, dc)
	assert.Len(t, da, 24)
}

func TestEntriesAreSorted(t *testing.T) {
	inv := FromEntries([]v1alpha1.InventoryEntry{{ID: "b"}, {ID: "c"}, {ID: "a"}})
	ids := []string{}
	for _, e := range inv.Entries() {
		ids = append(ids, e.ID)
	}
	assert.Equal(t, []string{"a", "b", "c"}, ids)
}
