package reconciler

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
)

// BuildSlots enforces the cluster-wide cap on unfinished build Jobs. The
// count comes from the cache (every Job labelled managed-by=function-controller)
// plus Jobs this process created that the cache has not shown yet. Starting
// a build holds the lock from counting to creating, so concurrent workers
// never exceed the cap. Functions that find no slot are remembered as
// waiting, oldest first, and are enqueued again when a build Job ends (see
// WakeHandler), not polled.
type BuildSlots struct {
	reader  client.Reader
	max     int
	queue   QueueGauge
	now     func() time.Time
	mu      sync.Mutex
	unseen  map[types.NamespacedName]time.Time // created Jobs not in the cache yet
	waiting map[types.NamespacedName]time.Time // Functions waiting for a slot, since
	paused  bool                               // no build starts (registry clean-up)
	wake    chan event.GenericEvent            // waiting Functions, enqueued on Resume
}

// QueueGauge reports the number of Functions waiting for a build slot.
type QueueGauge interface{ SetQueueLength(n int) }

// NewBuildSlots returns the cap for max simultaneous builds; reader is the cache.
func NewBuildSlots(reader client.Reader, max int, queue QueueGauge) *BuildSlots {
	return &BuildSlots{
		reader: reader, max: max, queue: queue, now: time.Now,
		unseen: map[types.NamespacedName]time.Time{}, waiting: map[types.NamespacedName]time.Time{},
		wake: make(chan event.GenericEvent, max),
	}
}

// Leave forgets a Function that no longer waits (built, deleted, invalid).
func (s *BuildSlots) Leave(fn types.NamespacedName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.leave(fn)
}

func (s *BuildSlots) leave(fn types.NamespacedName) {
	if _, ok := s.waiting[fn]; ok {
		delete(s.waiting, fn)
		s.queue.SetQueueLength(len(s.waiting))
	}
}

// Start runs create if a slot is free. It returns whether the build started
// and how many builds were running before it.
func (s *BuildSlots) Start(ctx context.Context, fn types.NamespacedName, create func() (*batchv1.Job, error)) (bool, int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	running, err := s.count(ctx)
	if err != nil {
		return false, 0, err
	}
	if running >= s.max || s.paused {
		if _, ok := s.waiting[fn]; !ok {
			s.waiting[fn] = s.now()
			s.queue.SetQueueLength(len(s.waiting))
		}
		return false, running, nil
	}
	job, err := create()
	if err != nil {
		return false, running, err
	}
	s.leave(fn)
	key := client.ObjectKeyFromObject(job)
	if err := s.reader.Get(ctx, key, &batchv1.Job{}); err != nil {
		s.unseen[key] = s.now()
	}
	return true, running, nil
}

// count is the number of unfinished build Jobs; s.mu is held.
func (s *BuildSlots) count(ctx context.Context) (int, error) {
	var jobs batchv1.JobList
	// Read-only, so the cached objects are not copied.
	if err := s.reader.List(ctx, &jobs, client.UnsafeDisableDeepCopy,
		client.MatchingLabels{v1alpha2.LabelManagedBy: v1alpha2.ManagedByController}); err != nil {
		return 0, fmt.Errorf("counting build Jobs: %w", err)
	}
	n := 0
	for i := range jobs.Items {
		j := &jobs.Items[i]
		delete(s.unseen, client.ObjectKeyFromObject(j))
		if j.DeletionTimestamp == nil && !jobDone(j) {
			n++
		}
	}
	for k, at := range s.unseen {
		if s.now().Sub(at) > unseenFor {
			delete(s.unseen, k)
			continue
		}
		n++
	}
	return n, nil
}

// unseenFor is how long a created Job that the cache has not shown yet is
// still counted; after that the cache is trusted again.
const unseenFor = time.Minute

// queuedMessage says where fn waits for a build slot, running builds
// being under way: behind the limit, or while builds are paused, and how
// many wait longer.
func (s *BuildSlots) queuedMessage(fn types.NamespacedName, running int) string {
	ahead, paused := s.Queue(fn)
	if paused {
		return fmt.Sprintf("queued: builds are paused while the internal registry is cleaned up, %d ahead of it in the queue", ahead)
	}
	return fmt.Sprintf("queued behind the build limit: %d of %d builds running, %d ahead of it in the queue", running, s.max, ahead)
}

// Queue is fn's place among the waiting Functions: how many wait longer
// than it (Waiting's order), and whether builds are paused. A Function
// that does not wait has none ahead.
func (s *BuildSlots) Queue(fn types.NamespacedName) (ahead int, paused bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	since, ok := s.waiting[fn]
	if !ok {
		return 0, s.paused
	}
	for k, at := range s.waiting {
		if c := at.Compare(since); c < 0 || c == 0 && compareKeys(k, fn) < 0 {
			ahead++
		}
	}
	return ahead, s.paused
}

func compareKeys(a, b types.NamespacedName) int {
	switch {
	case a.String() < b.String():
		return -1
	case a.String() > b.String():
		return 1
	}
	return 0
}

// queueRecheck is how often a Function queued for a build slot looks at
// its place in the queue again.
// A minute: a burst of Functions builds in about that, so a queued one
// writes its place about once more.
const queueRecheck = time.Minute

// queuedPlaceFresh reports whether a queued build's reported message may
// stand instead of now's: the same kind of wait (paused or behind the
// limit). The place it names only shrinks while the Function waits.
func queuedPlaceFresh(reported, now string) bool {
	kind := func(m string) string { before, _, _ := strings.Cut(m, ":"); return before }
	return kind(reported) == kind(now)
}

// WakeHandler enqueues the longest-waiting Functions (as many as there are
// slots) whenever a build Job finishes or goes away.
func (s *BuildSlots) WakeHandler() handler.EventHandler {
	wake := func(q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		for _, key := range s.Waiting(s.max) {
			q.Add(reconcile.Request{NamespacedName: key})
		}
	}
	return handler.Funcs{
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			old, okOld := e.ObjectOld.(*batchv1.Job)
			cur, okNew := e.ObjectNew.(*batchv1.Job)
			if okOld && okNew && !jobDone(old) && jobDone(cur) {
				wake(q)
			}
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if j, ok := e.Object.(*batchv1.Job); ok && !jobDone(j) {
				wake(q)
			}
		},
	}
}

// Waiting returns up to n waiting Functions, longest waiting first.
func (s *BuildSlots) Waiting(n int) []types.NamespacedName {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := make([]types.NamespacedName, 0, len(s.waiting))
	for k := range s.waiting {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b types.NamespacedName) int {
		if c := s.waiting[a].Compare(s.waiting[b]); c != 0 {
			return c
		}
		return compareKeys(a, b)
	})
	if len(keys) > n {
		keys = keys[:n]
	}
	return keys
}

// pausePoll is how often Pause counts the builds still running.
const pausePoll = 500 * time.Millisecond

// Pause stops new builds from starting (Functions wait for a slot as when
// all are taken) and returns once no build runs, so that nothing pushes to
// the registry meanwhile; resume lets builds start again and gives the
// waiting Functions their turn. When ctx ends first, builds are resumed and
// the error says how many still ran.
func (s *BuildSlots) Pause(ctx context.Context) (resume func(), err error) {
	s.mu.Lock()
	s.paused = true
	s.mu.Unlock()
	resume = func() {
		s.mu.Lock()
		s.paused = false
		s.mu.Unlock()
		for _, key := range s.Waiting(s.max) {
			select {
			case s.wake <- event.GenericEvent{Object: &v1alpha2.Function{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}}:
			default: // the queue is full; the next Job end wakes the rest
			}
		}
	}
	for {
		s.mu.Lock()
		running, err := s.count(ctx)
		s.mu.Unlock()
		if err == nil && running == 0 {
			return resume, nil
		}
		select {
		case <-ctx.Done():
			resume()
			return nil, fmt.Errorf("waiting for running builds to end (%d left, last error %v): %w", running, err, ctx.Err())
		case <-time.After(pausePoll):
		}
	}
}
