package watch

import (
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/pkg/kinds"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
)

// NamespaceCacheOptions restricts a cache to the module's namespaced
// objects (by label) in namespace, the module namespace of the moment
// (package scope owns that cache and replaces it when the namespace moves).
func NamespaceCacheOptions(s *runtime.Scheme, namespace string) (cache.Options, error) {
	objs, err := NamespacedObjects(s)
	if err != nil {
		return cache.Options{}, err
	}
	byObject := map[client.Object]cache.ByObject{}
	for _, obj := range objs {
		byObject[obj] = cache.ByObject{Namespaces: map[string]cache.Config{namespace: {LabelSelector: module.Selector()}}}
	}
	return cache.Options{
		Scheme:                      s,
		ByObject:                    byObject,
		DefaultNamespaces:           map[string]cache.Config{namespace: {}},
		ReaderFailOnMissingInformer: true,
		DefaultTransform:            cache.TransformStripManagedFields(),
	}, nil
}

// NamespacedObjects returns the cached form of every namespaced managed
// kind: the informers and watches of a namespace cache.
func NamespacedObjects(s *runtime.Scheme) ([]client.Object, error) {
	var out []client.Object
	for _, k := range kinds.Managed() {
		if !k.Namespaced {
			continue
		}
		obj, err := NewObject(s, k)
		if err != nil {
			return nil, err
		}
		out = append(out, obj)
	}
	return out, nil
}
