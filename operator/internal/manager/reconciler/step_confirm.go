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

// stepConfirm makes the uninstall act on the API server's copy of the CR,
// never on the cache's alone. The pass right after the one that removed the
// finalizer can still read the CR from a cache that has not seen it go; an
// uninstall run from that copy would bind the manager in the CR's namespace
// again and delete what the next served CR has just installed, then stop
// on the gone CR with the binding left behind. A CR that is gone, or no
// longer carries a finalizer of the module, has been uninstalled.
func (r *Reconciler) stepConfirm(ctx context.Context, s *state) (steps.Outcome, error) {
	live := &v1alpha1.Serverless{}
	err := r.api.Get(ctx, client.ObjectKeyFromObject(s.cr), live)
	if apierrors.IsNotFound(err) || err == nil && live.UID != s.cr.UID {
		s.gone = true
		return steps.Stop(), nil
	}
	if err != nil {
		return r.fail(s, v1alpha1.ConditionDeleted, v1alpha1.ReasonDeletionFailed, fmt.Errorf("reading the CR being deleted: %w", err), true)
	}
	if !controllerutil.ContainsFinalizer(live, module.Finalizer) && !controllerutil.ContainsFinalizer(live, UpstreamFinalizer) {
		s.gone = true
		return steps.Stop(), nil
	}
	s.cr, s.before = live, live.Status.DeepCopy()
	return steps.Next(), nil
}
