package reconciler

import (
	"context"
	"errors"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/internal/manager/watch"
)

// readMemo keeps what the configuration takes from the few objects whose
// content it reads (the registry configuration Secret, the user's registry
// Secret, the registry Service's NodePort), keyed by kind and
// namespace/name, with the resourceVersion it was read at. The cache holds
// Secrets and Services as metadata only, so memory does not grow with the
// objects of the namespace, and an unchanged object costs no request.
type readMemo struct {
	mu      sync.Mutex
	entries map[memoKey]memoEntry
}

type memoKey struct {
	kind string
	key  types.NamespacedName
}

type memoEntry struct {
	resourceVersion string
	value           any
}

func (m *readMemo) lookup(k memoKey, rv string) (any, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.entries[k]
	if !ok || e.resourceVersion != rv {
		return nil, false
	}
	return e.value, true
}

func (m *readMemo) store(k memoKey, rv string, v any) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.entries == nil {
		m.entries = map[memoKey]memoEntry{}
	}
	m.entries[k] = memoEntry{resourceVersion: rv, value: v}
}

func (m *readMemo) drop(k memoKey) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.entries, k)
}

// readThrough returns what extract takes from the object key of kind
// (core/v1). The cache's metadata (for the module's objects) or the
// object's watch by name (for the users', see NamedWatches) says whether it
// exists and at which version; the object is read from the API server when
// the memo does not hold that version. An object missing from the cache is looked up on the
// API server before it is called missing: right after start, or when a
// watch lags, the cache may not have it yet, and for the internal registry
// "missing" means new credentials (every pushed image unreadable with the
// old ones) or another NodePort.
func (r *Reconciler) readThrough(ctx context.Context, kind string, key types.NamespacedName, into client.Object, extract func(client.Object) any) (any, bool, error) {
	k := memoKey{kind: kind, key: key}
	rv, known, err := r.version(ctx, corev1.SchemeGroupVersion.WithKind(kind), key)
	if err != nil {
		return nil, false, err
	}
	if known {
		if v, ok := r.reads.lookup(k, rv); ok {
			return v, true, nil
		}
	}
	err = r.api.Get(ctx, key, into)
	if apierrors.IsNotFound(err) {
		r.reads.drop(k)
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("reading %s %s: %w", kind, key, err)
	}
	v := extract(into)
	r.reads.store(k, into.GetResourceVersion(), v)
	return v, true, nil
}

// version returns the resourceVersion of an object from the cache, or from
// its watch by name; known is false when neither holds it.
func (r *Reconciler) version(ctx context.Context, gvk schema.GroupVersionKind, key types.NamespacedName) (string, bool, error) {
	m, found, err := r.watchedMeta(ctx, gvk, key)
	if err != nil || !found {
		return "", false, err
	}
	return m.GetResourceVersion(), true, nil
}

// watchedMeta returns an object's metadata from the cache (the module's
// objects) or, when the cache does not hold it, from its watch by name
// (the users' objects a CR's configuration declared with NamedWatches.Use).
func (r *Reconciler) watchedMeta(ctx context.Context, gvk schema.GroupVersionKind, key types.NamespacedName) (*metav1.PartialObjectMetadata, bool, error) {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(gvk)
	found, err := r.get(ctx, key, m)
	if err != nil || found || r.opts.Named == nil {
		return m, found, err
	}
	named, found, err := r.opts.Named.Get(watch.NamedKey{GVK: gvk, NamespacedName: key})
	if errors.Is(err, watch.ErrNotWatched) {
		return m, false, nil
	}
	return named, found, err
}

// secretContent is what the manager reads of a Secret: its data (never
// nil when found) and which Secret of that name held it.
type secretContent struct {
	data map[string][]byte
	uid  types.UID
}

// secretData returns a Secret's content.
func (r *Reconciler) secretData(ctx context.Context, key types.NamespacedName) (secretContent, bool, error) {
	v, found, err := r.readThrough(ctx, "Secret", key, &corev1.Secret{}, func(o client.Object) any {
		data := o.(*corev1.Secret).Data
		if data == nil {
			data = map[string][]byte{}
		}
		return secretContent{data: data, uid: o.GetUID()}
	})
	if !found || err != nil {
		return secretContent{}, found, err
	}
	return v.(secretContent), true, nil
}

// serviceNodePort returns the NodePort of a Service (0 when it has none).
func (r *Reconciler) serviceNodePort(ctx context.Context, key types.NamespacedName) (int32, bool, error) {
	v, found, err := r.readThrough(ctx, "Service", key, &corev1.Service{}, func(o client.Object) any {
		var port int32
		for _, p := range o.(*corev1.Service).Spec.Ports {
			if p.NodePort != 0 {
				port = p.NodePort
			}
		}
		return port
	})
	if !found || err != nil {
		return 0, found, err
	}
	return v.(int32), true, nil
}
