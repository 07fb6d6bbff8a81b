package reconciler

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/internal/function/resources"
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

// What the cluster reports about a build Job, its Pod and its events,
// turned into the BuildReady condition that names it.
func TestBuildCause(t *testing.T) {
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "hello-build-x", UID: "job"}}
	buildPod := func(name string, conditions ...corev1.PodCondition) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{resources.LabelJobName: job.Name}},
			Status: corev1.PodStatus{Conditions: conditions}}
	}
	quota := &corev1.Event{Reason: "FailedCreate", Type: corev1.EventTypeWarning,
		Message: `Error creating: pods "hello-build-x-abc" is forbidden: exceeded quota: compute, requested: cpu=500m, used: cpu=2, limited: cpu=2`}
	gone := buildPod("hello-build-x-old", notPlaced(noNode))
	gone.DeletionTimestamp = ptr.To(metav1.Now())
	tests := []struct {
		name    string
		pods    []corev1.Pod
		refusal *corev1.Event
		want    *cause
	}{
		{name: "no Pod yet, nothing refused"},
		{name: "its Pod runs", pods: []corev1.Pod{buildPod("hello-build-x-abc", corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue})}},
		{name: "its Pod not placed", pods: []corev1.Pod{buildPod("hello-build-x-abc", notPlaced(noNode))},
			want: &cause{corev1.ConditionUnknown, v1alpha2.ReasonJobPodUnschedulable, "Job hello-build-x: Pod hello-build-x-abc is not placed: " + noNode}},
		{name: "its Pod refused", refusal: quota,
			want: &cause{corev1.ConditionFalse, v1alpha2.ReasonJobPodRefused,
				`Job hello-build-x cannot create its Pod: pods "hello-build-x-abc" is forbidden: exceeded quota: compute, requested: cpu=500m, used: cpu=2, limited: cpu=2`}},
		{name: "refused once, created since: the Pod counts", refusal: quota, pods: []corev1.Pod{buildPod("hello-build-x-abc")}},
		{name: "a Pod going away is not its Pod", refusal: quota, pods: []corev1.Pod{gone},
			want: &cause{corev1.ConditionFalse, v1alpha2.ReasonJobPodRefused,
				`Job hello-build-x cannot create its Pod: pods "hello-build-x-abc" is forbidden: exceeded quota: compute, requested: cpu=500m, used: cpu=2, limited: cpu=2`}},
		{name: "another Job's Pod is not its Pod", pods: []corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "x", Labels: map[string]string{resources.LabelJobName: "other"}},
			Status: corev1.PodStatus{Conditions: []corev1.PodCondition{notPlaced(noNode)}}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, buildCause(job, tt.pods, tt.refusal))
		})
	}
}

func TestNewestRefusal(t *testing.T) {
	at := func(s int) metav1.Time { return metav1.NewTime(time.Date(2026, 2, 1, 12, 0, s, 0, time.UTC)) }
	event := func(msg, typ, reason string, last metav1.Time) corev1.Event {
		return corev1.Event{Message: msg, Type: typ, Reason: reason, LastTimestamp: last}
	}
	tests := []struct {
		name   string
		events []corev1.Event
		want   string
	}{
		{name: "none"},
		{name: "only others", events: []corev1.Event{event("created", corev1.EventTypeNormal, "SuccessfulCreate", at(1))}},
		{name: "the newest by lastTimestamp", want: "b", events: []corev1.Event{
			event("a", corev1.EventTypeWarning, "FailedCreate", at(1)), event("b", corev1.EventTypeWarning, "FailedCreate", at(9)),
			event("c", corev1.EventTypeWarning, "FailedCreate", at(5))}},
		{name: "events.k8s.io's series counts", want: "a", events: []corev1.Event{
			{Message: "a", Type: corev1.EventTypeWarning, Reason: "FailedCreate", EventTime: metav1.NewMicroTime(at(1).Time),
				Series: &corev1.EventSeries{Count: 3, LastObservedTime: metav1.NewMicroTime(at(20).Time)}},
			event("b", corev1.EventTypeWarning, "FailedCreate", at(9))}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := newestRefusal(tt.events)
			if tt.want == "" {
				assert.Nil(t, got)
				return
			}
			if assert.NotNil(t, got) {
				assert.Equal(t, tt.want, got.Message)
			}
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

// Each waiting Function knows how many wait longer than it.
func TestBuildSlotsQueue(t *testing.T) {
	s := NewBuildSlots(nil, 1, &gauge{})
	t0 := time.Date(2026, 2, 1, 12, 0, 0, 0, time.UTC)
	key := func(n string) types.NamespacedName { return types.NamespacedName{Namespace: "ns", Name: n} }
	s.waiting = map[types.NamespacedName]time.Time{key("c"): t0.Add(time.Second), key("a"): t0, key("b"): t0, key("d"): t0.Add(time.Minute)}
	for name, want := range map[string]int{"a": 0, "b": 1, "c": 2, "d": 3, "not-waiting": 0} {
		ahead, paused := s.Queue(key(name))
		assert.Equal(t, want, ahead, name)
		assert.False(t, paused)
	}
	s.paused = true
	_, paused := s.Queue(key("a"))
	assert.True(t, paused)
}
