package reconciler

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/internal/steps"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
)

// stepFinalizer makes sure the CR cannot disappear before the module is
// uninstalled.
func (r *Reconciler) stepFinalizer(ctx context.Context, s *state) (steps.Outcome, error) {
	if controllerutil.ContainsFinalizer(s.cr, module.Finalizer) {
		return steps.Next(), nil
	}
	status := s.cr.Status.DeepCopy()
	patch := client.MergeFromWithOptions(s.cr.DeepCopy(), client.MergeFromWithOptimisticLock{})
	controllerutil.AddFinalizer(s.cr, module.Finalizer)
	if err := r.client.Patch(ctx, s.cr, patch); err != nil {
		if apierrors.IsConflict(err) {
			// The CR was read from a cache that lags behind it: no error to
			// report, the newer CR's event brings the next reconcile.
			s.cr.Status = *status
			return steps.Requeue(), nil
		}
		return r.fail(s, v1alpha1.ConditionInstalled, v1alpha1.ReasonFinalizerFailed, fmt.Errorf("adding the finalizer: %w", err), true)
	}
	// The patch response carries the stored status; keep the one being built.
	s.cr.Status = *status
	return steps.Next(), nil
}

// removeFinalizer lets the CR go; after it the CR may be gone. A CR
// deleted before its takeover finished still carries serverless-operator's
// finalizer, which nobody else would remove: the uninstall removed the
// chart's objects, upstream's names included.
func (r *Reconciler) removeFinalizer(ctx context.Context, s *state) error {
	patch := client.MergeFromWithOptions(s.cr.DeepCopy(), client.MergeFromWithOptimisticLock{})
	controllerutil.RemoveFinalizer(s.cr, module.Finalizer)
	controllerutil.RemoveFinalizer(s.cr, UpstreamFinalizer)
	if err := r.client.Patch(ctx, s.cr, patch); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("removing the finalizer: %w", err))
	}
	s.gone = true
	return nil
}
