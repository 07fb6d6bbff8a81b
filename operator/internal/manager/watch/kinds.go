// Package watch decides, from the table of package kinds, what the manager
// caches and watches: only the module's own objects (by label, in the
// module's namespace), the Serverless CRs and node metadata; the few user
// objects its configuration reads (the registry Secret a CR names, the
// telemetry Service) are watched one by one by name (Named). Memory
// therefore grows neither with the cluster nor with the module namespace.
package watch

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
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

// CacheOptions restricts the manager's main cache to the Serverless CRs of
// every namespace, node metadata and the module's cluster-scoped objects
// (by label); reads of anything else fail instead of silently starting a
// cluster-wide informer. The module's namespaced objects are cached by the
// module namespace's own cache (NamespaceCacheOptions, package scope): that
// namespace is the served CR's and may change while the manager runs.
func CacheOptions(s *runtime.Scheme) (cache.Options, error) {
	byObject := map[client.Object]cache.ByObject{
		&v1alpha1.Serverless{}: {},
		nodeMeta():             {},
	}
	for _, k := range kinds.Managed() {
		if k.Namespaced {
			continue
		}
		obj, err := NewObject(s, k)
		if err != nil {
			return cache.Options{}, err
		}
		byObject[obj] = cache.ByObject{Label: module.Selector()}
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
