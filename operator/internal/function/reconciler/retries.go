package reconciler

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// maxRetryDelay caps the backoff of failed builds (as 1.8.4's rate limiter).
const maxRetryDelay = 5 * time.Minute

// retries counts the failed builds of each Function since its last success,
// for the retry backoff. In memory: after a restart the backoff starts over.
type retries struct {
	mu sync.Mutex
	n  map[types.NamespacedName]int
}

func newRetries() *retries { return &retries{n: map[types.NamespacedName]int{}} }

func (r *retries) reset(key types.NamespacedName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.n, key)
}

// delay is base doubled per earlier retry, capped at maxRetryDelay.
func (r *retries) delay(key types.NamespacedName, base time.Duration) time.Duration {
	r.mu.Lock()
	n := r.n[key]
	r.mu.Unlock()
	d := base
	for i := 0; i < n && d < maxRetryDelay; i++ {
		d *= 2
	}
	return min(d, maxRetryDelay)
}

func (r *retries) retried(key types.NamespacedName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n[key]++
}
