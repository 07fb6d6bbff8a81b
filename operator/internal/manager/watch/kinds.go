// Package watch decides, from the table of package kinds, what the manager
// caches and watches: only the module's own objects (by label, in the
// module's namespace), the Serverless CRs, node metadata, and the two kinds
// of the module namespace users feed it (registry Secrets and the telemetry
// Service). Memory therefore does not grow with the size of the cluster.
package watch

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/pkg/kinds"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
)

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
func NewObject(s *runtime.Scheme, k kinds.Kind) (client.Object, error) {
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
	for _, k := range kinds.Managed() {
		obj, err := NewObject(s, k)
		if err != nil {
			return cache.Options{}, err
		}
		switch {
		case k.AllInNamespace:
			byObject[obj] = cache.ByObject{
				Namespaces: map[string]cache.Config{namespace: {LabelSelector: labels.Everything()}},
				Transform:  TrimForeign(selector),
			}
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

// TrimForeign keeps, of an object that is not the module's, only what the
// manager uses: its identity and version (it exists; has it changed). Its
// labels and annotations go: a Secret applied with kubectl carries its whole
// data in the last-applied annotation, and a namespace full of such objects
// must not grow the manager's memory. The module's own objects are kept
// whole (drift detection reads their labels and annotations); managedFields
// go for all.
func TrimForeign(selector labels.Selector) toolscache.TransformFunc {
	strip := cache.TransformStripManagedFields()
	return func(in any) (any, error) {
		out, err := strip(in)
		if err != nil {
			return out, err
		}
		m, ok := out.(metav1.Object)
		if !ok || selector.Matches(labels.Set(m.GetLabels())) {
			return out, nil
		}
		m.SetLabels(nil)
		m.SetAnnotations(nil)
		m.SetOwnerReferences(nil)
		m.SetFinalizers(nil)
		m.SetGenerateName("")
		return out, nil
	}
}

func nodeMeta() *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(nodeGVK)
	return m
}
