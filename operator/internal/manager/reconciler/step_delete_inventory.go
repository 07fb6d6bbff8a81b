package reconciler

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/inventory"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/watch"
)

// stepDeleteInventory removes what the manager installed, one tier per
// pass as the cache shows it: webhooks, then workloads, then configuration
// and RBAC, CRDs last. Each deletion event brings the next pass.
func (r *Reconciler) stepDeleteInventory(ctx context.Context, s *state) bool {
	left, err := r.remaining(ctx, s)
	if err != nil {
		return r.fail(s, v1alpha1.ConditionDeleted, v1alpha1.ReasonDeletionFailed, err, true)
	}
	if len(left) == 0 {
		return true
	}
	names, err := r.removeFirstTier(ctx, left)
	if err != nil {
		return r.fail(s, v1alpha1.ConditionDeleted, v1alpha1.ReasonDeletionFailed, err, true)
	}
	s.setCondition(v1alpha1.ConditionDeleted, metav1.ConditionFalse, v1alpha1.ReasonDeleting,
		fmt.Sprintf("%d objects left; removing %s", len(left), strings.Join(names, ", ")))
	s.result = ctrl.Result{RequeueAfter: r.opts.DeletionRecheck}
	return false
}

// remaining is everything the manager installed that still exists: the
// inventory plus anything labelled as the module's in the cache (an object
// applied just before a crash is labelled but maybe not in the inventory).
// The inventory in the status keeps only the entries still left.
func (r *Reconciler) remaining(ctx context.Context, s *state) ([]leftover, error) {
	seen := map[inventory.Ref]bool{}
	var left []leftover
	add := func(l leftover) {
		if !seen[l.ref] {
			seen[l.ref] = true
			left = append(left, l)
		}
	}
	objs, err := r.live.ListManaged(ctx)
	if err != nil {
		return nil, err
	}
	for _, o := range objs {
		if l, ok := leftoverOf(watch.GVKOf(o), o); ok {
			add(l)
		}
	}
	var kept []v1alpha1.InventoryEntry
	for _, e := range s.cr.Status.Inventory {
		ref, ok := inventory.ParseID(e.ID)
		if !ok {
			continue
		}
		mapping, err := r.client.RESTMapper().RESTMapping(ref.GroupKind)
		if meta.IsNoMatchError(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		live, err := r.live.LiveMeta(ctx, mapping.GroupVersionKind, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name})
		if err != nil {
			return nil, err
		}
		l, ok := leftoverOf(mapping.GroupVersionKind, live)
		if !ok {
			continue
		}
		kept = append(kept, e)
		add(l)
	}
	s.cr.Status.Inventory = kept
	return left, nil
}
