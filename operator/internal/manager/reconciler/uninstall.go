package reconciler

import (
	"context"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/apply"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/inventory"
	"github.com/kyma-project/serverless-manager/operator/internal/steps"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
)

// foreignFinalizers are set by the Function controller on the base objects it
// replicates; with the controller gone first, nobody would remove them.
var foreignFinalizers = []string{
	"serverless.kyma-project.io/deletion-hook",
	"serverless.kyma-project.io/finalizer-registry-config",
}

// crdGroupKind is the kind whose deletion deletes all its objects.
var crdGroupKind = schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}

// leftover is an object of the module that an uninstall still has to
// remove, with its live metadata as the cache or the API server showed it.
type leftover struct {
	ref  inventory.Ref
	gvk  schema.GroupVersionKind
	live metav1.Object
}

// name is how the condition message names the object.
func (l leftover) name() string { return l.ref.GroupKind.Kind + " " + l.ref.Name }

// leftoverOf is the uninstall's one guard, for what the cache and what the
// API server shows: live is the module's to remove when it exists and
// carries the module labels. An object someone took over by removing the
// labels is left alone, as the apply's prune leaves it.
func leftoverOf(gvk schema.GroupVersionKind, live metav1.Object) (leftover, bool) {
	if live == nil || live.GetLabels()[module.LabelManagedBy] != module.ManagedBy {
		return leftover{}, false
	}
	ref := inventory.Ref{GroupKind: gvk.GroupKind(), Namespace: live.GetNamespace(), Name: live.GetName()}
	return leftover{ref: ref, gvk: gvk, live: live}, true
}

// removeLeftovers ends an uninstall step: with nothing left it lets the
// next step run; otherwise it removes the first tier of left, says so in
// the Deleted condition (describe words the count and the names) and
// checks again after DeletionRecheck.
func (r *Reconciler) removeLeftovers(ctx context.Context, s *state, left []leftover, describe func(n int, names string) string) (steps.Outcome, error) {
	if len(left) == 0 {
		return steps.Next(), nil
	}
	names, err := r.removeFirstTier(ctx, left)
	if err != nil {
		return r.fail(s, v1alpha1.ConditionDeleted, v1alpha1.ReasonDeletionFailed, err, true)
	}
	s.setCondition(v1alpha1.ConditionDeleted, metav1.ConditionFalse, v1alpha1.ReasonDeleting, describe(len(left), strings.Join(names, ", ")))
	return steps.RequeueAfter(r.opts.DeletionRecheck), nil
}

// removeFirstTier deletes the leftovers (not empty) of the tier that goes
// first in uninstall order and names them; the next tier waits until they
// are gone.
func (r *Reconciler) removeFirstTier(ctx context.Context, left []leftover) ([]string, error) {
	slices.SortStableFunc(left, func(a, b leftover) int { return apply.DeleteOrder(a.ref, b.ref) })
	tier := apply.Tier(left[0].ref.GroupKind)
	var names []string
	for _, l := range left {
		if apply.Tier(l.ref.GroupKind) != tier {
			break
		}
		if err := r.deleteObject(ctx, l); err != nil {
			return nil, err
		}
		names = append(names, l.name())
	}
	return names, nil
}

// deleteObject is the uninstall's one way to delete: the Function
// controller's finalizers go first (also from an object already being
// deleted, which they would hold forever), then the object is deleted in
// the background so that its dependents follow, unless it is being deleted
// already.
func (r *Reconciler) deleteObject(ctx context.Context, l leftover) error {
	if err := r.dropForeignFinalizers(ctx, l); err != nil {
		return fmt.Errorf("removing the Function controller's finalizers from %s %q: %w", l.ref.GroupKind.Kind, l.ref.Name, err)
	}
	if l.live.GetDeletionTimestamp() != nil {
		return nil
	}
	if l.ref.GroupKind == crdGroupKind {
		// Right before the delete, on the API server's word: a Function
		// created since the guard's check would go with the CRD.
		if err := r.confirmNoInstances(ctx, l.ref.Name); err != nil {
			return err
		}
	}
	obj := partialObject(l)
	err := r.client.Delete(ctx, obj, client.PropagationPolicy(metav1.DeletePropagationBackground))
	if client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting %s %q: %w", l.ref.GroupKind.Kind, l.ref.Name, err)
	}
	return nil
}

// dropForeignFinalizers removes the Function controller's finalizers from
// the object, keeping any other.
func (r *Reconciler) dropForeignFinalizers(ctx context.Context, l leftover) error {
	current := l.live.GetFinalizers()
	kept := slices.DeleteFunc(slices.Clone(current), func(f string) bool { return slices.Contains(foreignFinalizers, f) })
	if len(kept) == len(current) {
		return nil
	}
	obj := partialObject(l)
	base := obj.DeepCopy()
	base.SetFinalizers(current)
	// An empty list, not nil: the merge patch must say "finalizers: []".
	obj.SetFinalizers(append([]string{}, kept...))
	return client.IgnoreNotFound(r.client.Patch(ctx, obj, client.MergeFrom(base)))
}

// confirmNoInstances fails unless the API server confirms that the CRD
// named name has no objects.
func (r *Reconciler) confirmNoInstances(ctx context.Context, name string) error {
	inst, err := apply.CountInstances(ctx, r.api, name)
	if err != nil {
		return fmt.Errorf("keeping CustomResourceDefinition %s: %w", name, err)
	}
	if inst.Count > 0 {
		return fmt.Errorf("keeping CustomResourceDefinition %s: %d of its objects exist (%s)", name, inst.Count, strings.Join(inst.Names, ", "))
	}
	return nil
}

// partialObject addresses l's object for a write.
func partialObject(l leftover) *metav1.PartialObjectMetadata {
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(l.gvk)
	obj.SetNamespace(l.ref.Namespace)
	obj.SetName(l.ref.Name)
	return obj
}
