package reconciler

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/internal/function/resources"
)

// readCounter counts the reads that reach the API server, by list type.
type readCounter struct {
	client.Reader
	mu    sync.Mutex
	reads map[string]int
}

func (r *readCounter) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	r.count(fmt.Sprintf("get %T", obj))
	return r.Reader.Get(ctx, key, obj, opts...)
}

func (r *readCounter) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	r.count(fmt.Sprintf("list %T", list))
	return r.Reader.List(ctx, list, opts...)
}

func (r *readCounter) count(what string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.reads == nil {
		r.reads = map[string]int{}
	}
	r.reads[what]++
}

// take returns the reads since the last call.
func (r *readCounter) take() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.reads
	r.reads = nil
	if out == nil {
		out = map[string]int{}
	}
	return out
}

// stuckReads are the reads of one look at a stalled rollout.
var stuckReads = map[string]int{"list *v1.ReplicaSetList": 1, "list *v1.PodList": 1}

// rolloutFixture is Function "hello" with its Deployment created, in build
// or buildless mode, and a reader that counts the API reads.
func rolloutFixture(t *testing.T, buildless bool) (*fixture, *readCounter) {
	t.Helper()
	fn := newFunction("hello")
	var f *fixture
	if buildless {
		f, _ = newBuildlessFixture(t, nil, fn)
	} else {
		f = builtFixture(t, fn)
	}
	f.reconcile(t, "hello")
	require.Len(t, f.deployments(t), 1)
	f.now = f.now.Add(time.Hour) // past the first report's delay
	f.reconcile(t, "hello")
	c := f.function(t, "hello").Status.Condition(v1alpha2.ConditionRunning)
	require.NotNil(t, c)
	require.Equal(t, corev1.ConditionUnknown, c.Status)
	reads := &readCounter{Reader: f.client}
	f.r.api = reads
	f.writes.take()
	f.rec.events = nil
	return f, reads
}

// stall gives the Deployment the status of a rollout whose last progress
// was ago, with the previous version serving or not.
func (f *fixture) stall(t *testing.T, ago time.Duration, previousServes bool, extra ...appsv1.DeploymentCondition) appsv1.Deployment {
	t.Helper()
	dep := f.deployments(t)[0]
	avail := appsv1.DeploymentCondition{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionFalse, Reason: "MinimumReplicasUnavailable"}
	if previousServes {
		avail = appsv1.DeploymentCondition{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable"}
	}
	since := metav1.NewTime(f.now.Add(-ago))
	dep.Status = appsv1.DeploymentStatus{ObservedGeneration: dep.Generation, Replicas: 2, UpdatedReplicas: 1,
		Conditions: append([]appsv1.DeploymentCondition{avail, {Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue,
			Reason: "ReplicaSetUpdated", LastUpdateTime: since, LastTransitionTime: since}}, extra...)}
	require.NoError(t, f.client.Status().Update(context.Background(), &dep))
	f.writes.take()
	return dep
}

// replicaSet of dep at revision, with available Pods.
func (f *fixture) replicaSet(t *testing.T, dep *appsv1.Deployment, hash string, revision, available int32) *appsv1.ReplicaSet {
	t.Helper()
	labels := map[string]string{"pod-template-hash": hash}
	for k, v := range dep.Spec.Selector.MatchLabels {
		labels[k] = v
	}
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: dep.Name + "-" + hash, Namespace: dep.Namespace, Labels: labels, UID: types.UID("rs-" + hash),
			Annotations:     map[string]string{revisionAnnotation: fmt.Sprint(revision)},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: dep.Name, UID: dep.UID, Controller: ptr.To(true)}}},
		Spec:   appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: dep.Spec.Template},
		Status: appsv1.ReplicaSetStatus{Replicas: max(available, 1), AvailableReplicas: available},
	}
	require.NoError(t, f.client.Create(context.Background(), rs))
	return rs
}

// pod of rs with the given container statuses (init containers first,
// by name "init").
func (f *fixture) pod(t *testing.T, rs *appsv1.ReplicaSet, name string, conditions []corev1.PodCondition, statuses ...corev1.ContainerStatus) {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: rs.Namespace, Labels: rs.Spec.Selector.MatchLabels,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: ptr.To(true)}}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: resources.ContainerFunction, Image: "x"}}},
	}
	pod.Status.Conditions = conditions
	for _, s := range statuses {
		if s.Name == resources.ContainerGitInit {
			pod.Status.InitContainerStatuses = append(pod.Status.InitContainerStatuses, s)
		} else {
			pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, s)
		}
	}
	require.NoError(t, f.client.Create(context.Background(), pod))
}

var podStart = metav1.NewTime(time.Date(2026, 2, 1, 12, 30, 0, 0, time.UTC))

// notReadySince: the Pod's Ready condition, False since t.
func notReadySince(t metav1.Time) []corev1.PodCondition {
	return []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "ContainersNotReady", LastTransitionTime: t}}
}

func ended(reason string, code int32, started metav1.Time) *corev1.ContainerStateTerminated {
	return &corev1.ContainerStateTerminated{Reason: reason, ExitCode: code, StartedAt: started, FinishedAt: metav1.NewTime(started.Add(20 * time.Second))}
}

func waiting(name, reason, message string, last *corev1.ContainerStateTerminated) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: name, Image: "example.org/fn:1", RestartCount: 3,
		State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: message}},
		LastTerminationState: corev1.ContainerState{Terminated: last}}
}

// A rollout whose new Pods cannot start says why in Running, naming the
// Pod, the container and the cause, as soon as it stalled.
func TestStalledRolloutNamesTheCause(t *testing.T) {
	secondRun := metav1.NewTime(podStart.Add(40 * time.Second)) // the run after one that was ready
	tests := []struct {
		name           string
		buildless      bool
		previousServes bool
		conditions     []corev1.PodCondition
		status         corev1.ContainerStatus
		reason         string
		want           string // after "Deployment <dep>: Pod hello-new-a, container "
	}{
		{name: "buildless: OOMKilled while installing the dependencies", buildless: true, previousServes: true,
			conditions: notReadySince(podStart), status: waiting("function", "CrashLoopBackOff", "back-off 40s restarting failed container", ended("OOMKilled", 137, podStart)),
			reason: v1alpha2.ReasonReplicaCrashLoop, want: "function: OOMKilled (exit code 137) before it became ready, while installing the dependencies at start or loading the handler; the previous version keeps serving"},
		{name: "build mode: OOMKilled, nothing served before",
			conditions: notReadySince(podStart), status: waiting("function", "CrashLoopBackOff", "back-off", ended("OOMKilled", 137, podStart)),
			reason: v1alpha2.ReasonReplicaCrashLoop, want: "function: OOMKilled (exit code 137) before it became ready"},
		{name: "crash after the container was ready", buildless: true,
			conditions: notReadySince(metav1.NewTime(podStart.Add(30 * time.Second))), status: waiting("function", "CrashLoopBackOff", "back-off", ended("Error", 1, podStart)),
			reason: v1alpha2.ReasonReplicaCrashLoop, want: "function: Error (exit code 1)"},
		{name: "a later run that never became ready", buildless: true,
			conditions: notReadySince(metav1.NewTime(podStart.Add(30 * time.Second))), status: waiting("function", "CrashLoopBackOff", "back-off", ended("Error", 1, secondRun)),
			reason: v1alpha2.ReasonReplicaCrashLoop, want: "function: Error (exit code 1) before it became ready, while installing the dependencies at start or loading the handler"},
		{name: "just ended, not restarted yet", conditions: notReadySince(podStart),
			status: corev1.ContainerStatus{Name: "function", State: corev1.ContainerState{Terminated: ended("Error", 2, podStart)}},
			reason: v1alpha2.ReasonReplicaCrashLoop, want: "function: Error (exit code 2) before it became ready"},
		{name: "running again after an OOM kill", conditions: notReadySince(podStart), previousServes: true,
			status: corev1.ContainerStatus{Name: "function", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: secondRun}},
				LastTerminationState: corev1.ContainerState{Terminated: ended("OOMKilled", 137, podStart)}},
			reason: v1alpha2.ReasonReplicaCrashLoop, want: "function: OOMKilled (exit code 137) before it became ready; the previous version keeps serving"},
		{name: "image pull back-off", buildless: true, previousServes: true,
			status: waiting("function", "ImagePullBackOff", `Back-off pulling image "example.org/fn:1": ErrImagePull: failed to pull and unpack image "example.org/fn:1": not found`, nil),
			reason: v1alpha2.ReasonReplicaImagePullFailed, want: `function: cannot pull image "example.org/fn:1": failed to pull and unpack image "example.org/fn:1": not found; the previous version keeps serving`},
		{name: "image pull error: the same text", buildless: true, previousServes: true,
			status: waiting("function", "ErrImagePull", `failed to pull and unpack image "example.org/fn:1": not found`, nil),
			reason: v1alpha2.ReasonReplicaImagePullFailed, want: `function: cannot pull image "example.org/fn:1": failed to pull and unpack image "example.org/fn:1": not found; the previous version keeps serving`},
		{name: "image pull back-off without the registry's answer",
			status: waiting("function", "ImagePullBackOff", `Back-off pulling image "example.org/fn:1"`, nil),
			reason: v1alpha2.ReasonReplicaImagePullFailed, want: `function: cannot pull image "example.org/fn:1"`},
		{name: "a missing Secret", status: waiting("function", "CreateContainerConfigError", `secret "creds" not found`, nil),
			reason: v1alpha2.ReasonReplicaConfigError, want: `function: CreateContainerConfigError: secret "creds" not found`},
		{name: "the runtime refuses the container", status: waiting("function", "CreateContainerError", "context deadline exceeded", nil),
			reason: v1alpha2.ReasonReplicaConfigError, want: "function: CreateContainerError: context deadline exceeded"},
		{name: "the Git clone fails", buildless: true,
			status: waiting("init", "CrashLoopBackOff", "back-off", ended("Error", 128, podStart)),
			reason: v1alpha2.ReasonReplicaCrashLoop, want: "init: Error (exit code 128)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, reads := rolloutFixture(t, tt.buildless)
			dep := f.stall(t, 20*time.Second, tt.previousServes)
			if tt.previousServes {
				f.replicaSet(t, &dep, "old", 1, 1)
			}
			rs := f.replicaSet(t, &dep, "new", 2, 0)
			f.pod(t, rs, "hello-new-a", tt.conditions, tt.status)
			f.writes.take()

			requeue := f.reconcile(t, "hello")
			c := assertCondition(t, f.function(t, "hello"), v1alpha2.ConditionRunning, corev1.ConditionFalse, tt.reason)
			want := fmt.Sprintf("Deployment %s: Pod hello-new-a, container %s", dep.Name, tt.want)
			assert.Equal(t, want, c.Message)
			assert.Equal(t, stuckReads, reads.take(), "one ReplicaSet list, one Pod list")
			assert.Equal(t, 10*time.Second, requeue, "looked at again while it stays stalled")
			require.Len(t, f.rec.events, 1)
			assert.Equal(t, recorded{corev1.EventTypeWarning, tt.reason, want}, f.rec.events[0])
			f.writes.take()

			// Nothing new: the same status, no second event.
			f.reconcile(t, "hello")
			assert.Empty(t, f.writes.take())
			assert.Len(t, f.rec.events, 1)
		})
	}
}

// A crash loop passes through waiting, running and terminated: one
// message for all, one status write and one event.
func TestCrashLoopIsOneMessage(t *testing.T) {
	f, _ := rolloutFixture(t, true)
	dep := f.stall(t, time.Minute, false)
	rs := f.replicaSet(t, &dep, "new", 1, 0)
	oom := ended("OOMKilled", 137, podStart)
	phases := []corev1.ContainerStatus{
		{Name: "function", State: corev1.ContainerState{Terminated: oom}},
		waiting("function", "CrashLoopBackOff", "back-off 10s", oom),
		{Name: "function", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: podStart}}, LastTerminationState: corev1.ContainerState{Terminated: oom}},
		waiting("function", "CrashLoopBackOff", "back-off 20s", oom),
	}
	f.pod(t, rs, "hello-new-a", notReadySince(podStart), phases[0])
	var messages []string
	writes := map[string]int{}
	for _, phase := range phases {
		pod := &corev1.Pod{}
		require.NoError(t, f.client.Get(context.Background(), types.NamespacedName{Namespace: testNS, Name: "hello-new-a"}, pod))
		pod.Status.ContainerStatuses = []corev1.ContainerStatus{phase}
		require.NoError(t, f.client.Update(context.Background(), pod))
		f.writes.take()
		f.reconcile(t, "hello")
		for what, n := range f.writes.take() {
			writes[what] += n
		}
		messages = append(messages, f.function(t, "hello").Status.Condition(v1alpha2.ConditionRunning).Message)
	}
	for _, m := range messages {
		assert.Equal(t, messages[0], m)
	}
	assert.Contains(t, messages[0], "OOMKilled (exit code 137)")
	assert.Equal(t, map[string]int{"patch/status *v1alpha2.Function": 1}, writes)
	assert.Len(t, f.rec.events, 1)
}

// Normal rollouts cost no read: while the Deployment progresses, or once
// it is ready, the Pods are not looked at.
func TestNoReadWhileProgressing(t *testing.T) {
	for _, buildless := range []bool{false, true} {
		t.Run(fmt.Sprintf("buildless=%v", buildless), func(t *testing.T) {
			f, reads := rolloutFixture(t, buildless)
			dep := f.stall(t, time.Second, true)
			rs := f.replicaSet(t, &dep, "new", 2, 0)
			f.pod(t, rs, "hello-new-a", notReadySince(podStart), waiting("function", "CrashLoopBackOff", "", ended("OOMKilled", 137, podStart)))

			before := *f.function(t, "hello").Status.Condition(v1alpha2.ConditionRunning)
			requeue := f.reconcile(t, "hello")
			assert.Empty(t, reads.take(), "progressed 1 s ago: not stalled")
			assert.Equal(t, lookAfter-time.Second, requeue, "a look once it would have stalled")
			assert.Equal(t, before, *f.function(t, "hello").Status.Condition(v1alpha2.ConditionRunning))

			f.readyDeployment(t)
			assert.Zero(t, f.reconcile(t, "hello"))
			assert.Empty(t, reads.take(), "ready")
			assertCondition(t, f.function(t, "hello"), v1alpha2.ConditionRunning, corev1.ConditionTrue, v1alpha2.ReasonDeploymentReady)
		})
	}
}

// Pods still starting, with nothing failed: no cause, the condition stays.
func TestSlowStartIsNoFailure(t *testing.T) {
	f, reads := rolloutFixture(t, true)
	dep := f.stall(t, 40*time.Second, false)
	rs := f.replicaSet(t, &dep, "new", 1, 0)
	f.pod(t, rs, "hello-new-a", notReadySince(podStart),
		corev1.ContainerStatus{Name: "function", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: podStart}}})
	before := *f.function(t, "hello").Status.Condition(v1alpha2.ConditionRunning)
	assert.Equal(t, 20*time.Second, f.reconcile(t, "hello"))
	assert.Equal(t, stuckReads, reads.take())
	assert.Equal(t, before, *f.function(t, "hello").Status.Condition(v1alpha2.ConditionRunning))
	assert.Empty(t, f.rec.events)
}

// Only the newest ReplicaSet's Pods count: a failing Pod of the previous
// version or of another Deployment is not this rollout's cause.
func TestOnlyTheNewestReplicaSetIsBlamed(t *testing.T) {
	f, _ := rolloutFixture(t, false)
	dep := f.stall(t, time.Minute, true)
	old := f.replicaSet(t, &dep, "old", 1, 1)
	rs := f.replicaSet(t, &dep, "new", 2, 0)
	other := dep.DeepCopy()
	other.Name, other.UID = "other", "other-uid"
	foreign := f.replicaSet(t, other, "zzz", 3, 0)
	crash := waiting("function", "CrashLoopBackOff", "", ended("Error", 1, podStart))
	f.pod(t, old, "hello-old-a", notReadySince(podStart), crash)
	f.pod(t, foreign, "hello-foreign-a", notReadySince(podStart), crash)
	f.pod(t, rs, "hello-new-b", notReadySince(podStart), waiting("function", "CreateContainerConfigError", `secret "s" not found`, nil))

	f.reconcile(t, "hello")
	c := assertCondition(t, f.function(t, "hello"), v1alpha2.ConditionRunning, corev1.ConditionFalse, v1alpha2.ReasonReplicaConfigError)
	assert.Equal(t, fmt.Sprintf(`Deployment %s: Pod hello-new-b, container function: CreateContainerConfigError: secret "s" not found; the previous version keeps serving`, dep.Name), c.Message)
}

// Past the progress deadline the cause replaces the Deployment's own
// message; the Deployment's status changes trigger any later look.
func TestDeadlineExceededNamesTheCause(t *testing.T) {
	f, reads := rolloutFixture(t, true)
	dep := f.deployments(t)[0]
	since := metav1.NewTime(f.now.Add(-11 * time.Minute))
	dep.Status = appsv1.DeploymentStatus{ObservedGeneration: dep.Generation, Conditions: []appsv1.DeploymentCondition{
		{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionFalse, Reason: "MinimumReplicasUnavailable"},
		{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded", Message: "timed out", LastUpdateTime: since},
	}}
	require.NoError(t, f.client.Status().Update(context.Background(), &dep))
	rs := f.replicaSet(t, &dep, "new", 1, 0)
	f.pod(t, rs, "hello-new-a", notReadySince(podStart), waiting("function", "ImagePullBackOff", "", nil))

	assert.Zero(t, f.reconcile(t, "hello"), "no polling after the deadline")
	assert.Equal(t, stuckReads, reads.take())
	c := assertCondition(t, f.function(t, "hello"), v1alpha2.ConditionRunning, corev1.ConditionFalse, v1alpha2.ReasonReplicaImagePullFailed)
	assert.Equal(t, fmt.Sprintf(`Deployment %s: Pod hello-new-a, container function: cannot pull image "example.org/fn:1"`, dep.Name), c.Message)
}

// Pods the ReplicaSet cannot create (a ResourceQuota) are ReplicaRefused
// at once, from the Deployment's own condition: no read.
func TestReplicaFailureFailsAtOnce(t *testing.T) {
	f, reads := rolloutFixture(t, false)
	dep := f.stall(t, time.Second, false, appsv1.DeploymentCondition{Type: appsv1.DeploymentReplicaFailure, Status: corev1.ConditionTrue,
		Reason: "FailedCreate", Message: `pods "hello-x" is forbidden: exceeded quota: q`})
	f.reconcile(t, "hello")
	assert.Empty(t, reads.take())
	c := assertCondition(t, f.function(t, "hello"), v1alpha2.ConditionRunning, corev1.ConditionFalse, v1alpha2.ReasonReplicaRefused)
	assert.Equal(t, fmt.Sprintf(`Deployment %s cannot create its Pods: pods "hello-x" is forbidden: exceeded quota: q`, dep.Name), c.Message)
}

func TestPollInterval(t *testing.T) {
	deadline := 10 * time.Minute
	tests := []struct {
		stalled, want time.Duration
	}{
		{15 * time.Second, 7500 * time.Millisecond},
		{3 * time.Second, 3 * time.Second},
		{40 * time.Second, 20 * time.Second},
		{5 * time.Minute, 30 * time.Second},
		{9*time.Minute + 30*time.Second, 0}, // the deadline comes first
	}
	for _, tt := range tests {
		t.Run(tt.stalled.String(), func(t *testing.T) {
			assert.Equal(t, tt.want, pollInterval(tt.stalled, deadline))
		})
	}
	// Stalled until the deadline: a few dozen looks.
	looks := 0
	for stalled := lookAfter; ; looks++ {
		wait := pollInterval(stalled, deadline)
		if wait == 0 {
			break
		}
		stalled += wait
	}
	assert.LessOrEqual(t, looks, 30)
}

// A replica the scheduler cannot place is named within seconds (Unknown:
// it may still be placed), stays named by passes that do not look, and
// is cleared by the look that finds it placed.
func TestNotPlacedReplicaIsNamedAndCleared(t *testing.T) {
	f, reads := rolloutFixture(t, false)
	dep := f.stall(t, lookAfter, false)
	rs := f.replicaSet(t, &dep, "new", 1, 0)
	f.pod(t, rs, "hello-new-a", []corev1.PodCondition{notPlaced(noNode)})

	assert.Equal(t, minPollInterval, f.reconcile(t, "hello"), "looked at again within seconds")
	assert.Equal(t, stuckReads, reads.take())
	c := assertCondition(t, f.function(t, "hello"), v1alpha2.ConditionRunning, corev1.ConditionUnknown, v1alpha2.ReasonReplicaUnschedulable)
	assert.Equal(t, fmt.Sprintf("Deployment %s: Pod hello-new-a is not placed: %s", dep.Name, noNode), c.Message)
	assert.Empty(t, f.rec.events, "a wait, not a failure")

	// The Deployment progresses (another Pod ready): no look, the cause stays.
	f.stall(t, time.Second, false)
	f.reconcile(t, "hello")
	assert.Empty(t, reads.take())
	assert.Empty(t, f.writes.take())

	// Placed: the next look clears the cause.
	pod := &corev1.Pod{}
	require.NoError(t, f.client.Get(context.Background(), types.NamespacedName{Namespace: testNS, Name: "hello-new-a"}, pod))
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}
	require.NoError(t, f.client.Status().Update(context.Background(), pod))
	f.now = f.now.Add(lookAfter)
	f.reconcile(t, "hello")
	assert.Equal(t, stuckReads, reads.take())
	c = assertCondition(t, f.function(t, "hello"), v1alpha2.ConditionRunning, corev1.ConditionUnknown, v1alpha2.ReasonDeploymentWaiting)
	assert.Equal(t, fmt.Sprintf("Deployment %s is not ready yet", dep.Name), c.Message)
}

// A scale-up of a Deployment whose rollout is over (a wake from zero)
// leaves Progressing as it was: the wait is timed from Available turning
// False, so its Pods are looked at within seconds, not at once and never
// again.
func TestScaleUpIsTimedFromAvailable(t *testing.T) {
	f, reads := rolloutFixture(t, false)
	dep := f.deployments(t)[0]
	long := metav1.NewTime(f.now.Add(-time.Hour))
	justNow := metav1.NewTime(f.now.Add(-time.Second))
	dep.Status = appsv1.DeploymentStatus{ObservedGeneration: dep.Generation, Replicas: 1, Conditions: []appsv1.DeploymentCondition{
		{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionFalse, Reason: "MinimumReplicasUnavailable", LastTransitionTime: justNow, LastUpdateTime: justNow},
		{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable", LastTransitionTime: long, LastUpdateTime: long},
	}}
	require.NoError(t, f.client.Status().Update(context.Background(), &dep))
	rs := f.replicaSet(t, &dep, "new", 1, 0)
	f.pod(t, rs, "hello-new-a", []corev1.PodCondition{notPlaced(noNode)})

	assert.Equal(t, lookAfter-time.Second, f.reconcile(t, "hello"))
	assert.Empty(t, reads.take())
	f.now = f.now.Add(lookAfter)
	f.reconcile(t, "hello")
	assert.Equal(t, stuckReads, reads.take())
	assertCondition(t, f.function(t, "hello"), v1alpha2.ConditionRunning, corev1.ConditionUnknown, v1alpha2.ReasonReplicaUnschedulable)
}

// Pods the ReplicaSet cannot create are named from the ReplicaSet when
// the Deployment does not show its ReplicaFailure yet.
func TestRefusedReplicasFromTheReplicaSet(t *testing.T) {
	f, _ := rolloutFixture(t, false)
	dep := f.stall(t, 10*time.Second, false)
	rs := f.replicaSet(t, &dep, "new", 1, 0)
	rs.Status.Conditions = []appsv1.ReplicaSetCondition{{Type: appsv1.ReplicaSetReplicaFailure, Status: corev1.ConditionTrue, Reason: "FailedCreate",
		Message: `pods "hello-new-x" is forbidden: maximum cpu usage per Container is 100m, but limit is 200m`}}
	require.NoError(t, f.client.Status().Update(context.Background(), rs))

	f.reconcile(t, "hello")
	c := assertCondition(t, f.function(t, "hello"), v1alpha2.ConditionRunning, corev1.ConditionFalse, v1alpha2.ReasonReplicaRefused)
	assert.Equal(t, fmt.Sprintf(`Deployment %s cannot create its Pods: pods "hello-new-x" is forbidden: maximum cpu usage per Container is 100m, but limit is 200m`, dep.Name), c.Message)
	require.Len(t, f.rec.events, 1)
	assert.Equal(t, v1alpha2.ReasonReplicaRefused, f.rec.events[0].reason)
}
