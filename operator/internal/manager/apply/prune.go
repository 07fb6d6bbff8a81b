package apply

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/internal/manager/inventory"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
)

// prune deletes the objects of prev that are not in current, webhooks and
// workloads before the configuration they use, and returns the IDs that are
// gone. Objects that lost the module labels are left alone.
func (a *Applier) prune(ctx context.Context, prev inventory.Inventory, current map[string]bool) ([]string, error) {
	var stale []inventory.Ref
	ids := map[inventory.Ref]string{}
	for id := range prev {
		if current[id] {
			continue
		}
		ref, ok := inventory.ParseID(id)
		if !ok {
			continue
		}
		stale = append(stale, ref)
		ids[ref] = id
	}
	SortForDelete(stale)

	var pruned []string
	for _, ref := range stale {
		gone, err := a.deleteManaged(ctx, ref)
		if err != nil {
			return pruned, fmt.Errorf("pruning %s %q: %w", ref.GroupKind.Kind, ref.Name, err)
		}
		if gone {
			pruned = append(pruned, ids[ref])
		}
	}
	return pruned, nil
}

// deleteManaged deletes one object that left the chart (in the background,
// so that dependents follow) and reports whether it is gone: never there,
// no longer labelled as the module's, or deleted and without finalizers
// that keep it. A kind the API no longer serves counts as gone.
func (a *Applier) deleteManaged(ctx context.Context, ref inventory.Ref) (bool, error) {
	mapping, err := a.mapper.RESTMapping(ref.GroupKind)
	if err != nil {
		if meta.IsNoMatchError(err) {
			return true, nil
		}
		return false, err
	}
	key := types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}
	live, err := a.live.LiveMeta(ctx, mapping.GroupVersionKind, key)
	if err != nil {
		return false, err
	}
	if live == nil {
		return true, nil
	}
	if live.GetLabels()[module.LabelManagedBy] != module.ManagedBy {
		return true, nil
	}
	if live.GetDeletionTimestamp() != nil {
		return false, nil
	}
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(mapping.GroupVersionKind)
	obj.SetNamespace(ref.Namespace)
	obj.SetName(ref.Name)
	err = a.writer.Delete(ctx, obj, client.PropagationPolicy(metav1.DeletePropagationBackground))
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	// Without finalizers the API server removes the object at once (its
	// dependents follow in the background); with them it is gone later.
	return err == nil && len(live.GetFinalizers()) == 0, err
}

// SortForDelete orders refs for removal: the reverse of the apply order.
func SortForDelete(refs []inventory.Ref) { slices.SortStableFunc(refs, DeleteOrder) }

// DeleteOrder compares two objects for removal: higher tiers go first (the
// reverse of the apply order), then by name.
func DeleteOrder(a, b inventory.Ref) int {
	return cmp.Or(cmp.Compare(Tier(b.GroupKind), Tier(a.GroupKind)), cmp.Compare(a.Name, b.Name))
}
