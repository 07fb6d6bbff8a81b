package reconciler

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/internal/steps"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
)

// stepPaused stops here while the CR carries the pause annotation: nothing
// is changed in the cluster, and the status says so.
func (r *Reconciler) stepPaused(_ context.Context, s *state) (steps.Outcome, error) {
	if s.cr.Annotations[module.PauseAnnotation] != module.PausedValue {
		return steps.Next(), nil
	}
	s.cr.Status.State = v1alpha1.StateWarning
	s.setCondition(v1alpha1.ConditionInstalled, metav1.ConditionUnknown, v1alpha1.ReasonPaused,
		"reconciliation is paused by the annotation "+module.PauseAnnotation+"="+module.PausedValue+"; remove it to resume")
	return steps.Stop(), nil
}
