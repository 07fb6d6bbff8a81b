package apply

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/internal/manager/inventory"
	"github.com/kyma-project/serverless-manager/operator/pkg/kinds"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
)

// crdKind is the kind whose deletion takes every object of the API with it.
var crdKind = apiextensionsv1.Kind("CustomResourceDefinition")

// prune deletes the objects of prev that are not in current, webhooks and
// workloads before the configuration they use. It returns the IDs that are
// gone and the IDs dropped from the inventory without a delete: entries
// CheckEntry refuses (the status is writable by others, so an entry proves
// nothing by itself; owned are the kinds the module may own), objects that lost the module labels and objects the
// manager never applied (a labelled copy someone made).
func (a *Applier) prune(ctx context.Context, namespace string, owned Kinds, prev inventory.Inventory, current map[string]bool) (pruned, dropped []string, err error) {
	var stale []inventory.Ref
	ids := map[inventory.Ref]string{}
	for id := range prev {
		if current[id] {
			continue
		}
		ref, ok := inventory.ParseID(id)
		if !ok || owned.Check(ref, namespace) != nil {
			dropped = append(dropped, id)
			continue
		}
		stale = append(stale, ref)
		ids[ref] = id
	}
	SortForDelete(stale)

	for _, ref := range stale {
		gone, ours, err := a.deleteManaged(ctx, ref)
		if err != nil {
			return pruned, dropped, fmt.Errorf("pruning %s %q: %w", ref.GroupKind.Kind, ref.Name, err)
		}
		switch {
		case !ours:
			dropped = append(dropped, ids[ref])
		case gone:
			pruned = append(pruned, ids[ref])
		}
	}
	return pruned, dropped, nil
}

// deleteManaged deletes one object that left the chart (in the background,
// so that dependents follow) and reports whether it is gone and whether it
// was the manager's at all. The API server, not the cache, is asked: the
// object must carry the module labels and have been applied by the manager
// (its managedFields say so; labels alone are copied with the object). A
// CRD goes only when the API server confirms it has no objects left.
func (a *Applier) deleteManaged(ctx context.Context, ref inventory.Ref) (gone, ours bool, err error) {
	gvk, ok := managedGVK(ref.GroupKind)
	if !ok {
		// A kind of the chart's own CRDs: the API tells its version.
		mapping, err := a.mapper.RESTMapping(ref.GroupKind)
		if meta.IsNoMatchError(err) {
			return true, true, nil
		}
		if err != nil {
			return false, false, err
		}
		gvk = mapping.GroupVersionKind
	}
	live := &metav1.PartialObjectMetadata{}
	live.SetGroupVersionKind(gvk)
	err = a.api.Get(ctx, types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}, live)
	if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
		return true, true, nil
	}
	if apierrors.IsForbidden(err) {
		// The manager may read every object it renders; one it may not
		// read came into the inventory from elsewhere.
		return false, false, nil
	}
	if err != nil {
		return false, false, err
	}
	if live.GetLabels()[module.LabelManagedBy] != module.ManagedBy || !AppliedByManager(live) {
		return false, false, nil
	}
	if live.GetDeletionTimestamp() != nil {
		return false, true, nil
	}
	if ref.GroupKind == crdKind {
		if err := a.confirmNoInstances(ctx, ref.Name); err != nil {
			return false, true, err
		}
	}
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(gvk)
	obj.SetNamespace(ref.Namespace)
	obj.SetName(ref.Name)
	err = a.writer.Delete(ctx, obj, client.PropagationPolicy(metav1.DeletePropagationBackground))
	if apierrors.IsNotFound(err) {
		return true, true, nil
	}
	// Without finalizers the API server removes the object at once (its
	// dependents follow in the background); with them it is gone later.
	return err == nil && len(live.GetFinalizers()) == 0, true, err
}

// confirmNoInstances fails unless the API server confirms that the CRD has
// no objects: deleting it would delete them all.
func (a *Applier) confirmNoInstances(ctx context.Context, crdName string) error {
	inst, err := CountInstances(ctx, a.api, crdName)
	if err != nil {
		return err
	}
	if inst.Count > 0 {
		return fmt.Errorf("CustomResourceDefinition %s left the chart but %d of its objects exist (%s); it is kept until they are deleted",
			crdName, inst.Count, strings.Join(inst.Names, ", "))
	}
	return nil
}

// Kinds are the kinds the module may own, each with whether it is
// namespaced: the table of operator/pkg/kinds plus the kinds the chart's
// own CRDs define (WithCRDs).
type Kinds map[schema.GroupKind]bool

// ManagedKinds are the kinds of operator/pkg/kinds.
func ManagedKinds() Kinds {
	out := Kinds{}
	for _, k := range kinds.Managed() {
		out[k.GVK.GroupKind()] = k.Namespaced
	}
	return out
}

// WithCRDs adds the kinds the CRDs among objs define.
func (k Kinds) WithCRDs(objs []*unstructured.Unstructured) Kinds {
	out := maps.Clone(k)
	for _, o := range objs {
		if o.GroupVersionKind().GroupKind() != crdKind {
			continue
		}
		group, _, _ := unstructured.NestedString(o.Object, "spec", "group")
		kind, _, _ := unstructured.NestedString(o.Object, "spec", "names", "kind")
		scope, _, _ := unstructured.NestedString(o.Object, "spec", "scope")
		if kind != "" {
			out[schema.GroupKind{Group: group, Kind: kind}] = scope != string(apiextensionsv1.ClusterScoped)
		}
	}
	return out
}

// Check tells why an inventory entry cannot be the module's: a kind the
// chart never renders, a namespaced object outside the module namespace,
// or a cluster-scoped one with a namespace. nil means the entry may be
// acted on (once the live object proved to be the manager's).
func (k Kinds) Check(ref inventory.Ref, namespace string) error {
	namespaced, ok := k[ref.GroupKind]
	switch {
	case !ok:
		return fmt.Errorf("%s %s/%s: %s is not a kind the Serverless chart renders", ref.GroupKind.Kind, ref.Namespace, ref.Name, ref.GroupKind)
	case namespaced && ref.Namespace != namespace:
		return fmt.Errorf("%s %s/%s is outside the module namespace %s", ref.GroupKind.Kind, ref.Namespace, ref.Name, namespace)
	case !namespaced && ref.Namespace != "":
		return fmt.Errorf("%s %s is cluster-scoped but names the namespace %s", ref.GroupKind.Kind, ref.Name, ref.Namespace)
	}
	return nil
}

// AppliedByManager tells whether the manager's server-side apply wrote the
// object, as recorded by the API server in its managedFields. A copy made
// with `kubectl get -o yaml` keeps the labels and annotations, not that.
func AppliedByManager(obj metav1.Object) bool {
	return slices.ContainsFunc(obj.GetManagedFields(), func(e metav1.ManagedFieldsEntry) bool {
		return e.Manager == module.ManagerName && e.Operation == metav1.ManagedFieldsOperationApply
	})
}

// managedGVK is the version the manager reads a managed kind at.
func managedGVK(gk schema.GroupKind) (schema.GroupVersionKind, bool) {
	for _, k := range kinds.Managed() {
		if k.GVK.GroupKind() == gk {
			return k.GVK, true
		}
	}
	return schema.GroupVersionKind{}, false
}

// SortForDelete orders refs for removal: the reverse of the apply order.
func SortForDelete(refs []inventory.Ref) { slices.SortStableFunc(refs, DeleteOrder) }

// DeleteOrder compares two objects for removal: higher tiers go first (the
// reverse of the apply order), then by name.
func DeleteOrder(a, b inventory.Ref) int {
	return cmp.Or(cmp.Compare(Tier(b.GroupKind), Tier(a.GroupKind)), cmp.Compare(a.Name, b.Name))
}
