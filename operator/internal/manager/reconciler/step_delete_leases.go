package reconciler

import (
	"context"
	"fmt"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/internal/steps"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
)

// stepDeleteLeases removes the module's Leases once its Pods' permissions
// are gone. A Pod that stopped after its Role was deleted could not release
// its Lease: left, it would hold back the next installation's leader until
// it expires, and it is the module's, not the namespace's.
func (r *Reconciler) stepDeleteLeases(ctx context.Context, s *state) (steps.Outcome, error) {
	for _, name := range module.Leases() {
		lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: s.cr.Namespace, Name: name}}
		if err := r.client.Delete(ctx, lease); err != nil && !apierrors.IsNotFound(err) {
			return r.fail(s, v1alpha1.ConditionDeleted, v1alpha1.ReasonDeletionFailed,
				fmt.Errorf("deleting Lease %s/%s: %w", lease.Namespace, name, err), true)
		}
	}
	return steps.Next(), nil
}
