package reconciler

import (
	"context"
	"fmt"

	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/watch"
	"github.com/kyma-project/serverless-manager/operator/internal/steps"
)

// stepDeleteAPILeftovers gives the API server the last word before the
// finalizer goes: the cache may have missed objects created while a watch
// was down (an API server restart). What it lists with the module labels
// is removed like the inventory, one tier per pass, when the chart renders
// it or its managedFields show the manager's apply; a labelled object
// someone else created stays.
func (r *Reconciler) stepDeleteAPILeftovers(ctx context.Context, s *state) (steps.Outcome, error) {
	own, err := r.ownership(s)
	if err != nil {
		s.log.Error(err, "rendering the chart for its object names; only objects the manager applied are removed")
	}
	objs, err := r.live.ListManagedFromAPI(ctx)
	if err != nil {
		return r.fail(s, v1alpha1.ConditionDeleted, v1alpha1.ReasonDeletionFailed, err, true)
	}
	var left []leftover
	for _, o := range objs {
		if l, ok := leftoverOf(watch.GVKOf(o), o); ok && own.deletable(l) {
			left = append(left, l)
		}
	}
	return r.removeLeftovers(ctx, s, left, func(n int, names string) string {
		return fmt.Sprintf("removing %d objects the API server still holds: %s", n, names)
	})
}
