package reconciler

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/watch"
)

// countingWatch counts starts and stops of a functionsWatch.
func countingWatch() (*functionsWatch, *int, *int) {
	starts, stops := 0, 0
	return &functionsWatch{
		start: func() (func(context.Context) error, error) {
			starts++
			return func(context.Context) error { return nil }, nil
		},
		stop: func(context.Context) error { stops++; return nil },
	}, &starts, &stops
}

func TestFunctionsWatchStartsOnceAndStops(t *testing.T) {
	w, starts, stops := countingWatch()
	ctx := context.Background()
	require.NoError(t, w.release(ctx))
	assert.Zero(t, *stops, "nothing to stop before a start")

	started, err := w.ensure()
	require.NoError(t, err)
	assert.True(t, started)
	started, err = w.ensure()
	require.NoError(t, err)
	assert.False(t, started, "the second call finds it running")
	assert.Equal(t, 1, *starts, "a blocked uninstall rechecking starts one informer")

	require.NoError(t, w.release(ctx))
	require.NoError(t, w.release(ctx))
	assert.Equal(t, 1, *stops)

	_, err = w.ensure()
	require.NoError(t, err)
	assert.Equal(t, 2, *starts, "a later uninstall watches again")

	failing := &functionsWatch{start: func() (func(context.Context) error, error) { return nil, errors.New("no CRD") }}
	_, err = failing.ensure()
	assert.Error(t, err)
	assert.NoError(t, failing.release(ctx), "a watch that never started is not stopped")

	unsynced, _, stops2 := countingWatch()
	unsynced.start = func() (func(context.Context) error, error) {
		return func(context.Context) error { return errors.New("cache did not sync") }, nil
	}
	unsynced.stop = func(context.Context) error { *stops2++; return nil }
	started, err = unsynced.ensure()
	assert.ErrorContains(t, err, "has not synced")
	assert.False(t, started, "not synced: the uninstall relies on its rechecks")
	require.NoError(t, unsynced.release(ctx))
	assert.Equal(t, 1, *stops2, "a watch that started but did not sync is stopped too")
}

// stateSeries records which CRs' state series exist.
type stateSeries struct {
	stepTimes
	live map[string]v1alpha1.State
}

func (m *stateSeries) SetState(ns, name string, st v1alpha1.State) { m.live[ns+"/"+name] = st }
func (m *stateSeries) DeleteState(ns, name string)                 { delete(m.live, ns+"/"+name) }

func TestReconcileOfAGoneCRForgetsIt(t *testing.T) {
	s, err := watch.NewScheme()
	require.NoError(t, err)
	c := fake.NewClientBuilder().WithScheme(s).Build()
	m := &stateSeries{live: map[string]v1alpha1.State{"kyma-system/default": v1alpha1.StateDeleting, "kyma-system/other": v1alpha1.StateReady}}
	r := New(c, c, fakeLive{}, nil, nil, &countEvents{}, m, Options{Namespace: "kyma-system"})
	w, _, stops := countingWatch()
	r.functionsWatch = w
	_, err = w.ensure()
	require.NoError(t, err)

	_, err = r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "kyma-system", Name: "default"}})
	require.NoError(t, err)
	assert.Equal(t, map[string]v1alpha1.State{"kyma-system/other": v1alpha1.StateReady}, m.live, "the deleted CR's series are dropped")
	assert.Equal(t, 1, *stops, "the Function informer of its uninstall is stopped")
}
