package reconciler

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/internal/function/config"
	"github.com/kyma-project/serverless-manager/operator/internal/steps"
)

// Reads of a stalled rollout, from the API server (the cache holds no
// Function Pods and no ReplicaSets):
// +kubebuilder:rbac:groups=apps,resources=replicasets,verbs=list
// +kubebuilder:rbac:groups="",resources=pods,verbs=list

// A Deployment whose new Pods cannot start changes nothing the controller
// watches: its status says "not available" until the progress deadline
// (10 minutes), the Pods' status says why. So a Deployment that is not
// ready and made no progress for lookAfter is looked at in its Pods, again
// at growing intervals (pollInterval) until the deadline; one that
// progresses or is ready is never read. lookAfter is the first rollout's
// report delay (progressReportDelay): a new Function's Deployment that is
// available within it costs no read. Only its own ReplicaSets and Pods
// are read, by label, from the API server: the controller keeps no Pod
// of a Function in memory.
const (
	lookAfter       = 5 * time.Second
	minPollInterval = 3 * time.Second
	maxPollInterval = 30 * time.Second
)

// revisionAnnotation numbers a Deployment's ReplicaSets (set by the
// Deployment controller); the highest is the newest.
const revisionAnnotation = "deployment.kubernetes.io/revision"

// rollout names why a Deployment that is not ready does not run its Pods
// (replicaCause): a Pod not placed (Running Unknown
// ReplicaUnschedulable), Pods refused (ReplicaRefused), a container that
// cannot pull its image, crashes or cannot be created (False
// ReplicaImagePullFailed, ReplicaCrashLoop, ReplicaConfigError), with the
// Pod, the container and what the cluster said, and whether the previous
// version keeps serving. A look that finds no cause clears an earlier
// one. Only a Deployment that made no progress for lookAfter is read (a
// ReplicaSet list and a Pod list), and only while it stays so.
func (r *Reconciler) rollout(ctx context.Context, p *pass) (steps.Outcome, error) {
	dep := p.deployment
	if r.api == nil || dep == nil || p.rolled != "" || p.keepStatus || ptr.Deref(dep.Spec.Replicas, 1) == 0 ||
		dep.Status.ObservedGeneration < dep.Generation {
		return steps.Next(), nil
	}
	if status, _, _ := deploymentState(dep); status == corev1.ConditionTrue || replicaFailure(dep) != nil {
		// Ready, or the Deployment names the cause itself.
		return steps.Next(), nil
	}
	prog := deploymentCondition(dep, appsv1.DeploymentProgressing)
	deadlineExceeded := prog != nil && prog.Status == corev1.ConditionFalse
	stalled := p.now.Sub(lastProgress(dep, prog))
	out := steps.Next()
	if !deadlineExceeded {
		if stalled < lookAfter {
			return out.Within(lookAfter - stalled), nil
		}
		out = out.Within(pollInterval(stalled, progressDeadline(dep)))
	}
	found, err := r.stuckPods(ctx, dep, r.cfg.Mode == config.ModeBuildless)
	if err != nil {
		// Only the cause is lost; the next look reads again.
		logr.FromContextOrDiscard(ctx).Info("reading the Pods of a waiting Deployment failed", "deployment", dep.Name, "error", err.Error())
		return out, nil
	}
	if found != nil {
		setCondition(&p.status, v1alpha2.ConditionRunning, found.status, found.reason, found.message, p.now)
		return out, nil
	}
	if c := p.status.Condition(v1alpha2.ConditionRunning); c != nil && isReplicaCause(c.Reason) {
		// The cause is gone (a Pod placed, a Secret created): what the
		// Deployment says now.
		status, reason, msg := deploymentState(dep)
		setCondition(&p.status, v1alpha2.ConditionRunning, status, reason, msg, p.now)
	}
	return out, nil
}

// lastProgress is when the Deployment last made progress: the Deployment
// controller moves its Progressing condition's lastUpdateTime only then
// (and times the progress deadline from it). A scale-up of a Deployment
// whose rollout is over (a wake from zero, kubectl scale) leaves it as it
// is; there, Available turning False is when the wait began.
func lastProgress(dep *appsv1.Deployment, prog *appsv1.DeploymentCondition) time.Time {
	at := dep.CreationTimestamp.Time
	if prog != nil && prog.LastUpdateTime.After(at) {
		at = prog.LastUpdateTime.Time
	}
	if avail := deploymentCondition(dep, appsv1.DeploymentAvailable); avail != nil && avail.Status == corev1.ConditionFalse &&
		avail.LastTransitionTime.After(at) {
		at = avail.LastTransitionTime.Time
	}
	return at
}

func progressDeadline(dep *appsv1.Deployment) time.Duration {
	return time.Duration(ptr.Deref(dep.Spec.ProgressDeadlineSeconds, 600)) * time.Second
}

// pollInterval is the wait before the next look at a rollout stalled for
// stalled: half of that, within [minPollInterval, maxPollInterval], so a
// rollout stuck until its deadline is read about a dozen times. None once
// the deadline is near: the Deployment's own status change then triggers
// the last look.
func pollInterval(stalled, deadline time.Duration) time.Duration {
	wait := min(max(stalled/2, minPollInterval), maxPollInterval)
	if stalled+wait >= deadline {
		return 0
	}
	return wait
}

// stuckPods reads the newest ReplicaSet of dep and its Pods and returns
// the cause that keeps them from running, or nil.
func (r *Reconciler) stuckPods(ctx context.Context, dep *appsv1.Deployment, buildless bool) (*cause, error) {
	sel, err := metav1.LabelSelectorAsSelector(dep.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("the selector of Deployment %s: %w", dep.Name, err)
	}
	var sets appsv1.ReplicaSetList
	if err := r.api.List(ctx, &sets, client.InNamespace(dep.Namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return nil, fmt.Errorf("listing the ReplicaSets of Deployment %s: %w", dep.Name, err)
	}
	newest, previousServes := newestReplicaSet(dep, sets.Items)
	if newest == nil {
		return nil, nil
	}
	if sel, err = metav1.LabelSelectorAsSelector(newest.Spec.Selector); err != nil {
		return nil, fmt.Errorf("the selector of ReplicaSet %s: %w", newest.Name, err)
	}
	var pods corev1.PodList
	if err := r.api.List(ctx, &pods, client.InNamespace(dep.Namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return nil, fmt.Errorf("listing the Pods of ReplicaSet %s: %w", newest.Name, err)
	}
	return replicaCause(dep.Name, newest, pods.Items, buildless, previousServes), nil
}

// newestReplicaSet returns dep's ReplicaSet of the highest revision, and
// whether an older one of dep has available Pods (the previous version
// keeps serving).
func newestReplicaSet(dep *appsv1.Deployment, sets []appsv1.ReplicaSet) (*appsv1.ReplicaSet, bool) {
	var owned []*appsv1.ReplicaSet
	for i := range sets {
		if ref := metav1.GetControllerOf(&sets[i]); ref != nil && ref.UID == dep.UID {
			owned = append(owned, &sets[i])
		}
	}
	if len(owned) == 0 {
		return nil, false
	}
	revision := func(rs *appsv1.ReplicaSet) int64 {
		n, _ := strconv.ParseInt(rs.Annotations[revisionAnnotation], 10, 64)
		return n
	}
	newest := slices.MaxFunc(owned, func(a, b *appsv1.ReplicaSet) int { return int(revision(a) - revision(b)) })
	serves := false
	for _, rs := range owned {
		serves = serves || (rs != newest && rs.Status.AvailableReplicas > 0)
	}
	return newest, serves
}
