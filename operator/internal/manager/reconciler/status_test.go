package reconciler

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
	"github.com/kyma-project/serverless-manager/tests/support/testenv"
)

type discardEvents struct{}

func (discardEvents) Eventf(runtime.Object, runtime.Object, string, string, string, string, ...any) {}

// The manager reads its CR from the cache, which may lag behind its own
// last status write. Whatever the copy it read, the stored status must end
// up as the status it computed: a patch of the differences against a stale
// copy would leave out the fields the stale copy happened to have right.
func TestWriteStatusStoresTheComputedStatusOverAStaleRead(t *testing.T) {
	t.Parallel() // its own API server
	env := testenv.Start(t, "config/crd/bases")
	ctx := t.Context()
	c := env.Client
	r := New(c, c, nil, nil, nil, discardEvents{}, nil, Options{Namespace: "default"})

	installed := func(chart string) v1alpha1.ServerlessStatus {
		st := v1alpha1.ServerlessStatus{State: v1alpha1.StateReady, ChartVersion: chart, Served: metav1.ConditionTrue}
		st.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionInstalled, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonInstalled,
			Message: "Serverless " + chart + " is installed and ready", LastTransitionTime: metav1.Now()}}
		st.Inventory = []v1alpha1.InventoryEntry{{ID: "/ConfigMap/default/serverless-" + chart, Digest: "d-" + chart, Version: "rv1"}}
		return st
	}
	tests := []struct {
		name string
		// stored is the status in the API server, stale the one the
		// reconcile read, computed the one it arrived at.
		stored, stale, computed v1alpha1.ServerlessStatus
	}{
		{
			name:     "upgrade: stale copy is Ready on the old chart, stored is Processing on the new",
			stored:   v1alpha1.ServerlessStatus{State: v1alpha1.StateProcessing, ChartVersion: "1.0.0"},
			stale:    installed("0.9.0"),
			computed: installed("1.0.0"),
		},
		{
			name: "a field the computed status no longer has is removed",
			stored: func() v1alpha1.ServerlessStatus {
				s := installed("1.0.0")
				s.DockerRegistry = "registry.example.com"
				return s
			}(),
			stale:    installed("0.9.0"),
			computed: installed("1.0.0"),
		},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cr := &v1alpha1.Serverless{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "cr-" + string(rune('a'+i))}}
			require.NoError(t, c.Create(ctx, cr))
			// The stored status is the manager's own earlier write.
			earlier := &state{cr: cr.DeepCopy(), before: &v1alpha1.ServerlessStatus{}, log: log.FromContext(ctx)}
			earlier.cr.Status = tt.stored
			require.NoError(t, r.writeStatus(ctx, earlier))

			read := cr.DeepCopy()
			read.Status = tt.stale
			s := &state{cr: read, before: tt.stale.DeepCopy(), log: log.FromContext(ctx)}
			s.cr.Status = tt.computed
			require.NoError(t, r.writeStatus(ctx, s))

			got := &v1alpha1.Serverless{}
			require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(cr), got))
			assert.Equal(t, tt.computed.State, got.Status.State)
			assert.Equal(t, tt.computed.ChartVersion, got.Status.ChartVersion)
			assert.Equal(t, tt.computed.Inventory, got.Status.Inventory)
			assert.Equal(t, tt.computed.DockerRegistry, got.Status.DockerRegistry)
			if assert.Len(t, got.Status.Conditions, 1) {
				assert.Equal(t, tt.computed.Conditions[0].Message, got.Status.Conditions[0].Message)
			}
		})
	}
}

// Adding the finalizer to a CR read from a lagging cache conflicts; that is
// no error to show (no Error state, no event), only a reason to try again.
func TestFinalizerOnAStaleReadRequeuesWithoutError(t *testing.T) {
	t.Parallel() // its own API server
	env := testenv.Start(t, "config/crd/bases")
	ctx := t.Context()
	c := env.Client
	events := &countEvents{}
	r := New(c, c, nil, nil, nil, events, nil, Options{Namespace: "default"})

	cr := &v1alpha1.Serverless{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "default"}}
	require.NoError(t, c.Create(ctx, cr))
	stale := cr.DeepCopy()
	cr.Spec.LogLevel = "debug" // someone edits the CR; the cache has not seen it yet
	require.NoError(t, c.Update(ctx, cr))

	s := &state{cr: stale, before: stale.Status.DeepCopy(), log: log.FromContext(ctx)}
	goOn, res, err := runStep(ctx, s, r.stepFinalizer)
	assert.False(t, goOn, "the reconcile stops here")
	assert.True(t, res.Requeue, "and is tried again")
	assert.NoError(t, err)
	assert.Empty(t, s.cr.Status.State, "no Error state")
	assert.Zero(t, events.n, "no Warning event")

	// With the fresh CR the finalizer is added.
	fresh := &v1alpha1.Serverless{}
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(cr), fresh))
	s = &state{cr: fresh, before: fresh.Status.DeepCopy(), log: log.FromContext(ctx)}
	goOn, _, _ = runStep(ctx, s, r.stepFinalizer)
	assert.True(t, goOn)
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(cr), fresh))
	assert.Contains(t, fresh.Finalizers, module.Finalizer)
}

type countEvents struct{ n int }

func (e *countEvents) Eventf(runtime.Object, runtime.Object, string, string, string, string, ...any) {
	e.n++
}
