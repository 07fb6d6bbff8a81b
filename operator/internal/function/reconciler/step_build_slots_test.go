package reconciler

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
)

// Pause holds new builds back, returns once running ones ended and wakes
// the Functions that waited meanwhile.
func TestBuildSlotsPause(t *testing.T) {
	ctx := context.Background()
	running := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "running",
		Labels: map[string]string{v1alpha2.LabelManagedBy: v1alpha2.ManagedByController}}}
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(running).Build()
	s := NewBuildSlots(c, 3, &gauge{})
	newJob := func(name string) func() (*batchv1.Job, error) {
		return func() (*batchv1.Job, error) {
			return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}, nil
		}
	}

	short, cancel := context.WithTimeout(ctx, 1200*time.Millisecond)
	_, err := s.Pause(short)
	cancel()
	require.Error(t, err, "a running build keeps the pause from taking hold")
	assert.Contains(t, err.Error(), "1 left")
	started, _, err := s.Start(ctx, types.NamespacedName{Namespace: "ns", Name: "a"}, newJob("a"))
	require.NoError(t, err)
	assert.True(t, started, "a failed pause lets builds start again")

	running.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
	require.NoError(t, c.Status().Update(ctx, running))
	s.unseen = map[types.NamespacedName]time.Time{} // the Job of "a" was never really created
	resume, err := s.Pause(ctx)
	require.NoError(t, err, "no build runs")
	started, _, err = s.Start(ctx, types.NamespacedName{Namespace: "ns", Name: "b"}, newJob("b"))
	require.NoError(t, err)
	assert.False(t, started, "no build starts while paused")
	assert.Equal(t, []types.NamespacedName{{Namespace: "ns", Name: "b"}}, s.Waiting(3))

	resume()
	select {
	case e := <-s.wake:
		assert.Equal(t, "b", e.Object.GetName(), "the waiting Function gets its turn")
	default:
		t.Fatal("resume woke no waiting Function")
	}
	started, _, err = s.Start(ctx, types.NamespacedName{Namespace: "ns", Name: "b"}, newJob("b"))
	require.NoError(t, err)
	assert.True(t, started)
}

// Each waiting Function knows how many wait longer than it.
func TestBuildSlotsQueue(t *testing.T) {
	s := NewBuildSlots(nil, 1, &gauge{})
	t0 := time.Date(2026, 2, 1, 12, 0, 0, 0, time.UTC)
	key := func(n string) types.NamespacedName { return types.NamespacedName{Namespace: "ns", Name: n} }
	s.waiting = map[types.NamespacedName]time.Time{key("c"): t0.Add(time.Second), key("a"): t0, key("b"): t0, key("d"): t0.Add(time.Minute)}
	for name, want := range map[string]int{"a": 0, "b": 1, "c": 2, "d": 3, "not-waiting": 0} {
		ahead, paused := s.Queue(key(name))
		assert.Equal(t, want, ahead, name)
		assert.False(t, paused)
	}
	s.paused = true
	_, paused := s.Queue(key("a"))
	assert.True(t, paused)
}
