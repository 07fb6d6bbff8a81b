package reconciler

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/inventory"
	"github.com/kyma-project/serverless-manager/operator/internal/steps"
)

// stepApply applies the rendered objects and prunes those that left the
// chart. The inventory in the status records the outcome, also on failure.
func (r *Reconciler) stepApply(ctx context.Context, s *state) (steps.Outcome, error) {
	prev := inventory.FromEntries(s.cr.Status.Inventory)
	objs, err := r.keepLiveSelectors(ctx, s.objs)
	if err != nil {
		return r.fail(s, v1alpha1.ConditionInstalled, v1alpha1.ReasonClusterReadFailed, err, true)
	}
	// Apply works on copies: the render memo stays untouched.
	res, err := r.applier.Apply(ctx, s.cr.Namespace, objs, prev, s.pins)
	s.cr.Status.Inventory = res.Inventory.Entries()
	if r.metrics != nil {
		r.metrics.AddApplied(len(res.Applied))
		r.metrics.AddPruned(len(res.Pruned))
	}
	if len(res.Applied) > 0 {
		s.log.Info("applied", "count", len(res.Applied), "objects", res.Applied)
		// A new rollout starts: its clock is the Installed condition's
		// transition time.
		if !meta.IsStatusConditionTrue(s.cr.Status.Conditions, v1alpha1.ConditionInstalled) {
			meta.RemoveStatusCondition(&s.cr.Status.Conditions, v1alpha1.ConditionInstalled)
		}
	}
	if len(res.Pruned) > 0 {
		s.log.Info("pruned", "objects", res.Pruned)
	}
	if err != nil {
		if s.nodePort != 0 && isNodePortTaken(err) {
			// The next attempt picks another port.
			r.refuse(s.nodePort)
		}
		if rng, refused, ok := nodePortOutOfRange(err); s.nodePort != 0 && refused {
			if !ok || rng.Contains(s.nodePort) {
				// Retrying the same port cannot succeed: only a new
				// --node-port-range (a restart) or spec change helps.
				return r.fail(s, v1alpha1.ConditionInstalled, v1alpha1.ReasonApplyFailed,
					fmt.Errorf("installing the Serverless chart: NodePort %d is outside the API server's range; set the manager's --node-port-range: %w", s.nodePort, err), false)
			}
			// The next attempt picks a port in the range the API server named.
			r.learnRange(rng)
		}
		return r.fail(s, v1alpha1.ConditionInstalled, v1alpha1.ReasonApplyFailed, fmt.Errorf("installing the Serverless chart: %w", err), true)
	}
	if res.Waiting != "" {
		r.processing(s, res.Waiting)
		return steps.RequeueAfter(r.opts.DeletionRecheck), nil
	}
	s.applied = res.Objects
	return steps.Next(), nil
}

// processing marks the module as on its way.
func (r *Reconciler) processing(s *state, msg string) {
	s.cr.Status.State = v1alpha1.StateProcessing
	s.cr.Status.ObservedGeneration = s.cr.Generation
	s.setCondition(v1alpha1.ConditionInstalled, metav1.ConditionFalse, v1alpha1.ReasonInstalling, msg)
}
