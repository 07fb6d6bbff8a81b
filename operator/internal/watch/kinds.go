// Package watch decides what the manager caches and watches: only the
// module's own objects (by label, in the module's namespace), the Serverless
// CRs, node metadata, and the two kinds of the module namespace users feed it
// (registry Secrets and the telemetry Service). Memory therefore does not
// grow with the size of the cluster.
package watch

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/internal/module"
)

// Kind is one managed kind and how it is cached.
type Kind struct {
	GVK schema.GroupVersionKind
	// Full kinds are cached as whole objects because their status tells
	// readiness, or their data is read; the others as metadata only.
	Full bool
	// Namespaced kinds are cached in the module namespace only.
	Namespaced bool
	// AllInNamespace caches every object of the kind in the module namespace,
	// not only the module's: users put registry Secrets there, and the
	// telemetry module its Service.
	AllInNamespace bool
}

// ManagedKinds lists every kind the chart may render. A kind the chart
// renders must be here, or its drift goes unnoticed (a test checks this).
func ManagedKinds() []Kind {
	gvk := func(group, version, kind string) schema.GroupVersionKind {
		return schema.GroupVersionKind{Group: group, Version: version, Kind: kind}
	}
	return []Kind{
		{GVK: gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition"), Full: true},
		{GVK: gvk("scheduling.k8s.io", "v1", "PriorityClass")},
		{GVK: gvk("rbac.authorization.k8s.io", "v1", "ClusterRole")},
		{GVK: gvk("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding")},
		{GVK: gvk("admissionregistration.k8s.io", "v1", "ValidatingWebhookConfiguration")},
		{GVK: gvk("admissionregistration.k8s.io", "v1", "MutatingWebhookConfiguration")},
		{GVK: gvk("", "v1", "ServiceAccount"), Namespaced: true},
		{GVK: gvk("rbac.authorization.k8s.io", "v1", "Role"), Namespaced: true},
		{GVK: gvk("rbac.authorization.k8s.io", "v1", "RoleBinding"), Namespaced: true},
		{GVK: gvk("", "v1", "ConfigMap"), Namespaced: true},
		{GVK: gvk("networking.k8s.io", "v1", "NetworkPolicy"), Namespaced: true},
		{GVK: gvk("", "v1", "Secret"), Namespaced: true, Full: true, AllInNamespace: true},
		{GVK: gvk("", "v1", "Service"), Namespaced: true, Full: true, AllInNamespace: true},
		{GVK: gvk("", "v1", "PersistentVolumeClaim"), Namespaced: true, Full: true},
		{GVK: gvk("apps", "v1", "Deployment"), Namespaced: true, Full: true},
	}
}

// HasStatus tells whether the readiness of a kind shows in its status: the
// kinds cached in full, apart from Secrets and Services, which are cached in
// full for their data.
func HasStatus(gvk schema.GroupVersionKind) bool {
	for _, k := range ManagedKinds() {
		if k.GVK == gvk {
			return k.Full && !k.AllInNamespace
		}
	}
	return false
}

// NodeGVK is cached as metadata to count nodes for the default presets.
var nodeGVK = schema.GroupVersionKind{Version: "v1", Kind: "Node"}

// NewScheme knows every type the manager reads or writes typed.
func NewScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, v1alpha1.AddToScheme} {
		if err := add(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// NewObject returns the object the cache holds for k: a typed object for full
// kinds, metadata otherwise.
func NewObject(s *runtime.Scheme, k Kind) (client.Object, error) {
	if k.Full {
		o, err := s.New(k.GVK)
		if err != nil {
			return nil, err
		}
		return o.(client.Object), nil
	}
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(k.GVK)
	return m, nil
}

// CacheOptions restricts the manager's cache to what it owns; reads of
// anything else fail instead of silently starting a cluster-wide informer.
func CacheOptions(s *runtime.Scheme, namespace string) (cache.Options, error) {
	selector := module.Selector()
	byObject := map[client.Object]cache.ByObject{
		&v1alpha1.Serverless{}: {},
		nodeMeta():             {},
	}
	for _, k := range ManagedKinds() {
		obj, err := NewObject(s, k)
		if err != nil {
			return cache.Options{}, err
		}
		switch {
		case k.AllInNamespace:
			byObject[obj] = cache.ByObject{Namespaces: map[string]cache.Config{namespace: {LabelSelector: labels.Everything()}}}
		case k.Namespaced:
			byObject[obj] = cache.ByObject{Namespaces: map[string]cache.Config{namespace: {LabelSelector: selector}}}
		default:
			byObject[obj] = cache.ByObject{Label: selector}
		}
	}
	return cache.Options{
		Scheme:                      s,
		ByObject:                    byObject,
		ReaderFailOnMissingInformer: true,
		DefaultTransform:            cache.TransformStripManagedFields(),
	}, nil
}

func nodeMeta() *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(nodeGVK)
	return m
}
