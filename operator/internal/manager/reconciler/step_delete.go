package reconciler

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/apply"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/inventory"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/watch"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
)

// functionListGVK is the list of the Function CRD the chart installs.
var functionListGVK = schema.GroupVersionKind{Group: "serverless.kyma-project.io", Version: "v1alpha2", Kind: "FunctionList"}

// foreignFinalizers are set by the Function controller on the base objects it
// replicates; with the controller gone first, nobody would remove them.
var foreignFinalizers = []string{
	"serverless.kyma-project.io/deletion-hook",
	"serverless.kyma-project.io/finalizer-registry-config",
}

// copyKinds are the kinds the Function controller copies, with the module
// labels, into user namespaces.
var copyKinds = []schema.GroupVersionKind{
	{Version: "v1", Kind: "ConfigMapList"},
	{Version: "v1", Kind: "SecretList"},
	{Version: "v1", Kind: "ServiceAccountList"},
}

// +kubebuilder:rbac:groups=serverless.kyma-project.io,resources=functions,verbs=list

// stepDelete uninstalls the module, one tier at a time: webhooks, then
// workloads, then configuration and RBAC, CRDs last, then the copies in
// user namespaces, then the finalizer. It refuses while Functions exist.
func (r *Reconciler) stepDelete(ctx context.Context, s *state) (stepFn, string) {
	s.cr.Status.State = v1alpha1.StateDeleting
	count, names, err := r.functions(ctx)
	if err != nil {
		return r.fail(s, v1alpha1.ConditionDeleted, v1alpha1.ReasonDeletionFailed, err, true)
	}
	if count > 0 {
		r.watchFunctions()
		s.cr.Status.State = v1alpha1.StateWarning
		more := ""
		if count > len(names) {
			more = ", …"
		}
		s.setCondition(v1alpha1.ConditionDeleted, metav1.ConditionFalse, v1alpha1.ReasonFunctionsExist,
			fmt.Sprintf("%d Functions still exist (%s%s); delete them to uninstall", count, strings.Join(names, ", "), more))
		s.result = ctrl.Result{RequeueAfter: r.opts.FunctionsRecheck}
		return nil, ""
	}

	refs, err := r.remaining(ctx, s)
	if err != nil {
		return r.fail(s, v1alpha1.ConditionDeleted, v1alpha1.ReasonDeletionFailed, err, true)
	}
	if len(refs) > 0 {
		var waiting []string
		for _, ref := range firstTier(refs) {
			if err := r.releaseForeignFinalizers(ctx, ref); err != nil {
				return r.fail(s, v1alpha1.ConditionDeleted, v1alpha1.ReasonDeletionFailed, err, true)
			}
			if _, err := r.applier.Delete(ctx, ref); err != nil {
				return r.fail(s, v1alpha1.ConditionDeleted, v1alpha1.ReasonDeletionFailed,
					fmt.Errorf("deleting %s %q: %w", ref.GroupKind.Kind, ref.Name, err), true)
			}
			waiting = append(waiting, ref.GroupKind.Kind+" "+ref.Name)
		}
		s.setCondition(v1alpha1.ConditionDeleted, metav1.ConditionFalse, v1alpha1.ReasonDeleting,
			fmt.Sprintf("%d objects left; removing %s", len(refs), strings.Join(waiting, ", ")))
		s.result = ctrl.Result{RequeueAfter: r.opts.DeletionRecheck}
		return nil, ""
	}

	// The cache may have missed objects created while a watch was down (an
	// API server restart): before the finalizer goes, the API server has
	// the last word.
	leftInAPI, err := r.deleteLeftInAPI(ctx)
	if err != nil {
		return r.fail(s, v1alpha1.ConditionDeleted, v1alpha1.ReasonDeletionFailed, err, true)
	}
	if leftInAPI != "" {
		s.setCondition(v1alpha1.ConditionDeleted, metav1.ConditionFalse, v1alpha1.ReasonDeleting, "removing "+leftInAPI)
		s.result = ctrl.Result{RequeueAfter: r.opts.DeletionRecheck}
		return nil, ""
	}

	left, err := r.deleteCopies(ctx, s.cr.Namespace)
	if err != nil {
		return r.fail(s, v1alpha1.ConditionDeleted, v1alpha1.ReasonDeletionFailed, err, true)
	}
	if left > 0 {
		s.setCondition(v1alpha1.ConditionDeleted, metav1.ConditionFalse, v1alpha1.ReasonDeleting,
			fmt.Sprintf("removing %d copies of registry Secrets, runtime ConfigMaps and ServiceAccounts from user namespaces", left))
		s.result = ctrl.Result{RequeueAfter: r.opts.DeletionRecheck}
		return nil, ""
	}

	s.setCondition(v1alpha1.ConditionDeleted, metav1.ConditionTrue, v1alpha1.ReasonDeleting, "the module is uninstalled")
	if err := r.removeFinalizer(ctx, s); err != nil {
		s.err = err
	}
	return nil, ""
}

// functions counts the cluster's Functions and names up to ten of them.
func (r *Reconciler) functions(ctx context.Context) (int, []string, error) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(functionListGVK)
	err := r.api.List(ctx, list, client.Limit(10))
	if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
		return 0, nil, nil
	}
	if err != nil {
		return 0, nil, fmt.Errorf("listing Functions: %w", err)
	}
	names := make([]string, 0, len(list.Items))
	for _, f := range list.Items {
		names = append(names, f.Namespace+"/"+f.Name)
	}
	count := len(list.Items)
	if list.RemainingItemCount != nil {
		count += int(*list.RemainingItemCount)
	}
	return count, names, nil
}

// remaining is everything the manager installed that still exists: the
// inventory plus anything labelled as the module's in the cache (an object
// applied just before a crash is labelled but maybe not in the inventory).
func (r *Reconciler) remaining(ctx context.Context, s *state) ([]inventory.Ref, error) {
	seen := map[inventory.Ref]bool{}
	var refs []inventory.Ref
	objs, err := r.live.ListManaged(ctx)
	if err != nil {
		return nil, err
	}
	for _, o := range objs {
		ref := inventory.Ref{GroupKind: watch.GVKOf(o).GroupKind(), Namespace: o.GetNamespace(), Name: o.GetName()}
		if !seen[ref] {
			seen[ref] = true
			refs = append(refs, ref)
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
		if live == nil {
			continue
		}
		kept = append(kept, e)
		if !seen[ref] {
			seen[ref] = true
			refs = append(refs, ref)
		}
	}
	s.cr.Status.Inventory = kept
	return refs, nil
}

// deleteLeftInAPI lists the module's objects from the API server, deletes
// the first tier of them (in uninstall order) and names what it found; ""
// when the API server holds none. They carry the module labels, so they are
// the module's to delete, whatever the cache says.
func (r *Reconciler) deleteLeftInAPI(ctx context.Context) (string, error) {
	objs, err := r.live.ListManagedFromAPI(ctx)
	if err != nil {
		return "", err
	}
	if len(objs) == 0 {
		return "", nil
	}
	byRef := map[inventory.Ref]metav1.Object{}
	refs := make([]inventory.Ref, 0, len(objs))
	for _, o := range objs {
		ref := inventory.Ref{GroupKind: watch.GVKOf(o).GroupKind(), Namespace: o.GetNamespace(), Name: o.GetName()}
		byRef[ref] = o
		refs = append(refs, ref)
	}
	var names []string
	for _, ref := range firstTier(refs) {
		names = append(names, ref.GroupKind.Kind+" "+ref.Name)
		if byRef[ref].GetDeletionTimestamp() != nil {
			continue
		}
		if err := r.dropForeignFinalizers(ctx, ref, byRef[ref]); err != nil {
			return "", err
		}
		obj := &metav1.PartialObjectMetadata{}
		obj.SetGroupVersionKind(watch.GVKOf(byRef[ref]))
		obj.SetNamespace(ref.Namespace)
		obj.SetName(ref.Name)
		if err := r.client.Delete(ctx, obj, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
			return "", fmt.Errorf("deleting %s %q: %w", ref.GroupKind.Kind, ref.Name, err)
		}
	}
	return fmt.Sprintf("%d objects the API server still holds: %s", len(refs), strings.Join(names, ", ")), nil
}

// firstTier sorts refs (not empty) for removal and returns those of the
// tier that goes first; the next tier waits until they are gone.
func firstTier(refs []inventory.Ref) []inventory.Ref {
	apply.SortForDelete(refs)
	tier := apply.Tier(refs[0].GroupKind)
	n := 0
	for n < len(refs) && apply.Tier(refs[n].GroupKind) == tier {
		n++
	}
	return refs[:n]
}

// releaseForeignFinalizers removes the Function controller's finalizers
// from an object the manager is about to delete.
func (r *Reconciler) releaseForeignFinalizers(ctx context.Context, ref inventory.Ref) error {
	if ref.GroupKind.Group != "" || (ref.GroupKind.Kind != "ConfigMap" && ref.GroupKind.Kind != "Secret") {
		return nil
	}
	gvk := corev1.SchemeGroupVersion.WithKind(ref.GroupKind.Kind)
	live, err := r.live.LiveMeta(ctx, gvk, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name})
	if err != nil || live == nil {
		return err
	}
	return r.dropForeignFinalizers(ctx, ref, live)
}

// dropForeignFinalizers removes the Function controller's finalizers from
// live, a ConfigMap or Secret of the module.
func (r *Reconciler) dropForeignFinalizers(ctx context.Context, ref inventory.Ref, live metav1.Object) error {
	if ref.GroupKind.Group != "" || (ref.GroupKind.Kind != "ConfigMap" && ref.GroupKind.Kind != "Secret") {
		return nil
	}
	gvk := corev1.SchemeGroupVersion.WithKind(ref.GroupKind.Kind)
	kept := slices.DeleteFunc(slices.Clone(live.GetFinalizers()), func(f string) bool { return slices.Contains(foreignFinalizers, f) })
	if len(kept) == len(live.GetFinalizers()) {
		return nil
	}
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(gvk)
	obj.SetNamespace(ref.Namespace)
	obj.SetName(ref.Name)
	base := obj.DeepCopy()
	base.SetFinalizers(live.GetFinalizers())
	obj.SetFinalizers(kept)
	if len(kept) == 0 {
		obj.SetFinalizers([]string{})
	}
	err := r.client.Patch(ctx, obj, client.MergeFrom(base))
	return client.IgnoreNotFound(err)
}

// deleteCopies deletes what the Function controller copied into user
// namespaces (they inherit the module labels) and returns how many are left.
func (r *Reconciler) deleteCopies(ctx context.Context, namespace string) (int, error) {
	left := 0
	for _, gvk := range copyKinds {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(gvk)
		if err := r.api.List(ctx, list, client.MatchingLabelsSelector{Selector: module.Selector()}); err != nil {
			return 0, fmt.Errorf("listing copies (%s): %w", gvk.Kind, err)
		}
		for i := range list.Items {
			item := &list.Items[i]
			if item.Namespace == namespace {
				continue
			}
			left++
			if item.DeletionTimestamp != nil {
				continue
			}
			item.SetGroupVersionKind(gvk.GroupVersion().WithKind(strings.TrimSuffix(gvk.Kind, "List")))
			if err := r.client.Delete(ctx, item); client.IgnoreNotFound(err) != nil {
				return 0, fmt.Errorf("deleting %s %s/%s: %w", item.Kind, item.Namespace, item.Name, err)
			}
		}
	}
	return left, nil
}
