package reconciler

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// InFlight tracks running reconciles for the liveness check: a reconcile
// running longer than the timeout means the controller hangs (1.8.4 sent a
// probe request through its work queue instead).
type InFlight struct {
	mu      sync.Mutex
	now     func() time.Time
	started map[types.NamespacedName]time.Time
}

// NewInFlight returns an empty tracker.
func NewInFlight() *InFlight {
	return &InFlight{now: time.Now, started: map[types.NamespacedName]time.Time{}}
}

// Wrap returns r recording each reconcile while it runs. The work queue
// never runs two reconciles of one key at once, so the key identifies it.
func (f *InFlight) Wrap(r reconcile.Reconciler) reconcile.Reconciler {
	return reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		f.mu.Lock()
		f.started[req.NamespacedName] = f.now()
		f.mu.Unlock()
		defer func() {
			f.mu.Lock()
			delete(f.started, req.NamespacedName)
			f.mu.Unlock()
		}()
		return r.Reconcile(ctx, req)
	})
}

// Check fails while some reconcile has run longer than timeout.
func (f *InFlight) Check(timeout time.Duration) healthz.Checker {
	return func(*http.Request) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		for key, at := range f.started {
			if d := f.now().Sub(at); d > timeout {
				return fmt.Errorf("reconcile of Function %s running for %s (limit %s)", key, d.Round(time.Second), timeout)
			}
		}
		return nil
	}
}
