package reconciler

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/internal/steps"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
)

// copyKinds are the kinds the Function controller copies, with the module
// labels, into user namespaces.
var copyKinds = []schema.GroupVersionKind{
	{Version: "v1", Kind: "ConfigMap"},
	{Version: "v1", Kind: "Secret"},
	{Version: "v1", Kind: "ServiceAccount"},
}

// stepDeleteCopies removes what the Function controller copied into user
// namespaces; the module namespace was emptied by the steps before. A copy
// is known by its name (the registry Secret, the runtimes' Dockerfile
// ConfigMaps, the Functions' ServiceAccount) besides the module labels; one
// its user took over (managed-by: user) stays.
func (r *Reconciler) stepDeleteCopies(ctx context.Context, s *state) (steps.Outcome, error) {
	own, err := r.ownership(s)
	if err != nil {
		s.log.Error(err, "rendering the chart for its object names; only the copies named in the code are removed")
	}
	left, err := r.deleteCopies(ctx, s.cr.Namespace, own)
	if err != nil {
		return r.fail(s, v1alpha1.ConditionDeleted, v1alpha1.ReasonDeletionFailed, err, true)
	}
	// The controller's record of the external registry's repositories it
	// pushed to (registry clean-up opt-in) goes with the module: a new
	// installation records the repositories of the Functions it finds.
	record := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: s.cr.Namespace, Name: module.RegistryRepositoriesName}}
	if err := r.client.Delete(ctx, record); err != nil && !apierrors.IsNotFound(err) {
		return r.fail(s, v1alpha1.ConditionDeleted, v1alpha1.ReasonDeletionFailed,
			fmt.Errorf("deleting ConfigMap %s/%s: %w", record.Namespace, record.Name, err), true)
	}
	if left == 0 {
		return steps.Next(), nil
	}
	s.setCondition(v1alpha1.ConditionDeleted, metav1.ConditionFalse, v1alpha1.ReasonDeleting,
		fmt.Sprintf("removing %d copies of registry Secrets, runtime ConfigMaps and ServiceAccounts from user namespaces", left))
	return steps.RequeueAfter(r.opts.DeletionRecheck), nil
}

// deleteCopies deletes the copies the API server lists (they inherit the
// module labels) and returns how many are left.
func (r *Reconciler) deleteCopies(ctx context.Context, namespace string, own ownership) (int, error) {
	left := 0
	for _, gvk := range copyKinds {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := r.api.List(ctx, list, client.MatchingLabelsSelector{Selector: module.Selector()}); err != nil {
			return 0, fmt.Errorf("listing copies (%sList): %w", gvk.Kind, err)
		}
		for i := range list.Items {
			item := &list.Items[i]
			if item.Namespace == namespace {
				continue
			}
			l, ok := leftoverOf(gvk, item)
			if !ok || !own.ownsCopy(gvk.GroupKind(), item) {
				continue
			}
			left++
			if err := r.deleteObject(ctx, l); err != nil {
				return 0, fmt.Errorf("in namespace %s: %w", item.Namespace, err)
			}
		}
	}
	return left, nil
}
