package reconciler

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/readiness"
	"github.com/kyma-project/serverless-manager/operator/internal/steps"
	"github.com/kyma-project/serverless-manager/operator/pkg/kinds"
)

// stepVerify reads the applied objects' rollout from the cache. Nothing is
// polled: every watched object's change triggers the next reconcile.
func (r *Reconciler) stepVerify(ctx context.Context, s *state) (steps.Outcome, error) {
	rep, err := readiness.Check(ctx, r.live, s.applied, kinds.HasStatus)
	if err != nil {
		return r.fail(s, v1alpha1.ConditionInstalled, v1alpha1.ReasonClusterReadFailed, err, true)
	}
	s.cr.Status.ObservedGeneration = s.cr.Generation
	if len(rep.ReplicaFailures) == 0 {
		meta.RemoveStatusCondition(&s.cr.Status.Conditions, v1alpha1.ConditionDeploymentFailure)
	}
	switch {
	case len(rep.ReplicaFailures) > 0:
		// Pods that cannot be created (quota, admission) are reported at
		// once, not after the rollout timeout; the Deployment's status
		// changes bring the recovery, so no retry. DeploymentFailure is
		// upstream's condition for it.
		s.setCondition(v1alpha1.ConditionDeploymentFailure, metav1.ConditionTrue, v1alpha1.ReasonDeploymentReplicaFailure, rep.Summary())
		return r.fail(s, v1alpha1.ConditionInstalled, v1alpha1.ReasonDeploymentReplicaFailure, errors.New(rep.Summary()), false)
	case len(rep.Failed) > 0:
		return r.fail(s, v1alpha1.ConditionInstalled, v1alpha1.ReasonRolloutFailed, errors.New(rep.Summary()), false)
	case !rep.Ready():
		s.log.V(1).Info("not ready yet", "objects", rep.Details)
		r.processing(s, rep.Summary())
		since := meta.FindStatusCondition(s.cr.Status.Conditions, v1alpha1.ConditionInstalled).LastTransitionTime.Time
		if left := r.opts.RolloutTimeout - time.Since(since); left > 0 {
			// Watches bring progress; the requeue guards the deadline, or
			// comes back sooner for a CRD the API server may never establish
			// by itself.
			now := time.Now()
			stuck, again, err := r.stuckCRDs(ctx, s.applied, now)
			if err != nil {
				return r.fail(s, v1alpha1.ConditionInstalled, v1alpha1.ReasonClusterReadFailed, err, true)
			}
			for _, name := range stuck {
				if err := r.requestEstablish(ctx, name, now); err != nil {
					return r.fail(s, v1alpha1.ConditionInstalled, v1alpha1.ReasonApplyFailed, err, true)
				}
			}
			if again > 0 && again < left {
				left = again
			}
			return steps.RequeueAfter(left), nil
		}
		return r.fail(s, v1alpha1.ConditionInstalled, v1alpha1.ReasonRolloutFailed,
			fmt.Errorf("not ready %s after the last change: %s", r.opts.RolloutTimeout, rep.Summary()), false)
	}
	s.setCondition(v1alpha1.ConditionInstalled, metav1.ConditionTrue, v1alpha1.ReasonInstalled,
		"Serverless "+s.cr.Status.ChartVersion+" is installed and ready")
	s.cr.Status.State = v1alpha1.StateReady
	if len(s.warnings) > 0 {
		s.cr.Status.State = v1alpha1.StateWarning
		s.setCondition(v1alpha1.ConditionInstalled, metav1.ConditionTrue, v1alpha1.ReasonInstalled,
			"installed and ready, with warnings: "+strings.Join(s.warnings, "; "))
	}
	return steps.Next(), nil
}
