package reconciler

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/internal/function/resources"
)

// The pure half of "why does it wait": the state of Pods and ReplicaSets
// as the cluster reports it, turned into the condition that names the
// cause. The steps decide when to read that state (rollout, and build for
// its Job's Pod: buildCause).

// cause is why a build or a replica waits: the condition that says so.
type cause struct {
	status  corev1.ConditionStatus
	reason  string
	message string
}

// failedCreate is the reason the Job and ReplicaSet controllers give a
// Pod the API server refused to create: in the ReplicaSet's ReplicaFailure
// condition (copied to its Deployment) and in the Warning event on the
// owner, the only trace a Job keeps of it.
const failedCreate = "FailedCreate"

// replicaCauses are the Running reasons that name why a replica cannot
// start. Passes that see no cause of their own keep them (running); the
// rollout step replaces or clears them when it looks.
var replicaCauses = []string{
	v1alpha2.ReasonReplicaUnschedulable, v1alpha2.ReasonReplicaRefused, v1alpha2.ReasonReplicaImagePullFailed,
	v1alpha2.ReasonReplicaCrashLoop, v1alpha2.ReasonReplicaConfigError,
}

func isReplicaCause(reason string) bool { return slices.Contains(replicaCauses, reason) }

// replicaCause names why rs's Pods do not run, or returns nil: a failing
// container of the first such Pod (by name; init containers first), else
// Pods the API server refuses (the ReplicaSet's ReplicaFailure), else the
// first Pod the scheduler cannot place. Failures come first: they need a
// fix, while a Pod not placed may be placed once capacity frees.
// previousServes says that an older ReplicaSet still serves.
func replicaCause(deployment string, rs *appsv1.ReplicaSet, pods []corev1.Pod, buildless, previousServes bool) *cause {
	serving := ""
	if previousServes {
		serving = "; the previous version keeps serving"
	}
	slices.SortFunc(pods, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	var owned []*corev1.Pod
	for i := range pods {
		if ref := metav1.GetControllerOf(&pods[i]); pods[i].DeletionTimestamp == nil && ref != nil && ref.UID == rs.UID {
			owned = append(owned, &pods[i])
		}
	}
	for _, pod := range owned {
		for i, cs := range slices.Concat(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses) {
			reason, what := containerTrouble(pod, cs, i < len(pod.Status.InitContainerStatuses), buildless)
			if reason != "" {
				return &cause{corev1.ConditionFalse, reason,
					fmt.Sprintf("Deployment %s: Pod %s, container %s: %s%s", deployment, pod.Name, cs.Name, what, serving)}
			}
		}
	}
	if rf := replicaSetFailure(rs); rf != nil {
		return refusedReplicas(deployment, rf.Message, serving)
	}
	for _, pod := range owned {
		if c := unschedulable(pod); c != nil {
			return &cause{corev1.ConditionUnknown, v1alpha2.ReasonReplicaUnschedulable,
				fmt.Sprintf("Deployment %s: Pod %s%s%s%s", deployment, pod.Name, v1alpha2.NotPlacedSeparator, c.Message, serving)}
		}
	}
	return nil
}

// refusedReplicas is the cause of Pods the API server refuses to create,
// with its answer.
func refusedReplicas(deployment, answer, serving string) *cause {
	return &cause{corev1.ConditionFalse, v1alpha2.ReasonReplicaRefused,
		fmt.Sprintf("Deployment %s cannot create its Pods: %s%s", deployment, answer, serving)}
}

// replicaSetFailure is rs's True ReplicaFailure condition of reason
// FailedCreate, or nil.
func replicaSetFailure(rs *appsv1.ReplicaSet) *appsv1.ReplicaSetCondition {
	for i := range rs.Status.Conditions {
		c := &rs.Status.Conditions[i]
		if c.Type == appsv1.ReplicaSetReplicaFailure && c.Status == corev1.ConditionTrue && c.Reason == failedCreate {
			return c
		}
	}
	return nil
}

// unschedulable is pod's PodScheduled condition when the scheduler found
// no node for it, or nil (placed, not tried yet, or held by a scheduling
// gate).
func unschedulable(pod *corev1.Pod) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		c := &pod.Status.Conditions[i]
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return c
		}
	}
	return nil
}

// containerTrouble names why cs (an init container's status when init)
// cannot run: the Running reason and what happened, or "" when it runs or
// starts as it should. The text stays the same while the cause does (no
// restart count, no time), so a crash loop is one status write and one
// event, not one per restart.
func containerTrouble(pod *corev1.Pod, cs corev1.ContainerStatus, init, buildless bool) (string, string) {
	if cs.Ready {
		return "", ""
	}
	if w := cs.State.Waiting; w != nil {
		switch w.Reason {
		case "ImagePullBackOff", "ErrImagePull":
			// Both alternate while the kubelet retries: one text for both.
			if detail := pullDetail(w.Message); detail != "" {
				return v1alpha2.ReasonReplicaImagePullFailed, fmt.Sprintf("cannot pull image %q: %s", cs.Image, detail)
			}
			return v1alpha2.ReasonReplicaImagePullFailed, fmt.Sprintf("cannot pull image %q", cs.Image)
		case "CreateContainerConfigError", "CreateContainerError":
			return v1alpha2.ReasonReplicaConfigError, strings.TrimSuffix(w.Reason+": "+w.Message, ": ")
		case "CrashLoopBackOff":
			if t := cs.LastTerminationState.Terminated; t != nil {
				return v1alpha2.ReasonReplicaCrashLoop, runEnded(pod, cs, t, init, buildless)
			}
			return v1alpha2.ReasonReplicaCrashLoop, "CrashLoopBackOff"
		}
	}
	for _, t := range []*corev1.ContainerStateTerminated{cs.State.Terminated, cs.LastTerminationState.Terminated} {
		if t != nil && (t.Reason == "OOMKilled" || t.ExitCode != 0) {
			return v1alpha2.ReasonReplicaCrashLoop, runEnded(pod, cs, t, init, buildless)
		}
	}
	return "", ""
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
