package copies

import (
	"sync"
	"time"
)

// key names one copy.
type key struct {
	Kind, Namespace, Name string
}

// writeWait is how long a pass trusts its own last write over a cache that
// has not shown it yet. The write's own event normally arrives within
// milliseconds; the bound only matters when the object changed again before
// the cache saw it.
const writeWait = 10 * time.Second

// memory is what the reconciler remembers between passes, in place of
// reads: its writes the cache has not caught up with yet (so a pass that runs
// meanwhile neither creates a copy twice nor updates a stale one), and the
// copies users opted out of (which the cache does not hold).
type memory struct {
	mu      sync.Mutex
	now     func() time.Time
	writes  map[key]write
	optOuts map[key]time.Time
}

// write is one write of the reconciler: the cache shows prev ("" for absent)
// until it has seen it.
type write struct {
	prev     string
	deadline time.Time
}

func newMemory(now func() time.Time) *memory {
	return &memory{now: now, writes: map[key]write{}, optOuts: map[key]time.Time{}}
}

// wrote remembers that k was written while the cache showed prevRV ("" for
// absent).
func (m *memory) wrote(k key, prevRV string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sweep()
	m.writes[k] = write{prev: prevRV, deadline: m.now().Add(writeWait)}
}

// lagging reports whether the cache, showing cachedRV ("" for absent), has
// not seen the last write to k yet, and how long to wait for it at most.
// Anything else than the version the write replaced means the cache caught
// up (or the object moved on), and the write is forgotten.
func (m *memory) lagging(k key, cachedRV string) (bool, time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	w, ok := m.writes[k]
	if !ok {
		return false, 0
	}
	left := w.deadline.Sub(m.now())
	if cachedRV != w.prev || left <= 0 {
		delete(m.writes, k)
		return false, 0
	}
	return true, left
}

// optOut remembers for ttl that k is labelled managed-by=user, so that the
// passes meanwhile do not try to create it again (each try costs a create
// the API server refuses and a read). After ttl the next pass looks again,
// which notices a user's copy that was deleted or handed back.
func (m *memory) optOut(k key, ttl time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sweep()
	m.optOuts[k] = m.now().Add(ttl)
}

// optedOut reports whether k was seen labelled managed-by=user within its ttl.
func (m *memory) optedOut(k key) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	until, ok := m.optOuts[k]
	if ok && !m.now().Before(until) {
		delete(m.optOuts, k)
		return false
	}
	return ok
}

// sweep forgets what has expired, so memory does not grow with namespaces
// that come and go; both maps only hold recent entries, so this is cheap.
func (m *memory) sweep() {
	now := m.now()
	for k, w := range m.writes {
		if !now.Before(w.deadline) {
			delete(m.writes, k)
		}
	}
	for k, until := range m.optOuts {
		if !now.Before(until) {
			delete(m.optOuts, k)
		}
	}
}
