package reconciler

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/internal/steps"
)

// stepRemoveFinalizer ends the uninstall: nothing of the module is left, so
// the CR may go.
func (r *Reconciler) stepRemoveFinalizer(ctx context.Context, s *state) (steps.Outcome, error) {
	s.setCondition(v1alpha1.ConditionDeleted, metav1.ConditionTrue, v1alpha1.ReasonDeleting, "the module is uninstalled")
	return steps.Next(), r.removeFinalizer(ctx, s)
}
