package reconciler

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
)

// functionListGVK is the list of the Function CRD the chart installs.
var functionListGVK = schema.GroupVersionKind{Group: "serverless.kyma-project.io", Version: "v1alpha2", Kind: "FunctionList"}

// +kubebuilder:rbac:groups=serverless.kyma-project.io,resources=functions,verbs=list

// stepFunctionsGuard starts the uninstall and holds it back while Functions
// exist: nothing is removed until they are deleted, and their deletion
// resumes it.
func (r *Reconciler) stepFunctionsGuard(ctx context.Context, s *state) bool {
	s.cr.Status.State = v1alpha1.StateDeleting
	count, names, err := r.functions(ctx)
	if err != nil {
		return r.fail(s, v1alpha1.ConditionDeleted, v1alpha1.ReasonDeletionFailed, err, true)
	}
	if count == 0 {
		return true
	}
	if err := r.functionsWatch.ensure(); err != nil {
		s.log.Error(err, "watching Function deletions; relying on rechecks")
	}
	s.cr.Status.State = v1alpha1.StateWarning
	more := ""
	if count > len(names) {
		more = ", …"
	}
	s.setCondition(v1alpha1.ConditionDeleted, metav1.ConditionFalse, v1alpha1.ReasonFunctionsExist,
		fmt.Sprintf("%d Functions still exist (%s%s); delete them to uninstall", count, strings.Join(names, ", "), more))
	s.result = ctrl.Result{RequeueAfter: r.opts.FunctionsRecheck}
	return false
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
