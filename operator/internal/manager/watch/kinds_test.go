package watch

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/pkg/kinds"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
)

// What the cache holds of each kind: a namespace with thousands of user
// Secrets or Services must not grow the manager's memory by their content.
func TestCacheOptionsHoldOnlyTheModulesSecretsAndServicesAsMetadata(t *testing.T) {
	s, err := NewScheme()
	require.NoError(t, err)
	opts, err := NamespaceCacheOptions(s, "kyma-system")
	require.NoError(t, err)

	byGVK := map[schema.GroupVersionKind]client.Object{}
	for obj := range opts.ByObject {
		gvk := obj.GetObjectKind().GroupVersionKind()
		if gvk.Empty() {
			gvks, _, err := s.ObjectKinds(obj)
			require.NoError(t, err)
			gvk = gvks[0]
		}
		byGVK[gvk] = obj
	}
	tests := []struct {
		gvk          schema.GroupVersionKind
		metadataOnly bool
	}{
		{corev1.SchemeGroupVersion.WithKind("Secret"), true},
		{corev1.SchemeGroupVersion.WithKind("ConfigMap"), true},
		{corev1.SchemeGroupVersion.WithKind("Service"), true},
		{schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.gvk.Kind, func(t *testing.T) {
			obj, ok := byGVK[tt.gvk]
			require.True(t, ok, "cached")
			_, isMeta := obj.(*metav1.PartialObjectMetadata)
			assert.Equal(t, tt.metadataOnly, isMeta)
		})
	}
	// Secrets and Services: only the module's, by label, in its namespace
	// (the users' few the configuration reads are watched by name).
	for _, kind := range []string{"Secret", "Service"} {
		ns := opts.ByObject[byGVK[corev1.SchemeGroupVersion.WithKind(kind)]].Namespaces
		require.Equal(t, []string{"kyma-system"}, keys(ns), "only the module namespace's %ss", kind)
		sel := ns["kyma-system"].LabelSelector
		require.NotNil(t, sel, kind)
		assert.Equal(t, moduleSelector(t).String(), sel.String(), "%ss selected by the module labels", kind)
		assert.Nil(t, opts.ByObject[byGVK[corev1.SchemeGroupVersion.WithKind(kind)]].Transform, kind)
	}
}

// The main cache holds the cluster-scoped managed kinds and nothing
// namespaced of the module: that is the module namespace cache's, which
// holds every namespaced managed kind in that namespace only.
func TestMainAndNamespaceCachesSplitTheManagedKinds(t *testing.T) {
	s, err := NewScheme()
	require.NoError(t, err)
	main, err := CacheOptions(s)
	require.NoError(t, err)
	nsOpts, err := NamespaceCacheOptions(s, "team-a")
	require.NoError(t, err)
	kindOf := func(obj client.Object) kinds.Kind {
		gvk := obj.GetObjectKind().GroupVersionKind()
		if gvk.Empty() {
			gvks, _, err := s.ObjectKinds(obj)
			require.NoError(t, err)
			gvk = gvks[0]
		}
		for _, k := range kinds.Managed() {
			if k.GVK == gvk {
				return k
			}
		}
		return kinds.Kind{GVK: gvk}
	}
	managedInMain := 0
	for obj := range main.ByObject {
		k := kindOf(obj)
		assert.False(t, k.Namespaced, "%s in the main cache", k.GVK.Kind)
		if k.GVK.Kind != "Serverless" && k.GVK.Kind != "Node" {
			managedInMain++
		}
	}
	inNamespace := 0
	for obj, by := range nsOpts.ByObject {
		k := kindOf(obj)
		assert.True(t, k.Namespaced, "%s in the namespace cache", k.GVK.Kind)
		assert.Equal(t, []string{"team-a"}, keys(by.Namespaces), k.GVK.Kind)
		inNamespace++
	}
	assert.Equal(t, []string{"team-a"}, keys(nsOpts.DefaultNamespaces))
	assert.Equal(t, len(kinds.Managed()), managedInMain+inNamespace, "every managed kind in one of the two")
}

func moduleSelector(t *testing.T) labels.Selector {
	t.Helper()
	return module.Selector()
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
