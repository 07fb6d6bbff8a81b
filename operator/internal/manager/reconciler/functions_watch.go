package reconciler

import (
	"context"
	"sync"
)

// functionsWatch is the Function informer a blocked uninstall starts so the
// deletion of the last Function resumes it at once. It exists only while
// an uninstall waits: the manager has no business caching every Function
// of the cluster otherwise, so it is stopped when the uninstall ends.
type functionsWatch struct {
	mu     sync.Mutex
	active bool
	// start registers the watch (an informer in the manager's cache).
	start func() error
	// stop removes that informer from the cache.
	stop func(ctx context.Context) error
}

// ensure starts the watch unless it runs; a failure leaves the uninstall
// to its timed rechecks.
func (w *functionsWatch) ensure() error {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.active {
		return nil
	}
	if err := w.start(); err != nil {
		return err
	}
	w.active = true
	return nil
}

// release stops the watch when it runs.
func (w *functionsWatch) release(ctx context.Context) error {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.active {
		return nil
	}
	if err := w.stop(ctx); err != nil {
		return err
	}
	w.active = false
	return nil
}
