package watch

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/pkg/kinds"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
)

// Live reads the live state of the module's objects from the cache, and
// from the API server only for what the cache does not hold.
type Live struct {
	cache     client.Reader
	api       client.Reader
	scheme    *runtime.Scheme
	namespace func() string
	kinds     map[schema.GroupVersionKind]kinds.Kind
}

// NewLive reads from cache (holding the module's namespaced objects of
// namespace) and falls back to api.
func NewLive(cacheReader, api client.Reader, s *runtime.Scheme, namespace string) *Live {
	return NewScopedLive(cacheReader, api, s, fixed(namespace))
}

// Namespacer tells the module namespace of the moment (a scope.Scope).
type Namespacer interface{ Namespace() string }

type fixed string

func (f fixed) Namespace() string { return string(f) }

// NewScopedLive reads from cache, whose namespaced objects are those of
// the namespace ns names at the time of the read, and falls back to api.
func NewScopedLive(cacheReader, api client.Reader, s *runtime.Scheme, ns Namespacer) *Live {
	byGVK := map[schema.GroupVersionKind]kinds.Kind{}
	for _, k := range kinds.Managed() {
		byGVK[k.GVK] = k
	}
	return &Live{cache: cacheReader, api: api, scheme: s, namespace: ns.Namespace, kinds: byGVK}
}

// LiveMeta returns the object's metadata, nil when it does not exist.
func (l *Live) LiveMeta(ctx context.Context, gvk schema.GroupVersionKind, key types.NamespacedName) (metav1.Object, error) {
	obj, err := l.get(ctx, gvk, key)
	if err != nil || obj == nil {
		return nil, err
	}
	return obj, nil
}

// Object returns the whole live object as unstructured (for readiness), nil
// when it does not exist. For metadata-only kinds only metadata is filled.
func (l *Live) Object(ctx context.Context, gvk schema.GroupVersionKind, key types.NamespacedName) (*unstructured.Unstructured, error) {
	obj, err := l.get(ctx, gvk, key)
	if err != nil || obj == nil {
		return nil, err
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("converting %s %s: %w", gvk.Kind, key, err)
	}
	u := &unstructured.Unstructured{Object: content}
	u.SetGroupVersionKind(gvk)
	return u, nil
}

// NodeCount counts the cluster's nodes.
func (l *Live) NodeCount(ctx context.Context) (int, error) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(nodeGVK.GroupVersion().WithKind("NodeList"))
	if err := l.cache.List(ctx, list); err != nil {
		return 0, fmt.Errorf("listing nodes: %w", err)
	}
	return len(list.Items), nil
}

func (l *Live) get(ctx context.Context, gvk schema.GroupVersionKind, key types.NamespacedName) (client.Object, error) {
	k, cached := l.kinds[gvk]
	if cached && k.Namespaced && key.Namespace != l.namespace() {
		cached = false
	}
	var obj client.Object
	reader := l.cache
	if cached {
		o, err := NewObject(l.scheme, k)
		if err != nil {
			return nil, err
		}
		obj = o
	} else {
		m := &metav1.PartialObjectMetadata{}
		m.SetGroupVersionKind(gvk)
		obj, reader = m, l.api
	}
	err := reader.Get(ctx, key, obj)
	var notCached *cache.ErrResourceNotCached
	if errors.As(err, &notCached) {
		m := &metav1.PartialObjectMetadata{}
		m.SetGroupVersionKind(gvk)
		obj, err = m, l.api.Get(ctx, key, m)
	}
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return obj, nil
}

// ListManaged lists the objects labelled as the module's from the cache.
func (l *Live) ListManaged(ctx context.Context) ([]metav1.Object, error) {
	return l.listManaged(ctx, l.cache, false)
}

// ListManagedFromAPI lists the objects labelled as the module's from the API
// server (metadata only): what the cache lists may lag behind, e.g. after a
// watch was down, and an uninstall must not end on the cache's word.
func (l *Live) ListManagedFromAPI(ctx context.Context) ([]metav1.Object, error) {
	return l.listManaged(ctx, l.api, true)
}

// listManaged lists every managed kind with reader; the cache holds the
// full kinds as typed objects, so it is asked for typed lists of them.
func (l *Live) listManaged(ctx context.Context, reader client.Reader, metadataOnly bool) ([]metav1.Object, error) {
	var out []metav1.Object
	namespace := l.namespace()
	for _, k := range kinds.Managed() {
		opts := []client.ListOption{client.MatchingLabelsSelector{Selector: module.Selector()}}
		if k.Namespaced {
			opts = append(opts, client.InNamespace(namespace))
		}
		list := &metav1.PartialObjectMetadataList{}
		var listObj client.ObjectList = list
		if k.Full && !metadataOnly {
			o, err := l.scheme.New(k.GVK.GroupVersion().WithKind(k.GVK.Kind + "List"))
			if err != nil {
				return nil, err
			}
			listObj = o.(client.ObjectList)
		} else {
			list.SetGroupVersionKind(k.GVK.GroupVersion().WithKind(k.GVK.Kind + "List"))
		}
		if err := reader.List(ctx, listObj, opts...); err != nil {
			if meta.IsNoMatchError(err) {
				continue // a kind the API does not serve has no objects
			}
			return nil, fmt.Errorf("listing %s: %w", k.GVK.Kind, err)
		}
		items, err := meta.ExtractList(listObj)
		if err != nil {
			return nil, err
		}
		for _, item := range items {
			o, err := meta.Accessor(item)
			if err != nil {
				return nil, err
			}
			out = append(out, withKind{Object: o, gvk: k.GVK})
		}
	}
	return out, nil
}

// withKind remembers the kind of a listed object, which typed list items lack.
type withKind struct {
	metav1.Object
	gvk schema.GroupVersionKind
}

// GVKOf returns the kind of an object returned by ListManaged.
func GVKOf(o metav1.Object) schema.GroupVersionKind {
	if wk, ok := o.(withKind); ok {
		return wk.gvk
	}
	return schema.GroupVersionKind{}
}
