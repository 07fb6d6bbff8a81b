package reconciler

import (
	"context"
	"fmt"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/apply"
	"github.com/kyma-project/serverless-manager/operator/internal/steps"
)

// functionListGVK is the list of the Function CRD the chart installs.
var functionListGVK = schema.GroupVersionKind{Group: "serverless.kyma-project.io", Version: "v1alpha2", Kind: "FunctionList"}

// functionCRDName is the chart's Function CRD; deleting it deletes every
// Function of the cluster.
const functionCRDName = "functions.serverless.kyma-project.io"

// +kubebuilder:rbac:groups=serverless.kyma-project.io,resources=functions,verbs=list

// stepFunctionsGuard starts the uninstall and holds it back while Functions
// exist: nothing is removed until they are deleted, and their deletion
// resumes it. Only the API server's own answer counts (see
// apply.CountInstances): a CRD that is not Established after an API server
// restart is missing from discovery, and its Functions must not be taken
// for none. Such a CRD is touched so that kube-apiserver establishes it.
func (r *Reconciler) stepFunctionsGuard(ctx context.Context, s *state) (steps.Outcome, error) {
	s.cr.Status.State = v1alpha1.StateDeleting
	inst, err := apply.CountInstances(ctx, r.api, functionCRDName)
	if err != nil {
		if touchErr := r.establishIfStuck(ctx, inst.CRD, time.Now()); touchErr != nil {
			err = fmt.Errorf("%w; %w", err, touchErr)
		}
		return r.fail(s, v1alpha1.ConditionDeleted, v1alpha1.ReasonDeletionFailed,
			fmt.Errorf("nothing is removed while Functions may exist: %w", err), true)
	}
	if inst.Count == 0 {
		return steps.Next(), nil
	}
	started, err := r.functionsWatch.ensure()
	if err != nil {
		s.log.Error(err, "watching Function deletions; relying on rechecks")
	}
	if started {
		// The last Function may have gone between the count and the watch's
		// start, which then has no deletion to report.
		if again, err := apply.CountInstances(ctx, r.api, functionCRDName); err == nil {
			inst = again
		}
		if inst.Count == 0 {
			return steps.Next(), nil
		}
	}
	s.cr.Status.State = v1alpha1.StateWarning
	more := ""
	if inst.Count > len(inst.Names) {
		more = ", …"
	}
	s.setCondition(v1alpha1.ConditionDeleted, metav1.ConditionFalse, v1alpha1.ReasonFunctionsExist,
		fmt.Sprintf("%d Functions still exist (%s%s); delete them to uninstall", inst.Count, strings.Join(inst.Names, ", "), more))
	return steps.RequeueAfter(r.opts.FunctionsRecheck), nil
}

// establishIfStuck asks kube-apiserver to establish crd when it waits too
// long (see stuckCRDs); its update event brings the next pass.
func (r *Reconciler) establishIfStuck(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, now time.Time) error {
	if crd == nil {
		return nil
	}
	if touch, _ := establishDue(crd, now); !touch {
		return nil
	}
	return r.requestEstablish(ctx, crd.Name, now)
}
