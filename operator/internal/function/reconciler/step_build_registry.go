package reconciler

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/internal/function/resources"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
)

// registryNotReady holds back a build that would push to the internal
// registry while its Service has no ready endpoint (a registry re-created
// by a mode switch or a reinstall, its Pod not ready yet): such a build
// cannot push, fails, and costs the Function a backoff. The cause it
// returns says what the build waits for (nil: nothing); a change of the
// registry's EndpointSlices requeues the Function, and registryRecheck at
// the latest (the build step's requeue). A Job already running is left to
// end as it does. External registries are never waited for.
func (r *Reconciler) registryNotReady(ctx context.Context, p *pass) (*cause, error) {
	if !p.in.Registry.Internal {
		return nil, nil
	}
	ready, err := r.registryShows(ctx, p, func(found []discoveryv1.EndpointSlice) bool {
		return resources.ServiceHasReadyEndpoint(module.RegistryServiceName, found)
	})
	if err != nil || ready {
		return nil, err
	}
	r.slots.Leave(p.key)
	return &cause{corev1.ConditionUnknown, v1alpha2.ReasonJobWaiting,
		fmt.Sprintf("waiting for the internal registry %s/%s to have a ready endpoint", r.cfg.BaseNamespace, module.RegistryServiceName)}, nil
}

// registryBackAfter reports whether the internal registry became ready
// again after t, when a build failed: a build that failed because the
// registry was away (its Pod deleted, restarted, not placed) runs again as
// soon as the registry is back, instead of after its backoff. Until then
// the Function is among the registry's waiters, so that the registry's
// return wakes it. An external registry, or one ready all along, says no:
// the backoff stands. (A Job's failure time has whole seconds: a registry
// ready in the same second may earn it one early retry, not more, as the
// retry fails after the registry's change.)
func (r *Reconciler) registryBackAfter(ctx context.Context, p *pass, t time.Time) (bool, error) {
	if !p.in.Registry.Internal {
		return false, nil
	}
	return r.registryShows(ctx, p, func(found []discoveryv1.EndpointSlice) bool {
		return resources.ReadyAgainAfter(module.RegistryServiceName, found, t)
	})
}

// registryShows reports whether the internal registry's EndpointSlices are
// what the Function's build waits for (ok); until they are, the Function is
// among the registry's waiters.
func (r *Reconciler) registryShows(ctx context.Context, p *pass, ok func([]discoveryv1.EndpointSlice) bool) (bool, error) {
	// Before the read: a change the read does not see finds the Function
	// among the waiting.
	r.registryWaits.add(p.key)
	found, err := r.moduleServiceSlices(ctx, module.RegistryServiceName)
	if err != nil || !ok(found) {
		return false, err
	}
	r.registryWaits.remove(p.key)
	return true, nil
}

// registryWaiters are the Functions whose build waits for the internal
// registry, to start or to be retried. A change of the registry's
// EndpointSlices takes them all: each pass adds its Function again while
// the wait lasts.
type registryWaiters struct {
	mu   sync.Mutex
	keys map[types.NamespacedName]struct{}
}

func newRegistryWaiters() *registryWaiters {
	return &registryWaiters{keys: map[types.NamespacedName]struct{}{}}
}

func (w *registryWaiters) add(key types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.keys[key] = struct{}{}
}

func (w *registryWaiters) remove(key types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.keys, key)
}

// take returns the waiting Functions and forgets them.
func (w *registryWaiters) take() []types.NamespacedName {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]types.NamespacedName, 0, len(w.keys))
	for k := range w.keys {
		out = append(out, k)
	}
	clear(w.keys)
	return out
}

// registryRecheck bounds a build's wait for the internal registry when no
// change of its EndpointSlices wakes the Function: the wait is a level the
// next pass reads again, not only an edge the watch must deliver.
const registryRecheck = 10 * time.Second
