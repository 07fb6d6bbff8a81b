package reconciler

import (
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/internal/function/config"
	"github.com/kyma-project/serverless-manager/operator/internal/function/git"
	"github.com/kyma-project/serverless-manager/operator/internal/function/resources"
)

// pass is what one reconcile of a Function knows and decides. Steps fill it
// in order; the status is written once at the end from p.status.
type pass struct {
	fn     *v1alpha2.Function // as read from the cache; never modified
	key    types.NamespacedName
	status v1alpha2.FunctionStatus // the status this pass will leave
	now    metav1.Time

	// Set by prerequisites.
	in                   resources.Inputs
	pullImage, pushImage string

	// Children found by the internal labels (observe); steps replace the
	// entries they create or update.
	configMaps  []corev1.ConfigMap
	jobs        []batchv1.Job
	deployments []appsv1.Deployment
	services    []corev1.Service
	// privateServices: the private Service of mesh mode (mesh.go), kept
	// apart from services, which the Service step keeps to one.
	privateServices []corev1.Service
	hpas            []autoscalingv2.HorizontalPodAutoscaler
	// endpointSlices: the activator slice of a scale-to-zero Function and
	// the slices the cluster made for its Service (they copy its labels).
	endpointSlices []discoveryv1.EndpointSlice
	buildPods      []corev1.Pod // Pods of its build Jobs (the cache holds no others)

	gitKeys *git.SecretKeys // the auth Secret's layout (buildless Git Functions with auth)

	sourceConfigMap string             // name of the source ConfigMap in use
	finishedJob     *batchv1.Job       // the build Job whose success this pass records
	built           bool               // the expected image exists
	deployment      *appsv1.Deployment // the Deployment kept
	rolled          string             // DeploymentCreated/DeploymentUpdated when this pass changed the Pod template

	// What the steps decided for the status write at the end of the pass;
	// where the pass goes and when it comes again are their outcomes.
	keepStatus    bool          // the status is not written in this pass
	buildReportIn time.Duration // a status whose only news is a running build waits this long (buildReportWait)
}

func newPass(fn *v1alpha2.Function, cfg *config.Config, now metav1.Time) *pass {
	st := *fn.Status.DeepCopy()
	st.Runtime = fn.Spec.Runtime
	st.RuntimeImageOverride = fn.Spec.RuntimeImageOverride
	st.ObservedGeneration = fn.Generation
	st.PodSelector = resources.PodSelector(fn)
	_, st.FunctionResourceProfile = cfg.Resources.Function.Resolve(fn.Spec.Runtime, functionResources(fn))
	_, st.BuildResourceProfile = cfg.Resources.BuildJob.Resolve(fn.Spec.Runtime, buildResources(fn))
	return &pass{
		fn:     fn,
		key:    types.NamespacedName{Namespace: fn.Namespace, Name: fn.Name},
		status: st,
		now:    now,
		in:     resources.Inputs{Function: fn, Config: cfg},
	}
}

func functionResources(fn *v1alpha2.Function) *v1alpha2.ResourceRequirements {
	if fn.Spec.ResourceConfiguration == nil {
		return nil
	}
	return fn.Spec.ResourceConfiguration.Function
}

func buildResources(fn *v1alpha2.Function) *v1alpha2.ResourceRequirements {
	if fn.Spec.ResourceConfiguration == nil {
		return nil
	}
	return fn.Spec.ResourceConfiguration.Build
}
