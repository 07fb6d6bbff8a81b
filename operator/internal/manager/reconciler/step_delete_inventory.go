package reconciler

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/inventory"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/watch"
	"github.com/kyma-project/serverless-manager/operator/internal/steps"
)

// stepDeleteInventory removes what the manager installed, one tier per
// pass as the cache shows it: webhooks, then workloads, then configuration
// and RBAC, CRDs last. Each deletion event brings the next pass.
func (r *Reconciler) stepDeleteInventory(ctx context.Context, s *state) (steps.Outcome, error) {
	left, err := r.remaining(ctx, s)
	if err != nil {
		return r.fail(s, v1alpha1.ConditionDeleted, v1alpha1.ReasonDeletionFailed, err, true)
	}
	return r.removeLeftovers(ctx, s, left, func(n int, names string) string {
		return fmt.Sprintf("%d objects left; removing %s", n, names)
	})
}

// remaining is everything of the module that still exists: the valid
// inventory entries whose objects the chart renders or the manager applied
// (see ownership), plus the chart's objects the cache holds with the module
// labels (one applied just before a crash may be missing from the
// inventory). The inventory in the status keeps only the entries still left.
func (r *Reconciler) remaining(ctx context.Context, s *state) ([]leftover, error) {
	own, err := r.ownership(s)
	if err != nil {
		s.log.Error(err, "rendering the chart for its object names; only objects the manager applied are removed")
	}
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
		if l, ok := leftoverOf(watch.GVKOf(o), o); ok && own.owns(l.ref) {
			add(l)
		}
	}
	var kept []v1alpha1.InventoryEntry
	for _, e := range s.cr.Status.Inventory {
		ref, ok := inventory.ParseID(e.ID)
		if !ok || own.kinds.Check(ref, s.cr.Namespace) != nil {
			continue // stepInventory warned about it
		}
		mapping, err := r.client.RESTMapper().RESTMapping(ref.GroupKind)
		if meta.IsNoMatchError(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		key := client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}
		var live metav1.Object
		if own.owns(ref) {
			live, err = r.live.LiveMeta(ctx, mapping.GroupVersionKind, key)
		} else {
			// Not the chart's today (an older chart's object, or an entry
			// written by hand): the API server's managedFields decide. An
			// object the manager may not read is none of its own.
			live, err = r.apiMeta(ctx, mapping.GroupVersionKind, key)
			if apierrors.IsForbidden(err) {
				continue
			}
		}
		if err != nil {
			return nil, err
		}
		l, ok := leftoverOf(mapping.GroupVersionKind, live)
		if !ok || !own.deletable(l) {
			continue
		}
		kept = append(kept, e)
		add(l)
	}
	s.cr.Status.Inventory = kept
	return left, nil
}

// apiMeta reads an object's metadata from the API server, nil when it does
// not exist.
func (r *Reconciler) apiMeta(ctx context.Context, gvk schema.GroupVersionKind, key client.ObjectKey) (metav1.Object, error) {
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(gvk)
	err := r.api.Get(ctx, key, obj)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s %s: %w", gvk.Kind, key, err)
	}
	return obj, nil
}
