package copies

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func TestMemoryLagging(t *testing.T) {
	k := key{Kind: "Secret", Namespace: ns, Name: "s"}
	tests := []struct {
		name     string
		prev     string // version the write replaced, "" for a create
		after    time.Duration
		cachedRV string // what the cache shows, "" for absent
		wantLag  bool
		wantLeft time.Duration
	}{
		{"created, cache still empty", "", time.Second, "", true, writeWait - time.Second},
		{"created, cache shows it", "", time.Second, "43", false, 0},
		{"updated, cache still shows the old version", "42", 0, "42", true, writeWait},
		{"updated, cache shows the new version", "42", 0, "43", false, 0},
		{"deleted, cache still shows it", "42", 0, "42", true, writeWait},
		{"deleted, cache shows it gone", "42", 0, "", false, 0},
		{"cache never caught up: the write is not trusted any longer", "", writeWait, "", false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &clock{t: time.Unix(1000, 0)}
			m := newMemory(c.now)
			m.wrote(k, tt.prev)
			c.t = c.t.Add(tt.after)
			lag, left := m.lagging(k, tt.cachedRV)
			assert.Equal(t, tt.wantLag, lag)
			assert.Equal(t, tt.wantLeft, left)
			if !tt.wantLag {
				// Once caught up, the write is forgotten: the same view later
				// is the cache's word.
				lag, _ = m.lagging(k, tt.prev)
				assert.False(t, lag)
			}
		})
	}
}

func TestMemoryOtherKeysUnaffected(t *testing.T) {
	m := newMemory(time.Now)
	m.wrote(key{Kind: "Secret", Namespace: ns, Name: "s"}, "")
	lag, _ := m.lagging(key{Kind: "ConfigMap", Namespace: ns, Name: "s"}, "")
	assert.False(t, lag)
	lag, _ = m.lagging(key{Kind: "Secret", Namespace: "other", Name: "s"}, "")
	assert.False(t, lag)
}

func TestMemoryOptOut(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	m := newMemory(c.now)
	k := key{Kind: "Secret", Namespace: ns, Name: "s"}
	assert.False(t, m.optedOut(k))
	m.optOut(k, time.Minute)
	assert.True(t, m.optedOut(k))
	assert.False(t, m.optedOut(key{Kind: "Secret", Namespace: "other", Name: "s"}))
	c.t = c.t.Add(time.Minute)
	assert.False(t, m.optedOut(k), "after the ttl the next pass looks again")
}

// Expired entries go at the next write, however many namespaces came and went.
func TestMemorySweeps(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	m := newMemory(c.now)
	for _, n := range []string{"a", "b", "c"} {
		m.wrote(key{Kind: "Secret", Namespace: n, Name: "s"}, "")
		m.optOut(key{Kind: "Secret", Namespace: n, Name: "u"}, time.Second)
	}
	c.t = c.t.Add(writeWait)
	m.wrote(key{Kind: "Secret", Namespace: "d", Name: "s"}, "")
	assert.Len(t, m.writes, 1)
	assert.Empty(t, m.optOuts)
}
