package reconciler

import (
	"testing"

	"github.com/stretchr/testify/assert"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
)

const noNode = "0/4 nodes are available: 1 Insufficient cpu, 3 node(s) had untolerated taint {node.kubernetes.io/not-ready: }."

func notPlaced(msg string) corev1.PodCondition {
	return corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: msg}
}

// replicaPod is a Pod of ReplicaSet "rs-new" with the given conditions and
// container statuses.
func replicaPod(name string, conditions []corev1.PodCondition, statuses ...corev1.ContainerStatus) corev1.Pod {
	return corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, OwnerReferences: []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "rs-new", UID: "rs-new", Controller: ptr.To(true)}}},
		Status:     corev1.PodStatus{Conditions: conditions, ContainerStatuses: statuses},
	}
}

// What the cluster reports about a ReplicaSet and its Pods, turned into
// the Running condition that names it.
func TestReplicaCause(t *testing.T) {
	refused := appsv1.ReplicaSetCondition{Type: appsv1.ReplicaSetReplicaFailure, Status: corev1.ConditionTrue, Reason: "FailedCreate",
		Message: `pods "hello-abc-x" is forbidden: exceeded quota: compute, requested: limits.cpu=400m, used: limits.cpu=1, limited: limits.cpu=1`}
	crash := waiting("function", "CrashLoopBackOff", "back-off 10s", ended("Error", 1, podStart))
	other := replicaPod("hello-other", nil, crash)
	other.OwnerReferences[0].UID = "someone-else"
	deleting := replicaPod("hello-gone", nil, crash)
	deleting.DeletionTimestamp = ptr.To(metav1.Now())
	tests := []struct {
		name           string
		rsConditions   []appsv1.ReplicaSetCondition
		pods           []corev1.Pod
		previousServes bool
		want           *cause
	}{
		{name: "Pods starting: no cause", pods: []corev1.Pod{replicaPod("hello-a", []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}},
			corev1.ContainerStatus{Name: "function", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}})}},
		{name: "no Pods: no cause"},
		{name: "not placed", pods: []corev1.Pod{replicaPod("hello-a", []corev1.PodCondition{notPlaced(noNode)})},
			want: &cause{corev1.ConditionUnknown, v1alpha2.ReasonReplicaUnschedulable, "Deployment hello: Pod hello-a is not placed: " + noNode}},
		{name: "not placed, the previous version serves", previousServes: true, pods: []corev1.Pod{replicaPod("hello-a", []corev1.PodCondition{notPlaced(noNode)})},
			want: &cause{corev1.ConditionUnknown, v1alpha2.ReasonReplicaUnschedulable, "Deployment hello: Pod hello-a is not placed: " + noNode + "; the previous version keeps serving"}},
		{name: "held by a scheduling gate: not a cause", pods: []corev1.Pod{replicaPod("hello-a", []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonSchedulingGated}})}},
		{name: "refused by a quota", rsConditions: []appsv1.ReplicaSetCondition{refused},
			want: &cause{corev1.ConditionFalse, v1alpha2.ReasonReplicaRefused, "Deployment hello cannot create its Pods: " + refused.Message}},
		{name: "a ReplicaSet that cannot delete is not refused", rsConditions: []appsv1.ReplicaSetCondition{{Type: appsv1.ReplicaSetReplicaFailure, Status: corev1.ConditionTrue, Reason: "FailedDelete"}}},
		{name: "image pull", pods: []corev1.Pod{replicaPod("hello-a", nil, waiting("function", "ImagePullBackOff", `Back-off pulling image "example.org/fn:1": ErrImagePull: not found`, nil))},
			want: &cause{corev1.ConditionFalse, v1alpha2.ReasonReplicaImagePullFailed, `Deployment hello: Pod hello-a, container function: cannot pull image "example.org/fn:1": not found`}},
		{name: "crash loop", pods: []corev1.Pod{replicaPod("hello-a", notReadySince(podStart), crash)},
			want: &cause{corev1.ConditionFalse, v1alpha2.ReasonReplicaCrashLoop, "Deployment hello: Pod hello-a, container function: Error (exit code 1) before it became ready"}},
		{name: "crash loop without a recorded end", pods: []corev1.Pod{replicaPod("hello-a", nil, waiting("function", "CrashLoopBackOff", "", nil))},
			want: &cause{corev1.ConditionFalse, v1alpha2.ReasonReplicaCrashLoop, "Deployment hello: Pod hello-a, container function: CrashLoopBackOff"}},
		{name: "a missing Secret key", pods: []corev1.Pod{replicaPod("hello-a", nil, waiting("function", "CreateContainerConfigError", `couldn't find key password in Secret default/db`, nil))},
			want: &cause{corev1.ConditionFalse, v1alpha2.ReasonReplicaConfigError, `Deployment hello: Pod hello-a, container function: CreateContainerConfigError: couldn't find key password in Secret default/db`}},
		{name: "a failing container before a Pod not placed, whatever their names",
			pods: []corev1.Pod{replicaPod("hello-a", []corev1.PodCondition{notPlaced(noNode)}), replicaPod("hello-b", nil, waiting("function", "ErrImagePull", "denied", nil))},
			want: &cause{corev1.ConditionFalse, v1alpha2.ReasonReplicaImagePullFailed, `Deployment hello: Pod hello-b, container function: cannot pull image "example.org/fn:1": denied`}},
		{name: "refused before a Pod not placed", rsConditions: []appsv1.ReplicaSetCondition{refused},
			pods: []corev1.Pod{replicaPod("hello-a", []corev1.PodCondition{notPlaced(noNode)})},
			want: &cause{corev1.ConditionFalse, v1alpha2.ReasonReplicaRefused, "Deployment hello cannot create its Pods: " + refused.Message}},
		{name: "Pods of another ReplicaSet, and Pods going away, are not this one's cause", pods: []corev1.Pod{other, deleting}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "rs-new", UID: "rs-new"}, Status: appsv1.ReplicaSetStatus{Conditions: tt.rsConditions}}
			assert.Equal(t, tt.want, replicaCause("hello", rs, tt.pods, false, tt.previousServes))
		})
	}
}

// A build Pod's update is a pass when the scheduler's verdict changes,
// and only then.
func TestPlacementChanged(t *testing.T) {
	pod := func(conditions ...corev1.PodCondition) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{Conditions: conditions}}
	}
	tests := []struct {
		name     string
		old, cur *corev1.Pod
		want     bool
	}{
		{"not placed", pod(), pod(notPlaced(noNode)), true},
		{"placed at last", pod(notPlaced(noNode)), pod(), true},
		{"another message", pod(notPlaced(noNode)), pod(notPlaced("0/4 nodes are available: 4 Insufficient memory.")), true},
		{"the same verdict", pod(notPlaced(noNode)), pod(notPlaced(noNode)), false},
		{"runs", pod(), pod(), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, placementChanged(event.UpdateEvent{ObjectOld: tt.old, ObjectNew: tt.cur}))
		})
	}
}
