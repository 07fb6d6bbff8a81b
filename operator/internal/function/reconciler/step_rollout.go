package reconciler

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/internal/function/config"
	"github.com/kyma-project/serverless-manager/operator/internal/function/resources"
)

// Reads of a stalled rollout, from the API server (the cache holds no
// Function Pods and no ReplicaSets):
// +kubebuilder:rbac:groups=apps,resources=replicasets,verbs=list
// +kubebuilder:rbac:groups="",resources=pods,verbs=list

// A Deployment whose new Pods cannot start changes nothing the controller
// watches: its status says "not available" until the progress deadline
// (10 minutes), the Pods' status says why. So a rollout that made no
// progress for stalledAfter is looked at in its Pods, again at growing
// intervals (pollInterval) until the deadline; one that progresses is
// never read.
const (
	stalledAfter    = 15 * time.Second
	minPollInterval = 5 * time.Second
	maxPollInterval = time.Minute
)

// revisionAnnotation numbers a Deployment's ReplicaSets (set by the
// Deployment controller); the highest is the newest.
const revisionAnnotation = "deployment.kubernetes.io/revision"

// rollout names why a Deployment that is not ready cannot start its Pods:
// a container waiting in CrashLoopBackOff, ImagePullBackOff, ErrImagePull,
// CreateContainerConfigError or CreateContainerError, or whose last run
// ended OOMKilled or with an error exit, makes Running False
// DeploymentFailed with a message naming the Pod, the container and the
// cause, and whether the previous version keeps serving. Only a rollout
// that made no progress for stalledAfter is read (a ReplicaSet list and a
// Pod list), and only while it stays so.
func (r *Reconciler) rollout(ctx context.Context, p *pass) error {
	dep := p.deployment
	if r.api == nil || dep == nil || p.rolled != "" || p.keepStatus || ptr.Deref(dep.Spec.Replicas, 1) == 0 ||
		dep.Status.ObservedGeneration < dep.Generation {
		return nil
	}
	if status, _, _ := deploymentState(dep); status == corev1.ConditionTrue || replicaFailure(dep) != nil {
		// Ready, or the Deployment names the cause itself.
		return nil
	}
	prog := deploymentCondition(dep, appsv1.DeploymentProgressing)
	deadlineExceeded := prog != nil && prog.Status == corev1.ConditionFalse
	stalled := p.now.Sub(lastProgress(dep, prog))
	if !deadlineExceeded {
		if stalled < stalledAfter {
			p.requeueIn(stalledAfter - stalled)
			return nil
		}
		p.requeueIn(pollInterval(stalled, progressDeadline(dep)))
	}
	msg, err := r.stuckPods(ctx, dep, r.cfg.Mode == config.ModeBuildless)
	if err != nil {
		// Only the message is lost; the next look reads again.
		logr.FromContextOrDiscard(ctx).Info("reading the Pods of a stalled rollout failed", "deployment", dep.Name, "error", err.Error())
		return nil
	}
	if msg != "" {
		setCondition(&p.status, v1alpha2.ConditionRunning, corev1.ConditionFalse, v1alpha2.ReasonDeploymentFailed, msg, p.now)
	}
	return nil
}

// lastProgress is when the Deployment last made progress: the Deployment
// controller moves its Progressing condition's lastUpdateTime only then
// (and times the progress deadline from it).
func lastProgress(dep *appsv1.Deployment, prog *appsv1.DeploymentCondition) time.Time {
	if prog != nil && !prog.LastUpdateTime.IsZero() {
		return prog.LastUpdateTime.Time
	}
	return dep.CreationTimestamp.Time
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

// stuckPods reads the newest ReplicaSet of dep and its Pods and returns the
// Running message naming the first failing container, or "" when none fails.
func (r *Reconciler) stuckPods(ctx context.Context, dep *appsv1.Deployment, buildless bool) (string, error) {
	sel, err := metav1.LabelSelectorAsSelector(dep.Spec.Selector)
	if err != nil {
		return "", fmt.Errorf("the selector of Deployment %s: %w", dep.Name, err)
	}
	var sets appsv1.ReplicaSetList
	if err := r.api.List(ctx, &sets, client.InNamespace(dep.Namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return "", fmt.Errorf("listing the ReplicaSets of Deployment %s: %w", dep.Name, err)
	}
	newest, previousServes := newestReplicaSet(dep, sets.Items)
	if newest == nil {
		return "", nil
	}
	if sel, err = metav1.LabelSelectorAsSelector(newest.Spec.Selector); err != nil {
		return "", fmt.Errorf("the selector of ReplicaSet %s: %w", newest.Name, err)
	}
	var pods corev1.PodList
	if err := r.api.List(ctx, &pods, client.InNamespace(dep.Namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return "", fmt.Errorf("listing the Pods of ReplicaSet %s: %w", newest.Name, err)
	}
	return stuckMessage(dep.Name, newest, pods.Items, buildless, previousServes), nil
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

// stuckMessage is the Running message for the first failing container of
// rs's Pods (by name; init containers first), or "".
func stuckMessage(deployment string, rs *appsv1.ReplicaSet, pods []corev1.Pod, buildless, previousServes bool) string {
	slices.SortFunc(pods, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	for i := range pods {
		pod := &pods[i]
		if ref := metav1.GetControllerOf(pod); pod.DeletionTimestamp != nil || ref == nil || ref.UID != rs.UID {
			continue
		}
		for i, cs := range slices.Concat(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses) {
			cause := containerTrouble(pod, cs, i < len(pod.Status.InitContainerStatuses), buildless)
			if cause == "" {
				continue
			}
			msg := fmt.Sprintf("Deployment %s: Pod %s, container %s: %s", deployment, pod.Name, cs.Name, cause)
			if previousServes {
				msg += "; the previous version keeps serving"
			}
			return msg
		}
	}
	return ""
}

// containerTrouble names why cs (an init container's status when init)
// cannot run, or "". The text stays the same while the cause does (no
// restart count, no time), so a crash loop is one status write and one
// event, not one per restart.
func containerTrouble(pod *corev1.Pod, cs corev1.ContainerStatus, init, buildless bool) string {
	if cs.Ready {
		return ""
	}
	if w := cs.State.Waiting; w != nil {
		switch w.Reason {
		case "ImagePullBackOff", "ErrImagePull":
			// Both alternate while the kubelet retries: one text for both.
			if detail := pullDetail(w.Message); detail != "" {
				return fmt.Sprintf("cannot pull image %q: %s", cs.Image, detail)
			}
			return fmt.Sprintf("cannot pull image %q", cs.Image)
		case "CreateContainerConfigError", "CreateContainerError":
			return strings.TrimSuffix(w.Reason+": "+w.Message, ": ")
		case "CrashLoopBackOff":
			if t := cs.LastTerminationState.Terminated; t != nil {
				return runEnded(pod, cs, t, init, buildless)
			}
			return "CrashLoopBackOff"
		}
	}
	for _, t := range []*corev1.ContainerStateTerminated{cs.State.Terminated, cs.LastTerminationState.Terminated} {
		if t != nil && (t.Reason == "OOMKilled" || t.ExitCode != 0) {
			return runEnded(pod, cs, t, init, buildless)
		}
	}
	return ""
}

// runEnded names how a container's run ended, and when it ended before
// the container became ready, says so: in buildless mode the Pod installs
// the dependencies at start, the usual place for an OOM kill or an exit.
func runEnded(pod *corev1.Pod, cs corev1.ContainerStatus, t *corev1.ContainerStateTerminated, init, buildless bool) string {
	reason := t.Reason
	if reason == "" {
		reason = "terminated"
	}
	out := fmt.Sprintf("%s (exit code %d)", reason, t.ExitCode)
	if init || !neverReady(pod, t) {
		return out
	}
	out += " before it became ready"
	if buildless && cs.Name == resources.ContainerFunction {
		out += ", while installing the dependencies at start or loading the handler"
	}
	return out
}

// neverReady: the Pod was not ready at any time during the run t ended,
// i.e. its Ready condition last changed before that run started (a run
// that became ready moved it to True, and its end back to False).
func neverReady(pod *corev1.Pod, t *corev1.ContainerStateTerminated) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status != corev1.ConditionTrue && !c.LastTransitionTime.After(t.StartedAt.Time)
		}
	}
	return true
}

// pullDetail is the registry's answer in a waiting container's image pull
// message, without the kubelet's back-off wording around it
// (`Back-off pulling image "<image>": ErrImagePull: <answer>`); "" when
// it holds none.
func pullDetail(msg string) string {
	if rest, ok := strings.CutPrefix(msg, "Back-off pulling image "); ok {
		quoted, err := strconv.QuotedPrefix(rest)
		if err != nil {
			return ""
		}
		msg = strings.TrimPrefix(rest[len(quoted):], ": ")
	}
	return strings.TrimSpace(strings.TrimPrefix(msg, "ErrImagePull: "))
}
