package reconciler

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// functionsWatchSync bounds the wait for a new Function watch to list the
// Functions; an uninstall whose watch has not synced rechecks on time.
const functionsWatchSync = 10 * time.Second

// functionsWatch is the Function informer a blocked uninstall starts so the
// deletion of the last Function resumes it at once. It exists only while
// an uninstall waits: the manager has no business caching every Function
// of the cluster otherwise, so it is stopped when the uninstall ends.
type functionsWatch struct {
	mu     sync.Mutex
	active bool
	// start registers the watch (an informer in the manager's cache) and
	// returns how to wait until its handler has seen the Functions that
	// exist: a Function deleted before that is never a delete event, so
	// the caller counts again after a start.
	start func() (waitForSync func(context.Context) error, err error)
	// stop removes that informer from the cache.
	stop func(ctx context.Context) error
}

// ensure starts the watch unless it runs, and says whether this call
// started it; a failure leaves the uninstall to its timed rechecks.
func (w *functionsWatch) ensure() (started bool, err error) {
	if w == nil {
		return false, nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.active {
		return false, nil
	}
	waitForSync, err := w.start()
	if err != nil {
		return false, err
	}
	w.active = true
	ctx, cancel := context.WithTimeout(context.Background(), functionsWatchSync)
	defer cancel()
	if err := waitForSync(ctx); err != nil {
		return false, fmt.Errorf("the Function watch has not synced: %w", err)
	}
	return true, nil
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
