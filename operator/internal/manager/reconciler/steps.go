package reconciler

import (
	"context"
	"time"

	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
)

// step is one named action of a reconcile. It updates the run's state and
// returns whether the run goes on; a step that stops has set the status,
// the result or the error the run ends with.
type step struct {
	name string
	run  func(ctx context.Context, s *state) bool
}

// steps is the order of a reconcile, the only place it is written down (the
// names are the metrics' step label). Which list runs depends on the CR
// alone: a CR being deleted is uninstalled, served first so that a CR that
// is not served is let go without touching the module.
func (r *Reconciler) steps(cr *v1alpha1.Serverless) []step {
	if cr.DeletionTimestamp != nil {
		return []step{
			{"confirm", r.stepConfirm},
			{"served", r.stepServed},
			{"scope", r.stepScope},
			{"inventory", r.stepInventory},
			{"functions-guard", r.stepFunctionsGuard},
			{"delete-inventory", r.stepDeleteInventory},
			{"delete-api-leftovers", r.stepDeleteAPILeftovers},
			{"delete-copies", r.stepDeleteCopies},
			{"delete-leases", r.stepDeleteLeases},
			{"leave-scope", r.stepLeaveScope},
			{"remove-finalizer", r.stepRemoveFinalizer},
		}
	}
	return []step{
		{"served", r.stepServed},
		{"scope", r.stepScope},
		{"paused", r.stepPaused},
		{"inventory", r.stepInventory},
		{"finalizer", r.stepFinalizer},
		{"upstream", r.stepUpstream},
		{"configure", r.stepConfigure},
		{"render", r.stepRender},
		{"takeover", r.stepTakeover},
		{"apply", r.stepApply},
		{"takeover-cleanup", r.stepTakeoverCleanup},
		{"registry-usage", r.stepRegistryUsage},
		{"verify", r.stepVerify},
	}
}

// run runs steps in order until one stops, timing each.
func (r *Reconciler) run(ctx context.Context, s *state, steps []step) {
	for _, st := range steps {
		start := time.Now()
		goOn := st.run(ctx, s)
		if r.metrics != nil {
			r.metrics.ObserveStep(st.name, time.Since(start))
		}
		if !goOn {
			return
		}
	}
}
