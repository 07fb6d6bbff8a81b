package reconciler

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// secretMemo keeps the data of the few Secrets the configuration reads (the
// registry configuration and the user's external registry Secret), keyed
// by namespace/name, with the resourceVersion it was read at. The cache
// holds Secrets as metadata only, so memory does not grow with the Secrets
// of the namespace, and an unchanged Secret costs no request.
type secretMemo struct {
	mu      sync.Mutex
	entries map[types.NamespacedName]memoSecret
}

type memoSecret struct {
	resourceVersion string
	data            map[string][]byte
}

func (m *secretMemo) lookup(key types.NamespacedName, rv string) (map[string][]byte, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.entries[key]
	if !ok || e.resourceVersion != rv {
		return nil, false
	}
	return e.data, true
}

func (m *secretMemo) store(key types.NamespacedName, rv string, data map[string][]byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.entries == nil {
		m.entries = map[types.NamespacedName]memoSecret{}
	}
	m.entries[key] = memoSecret{resourceVersion: rv, data: data}
}

func (m *secretMemo) drop(key types.NamespacedName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.entries, key)
}

// secretData returns a Secret's data (never nil when found). The cache's
// metadata says whether the Secret exists and at which version; the data is
// read from the API server when the memo does not hold that version. A
// Secret missing from the cache is looked up on the API server before it
// is called missing: right after start, or when a watch lags, the cache
// may not have it yet, and for the internal registry "missing" means new
// credentials, i.e. every pushed image unreadable with the old ones.
func (r *Reconciler) secretData(ctx context.Context, key types.NamespacedName) (map[string][]byte, bool, error) {
	meta := &metav1.PartialObjectMetadata{}
	meta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	cached, err := r.get(ctx, key, meta)
	if err != nil {
		return nil, false, err
	}
	if cached {
		if data, ok := r.secrets.lookup(key, meta.ResourceVersion); ok {
			return data, true, nil
		}
	}
	secret := &corev1.Secret{}
	err = r.api.Get(ctx, key, secret)
	if apierrors.IsNotFound(err) {
		r.secrets.drop(key)
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("reading Secret %s: %w", key, err)
	}
	data := secret.Data
	if data == nil {
		data = map[string][]byte{}
	}
	r.secrets.store(key, secret.ResourceVersion, data)
	return data, true, nil
}
