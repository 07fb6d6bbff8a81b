package reconciler

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
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
// (core/v1). The cache's metadata says whether it exists and at which
// version; the object is read from the API server when the memo does not
// hold that version. An object missing from the cache is looked up on the
// API server before it is called missing: right after start, or when a
// watch lags, the cache may not have it yet, and for the internal registry
// "missing" means new credentials (every pushed image unreadable with the
// old ones) or another NodePort.
func (r *Reconciler) readThrough(ctx context.Context, kind string, key types.NamespacedName, into client.Object, extract func(client.Object) any) (any, bool, error) {
	k := memoKey{kind: kind, key: key}
	meta := &metav1.PartialObjectMetadata{}
	meta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(kind))
	cached, err := r.get(ctx, key, meta)
	if err != nil {
		return nil, false, err
	}
	if cached {
		if v, ok := r.reads.lookup(k, meta.ResourceVersion); ok {
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

// secretData returns a Secret's data (never nil when found).
func (r *Reconciler) secretData(ctx context.Context, key types.NamespacedName) (map[string][]byte, bool, error) {
	v, found, err := r.readThrough(ctx, "Secret", key, &corev1.Secret{}, func(o client.Object) any {
		data := o.(*corev1.Secret).Data
		if data == nil {
			data = map[string][]byte{}
		}
		return data
	})
	if !found || err != nil {
		return nil, found, err
	}
	return v.(map[string][]byte), true, nil
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
