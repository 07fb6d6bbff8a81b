package reconciler

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func TestLivenessFailsWhileAReconcileHangs(t *testing.T) {
	f := NewInFlight()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	f.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	check := f.Check(10 * time.Second)

	entered, release := make(chan struct{}), make(chan struct{})
	r := f.Wrap(reconcile.Func(func(context.Context, ctrl.Request) (ctrl.Result, error) {
		close(entered)
		<-release
		return ctrl.Result{}, nil
	}))
	done := make(chan struct{})
	go func() {
		_, _ = r.Reconcile(context.Background(), reconcileRequest("slow"))
		close(done)
	}()
	<-entered
	assert.NoError(t, check(nil), "running, within the timeout")
	advance(11 * time.Second)
	err := check(nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "fn-test/slow running for 11s")
	close(release)
	<-done
	assert.NoError(t, check(nil), "finished reconciles do not count")
}

type gauge struct{ n int }

func (g *gauge) SetQueueLength(n int) { g.n = n }

func TestWaitingFunctionsLongestFirst(t *testing.T) {
	f := newFixture(t)
	g := &gauge{}
	s := NewBuildSlots(f.client, 0, g) // no slot at all: everyone waits
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s.now = func() time.Time { return at }
	for _, n := range []string{"c", "a", "b", "c"} {
		at = at.Add(time.Second)
		started, running, err := s.Start(context.Background(), reconcileRequest(n).NamespacedName, func() (*batchv1.Job, error) {
			t.Fatal("no slot, no Job")
			return nil, nil
		})
		require.NoError(t, err)
		assert.False(t, started)
		assert.Zero(t, running)
	}
	names := func(n int) []string {
		var out []string
		for _, k := range s.Waiting(n) {
			out = append(out, k.Name)
		}
		return out
	}
	assert.Equal(t, []string{"c", "a"}, names(2), "waiting since the first try")
	assert.Equal(t, 3, g.n)
	s.Leave(reconcileRequest("c").NamespacedName)
	assert.Equal(t, []string{"a", "b"}, names(5))
	assert.Equal(t, 2, g.n)
}
