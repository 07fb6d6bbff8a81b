package app_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
)

// The scheduler's verdict on a Pod no node fits, as a real cluster writes it.
const noRoom = "0/4 nodes are available: 1 Insufficient cpu, 3 node(s) had untolerated taint {node.kubernetes.io/not-ready: }. preemption: 0/4 nodes are available: 1 No preemption victims found for incoming pod, 3 Preemption is not helpful for scheduling."

// A Function says why it waits, from the Pod, ReplicaSet, Job and event
// states the cluster's controllers would write (there are none in
// envtest: the test writes them), within seconds and with one status
// write per cause.
func TestFunctionSaysWhyItWaits(t *testing.T) {
	e := start(t)

	t.Run("JobQueued: a build behind the build limit, with its place in the queue", func(t *testing.T) {
		ns := e.causeNamespace(t, "queued")
		names := []string{"f1", "f2", "f3", "f4"}
		for _, n := range names {
			e.createFunction(t, ns, n)
			// One at a time: the queue's order is the order of creation.
			require.EventuallyWithT(t, func(c *assert.CollectT) {
				assert.NotEmpty(c, conditionOf(e.function(c, ns, n), v1alpha2.ConditionBuildReady).Reason)
			}, eventual, tick)
		}
		for i, n := range names[maxJobs:] {
			fn := e.waitCondition(t, ns, n, v1alpha2.ConditionBuildReady, corev1.ConditionUnknown, v1alpha2.ReasonJobQueued)
			assert.Equal(t, fmt.Sprintf("queued behind the build limit: %d of %d builds running, %d ahead of it in the queue", maxJobs, maxJobs, i),
				conditionOf(fn, v1alpha2.ConditionBuildReady).Message)
		}
		e.finishEveryBuild(t, ns, names...)
	})

	t.Run("JobPodUnschedulable: the build Pod not placed, with the scheduler's message", func(t *testing.T) {
		ns := e.causeNamespace(t, "build-unplaced")
		e.createFunction(t, ns, "hello")
		job := e.waitJob(t, ns, "hello")
		pod := e.buildPod(t, job, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: noRoom})
		fn := e.waitCondition(t, ns, "hello", v1alpha2.ConditionBuildReady, corev1.ConditionUnknown, v1alpha2.ReasonJobPodUnschedulable)
		assert.Equal(t, fmt.Sprintf("Job %s: Pod %s is not placed: %s", job.Name, pod.Name, noRoom), conditionOf(fn, v1alpha2.ConditionBuildReady).Message)

		// Placed: the build runs.
		pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
		require.NoError(t, e.c.Status().Update(context.Background(), pod))
		e.waitCondition(t, ns, "hello", v1alpha2.ConditionBuildReady, corev1.ConditionUnknown, v1alpha2.ReasonJobRunning)
		// Gone, the build ends with the Job (an unfinished Pod would hold its end).
		require.NoError(t, e.c.Delete(context.Background(), pod))
		e.finishEveryBuild(t, ns, "hello")
	})

	t.Run("JobPodRefused: the build Pod refused by a quota, with the API server's answer", func(t *testing.T) {
		ns := e.causeNamespace(t, "build-refused")
		e.createFunction(t, ns, "hello")
		job := e.waitJob(t, ns, "hello")
		answer := fmt.Sprintf(`pods "%s-7xk2p" is forbidden: exceeded quota: compute, requested: limits.cpu=1100m, used: limits.cpu=1, limited: limits.cpu=2`, job.Name)
		e.jobEvent(t, job, "FailedCreate", "Error creating: "+answer)
		fn := e.waitCondition(t, ns, "hello", v1alpha2.ConditionBuildReady, corev1.ConditionFalse, v1alpha2.ReasonJobPodRefused)
		assert.Equal(t, fmt.Sprintf("Job %s cannot create its Pod: %s", job.Name, answer), conditionOf(fn, v1alpha2.ConditionBuildReady).Message)
		e.waitWarnings(t, ns, "hello", v1alpha2.ReasonJobPodRefused, 1)

		// The quota raised: the Pod is created, the build runs.
		pod := e.buildPod(t, job, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue})
		e.waitCondition(t, ns, "hello", v1alpha2.ConditionBuildReady, corev1.ConditionUnknown, v1alpha2.ReasonJobRunning)
		require.NoError(t, e.c.Delete(context.Background(), pod))
		e.finishEveryBuild(t, ns, "hello")
	})

	crash := corev1.ContainerStatus{Name: "function", Image: "registry.example:5000/hello:1",
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 20s restarting failed container"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 1,
			StartedAt: metav1.NewTime(time.Now().Add(-time.Minute)), FinishedAt: metav1.NewTime(time.Now().Add(-50 * time.Second))}}}
	waitingFor := func(reason, message string) corev1.ContainerStatus {
		return corev1.ContainerStatus{Name: "function", Image: "registry.example:5000/hello:1",
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: message}}}
	}
	replicaCases := []struct {
		name       string
		refused    string // the ReplicaSet's ReplicaFailure message
		conditions []corev1.PodCondition
		container  *corev1.ContainerStatus
		status     corev1.ConditionStatus
		reason     string
		message    string // after "Deployment <name>"
	}{
		{name: "not placed", conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: noRoom}},
			status: corev1.ConditionUnknown, reason: v1alpha2.ReasonReplicaUnschedulable, message: ": Pod <pod> is not placed: " + noRoom},
		{name: "refused by a LimitRange", refused: `pods "<pod>" is forbidden: maximum cpu usage per Container is 100m, but limit is 200m`,
			status: corev1.ConditionFalse, reason: v1alpha2.ReasonReplicaRefused, message: ` cannot create its Pods: pods "<pod>" is forbidden: maximum cpu usage per Container is 100m, but limit is 200m`},
		{name: "image pull", container: ptr.To(waitingFor("ImagePullBackOff", `Back-off pulling image "registry.example:5000/hello:1": ErrImagePull: manifest unknown`)),
			status: corev1.ConditionFalse, reason: v1alpha2.ReasonReplicaImagePullFailed, message: `: Pod <pod>, container function: cannot pull image "registry.example:5000/hello:1": manifest unknown`},
		{name: "crash loop", container: &crash,
			status: corev1.ConditionFalse, reason: v1alpha2.ReasonReplicaCrashLoop, message: ": Pod <pod>, container function: Error (exit code 1) before it became ready"},
		{name: "a missing Secret key", container: ptr.To(waitingFor("CreateContainerConfigError", "couldn't find key password in Secret <ns>/db")),
			status: corev1.ConditionFalse, reason: v1alpha2.ReasonReplicaConfigError, message: ": Pod <pod>, container function: CreateContainerConfigError: couldn't find key password in Secret <ns>/db"},
	}
	for _, tc := range replicaCases {
		t.Run(tc.reason+": a replica "+tc.name, func(t *testing.T) {
			ns := e.causeNamespace(t, "replica-"+strings.ToLower(tc.reason))
			e.createFunction(t, ns, "hello")
			e.finishJob(t, e.waitJob(t, ns, "hello"), true)
			dep := e.waitDeployment(t, ns, "hello")
			before := e.writes.of(ns, "hello")["patch/status *v1alpha2.Function"]
			pod := dep.Name + "-5d8f7-abcde"
			fill := strings.NewReplacer("<pod>", pod, "<ns>", ns)
			var container *corev1.ContainerStatus
			if tc.container != nil {
				c := *tc.container
				c.State.Waiting = ptr.To(*c.State.Waiting)
				c.State.Waiting.Message = fill.Replace(c.State.Waiting.Message)
				container = &c
			}
			rs := e.waitingDeployment(t, &dep, fill.Replace(tc.refused))
			if tc.refused == "" {
				e.replicaPod(t, rs, pod, tc.conditions, container)
			}
			started := time.Now()
			fn := e.waitCondition(t, ns, "hello", v1alpha2.ConditionRunning, tc.status, tc.reason)
			t.Logf("%s named after %v", tc.reason, time.Since(started).Round(100*time.Millisecond))
			assert.Equal(t, "Deployment "+dep.Name+fill.Replace(tc.message), conditionOf(fn, v1alpha2.ConditionRunning).Message)

			// Nothing changes: no further status write, however often it looks.
			time.Sleep(4 * time.Second)
			assert.Equal(t, conditionOf(fn, v1alpha2.ConditionRunning), conditionOf(e.function(t, ns, "hello"), v1alpha2.ConditionRunning))
			after := e.writes.of(ns, "hello")["patch/status *v1alpha2.Function"]
			assert.LessOrEqual(t, after-before, 2, "the cause is written once (and the build's end before it)")
			if tc.status == corev1.ConditionFalse {
				e.waitWarnings(t, ns, "hello", tc.reason, 1)
			}

			// The cause fixed: the Function runs.
			e.readyDeployment(t, e.deployments(t, ns, "hello")[0])
			e.waitCondition(t, ns, "hello", v1alpha2.ConditionRunning, corev1.ConditionTrue, v1alpha2.ReasonDeploymentReady)
		})
	}
}

// causeNamespace is a new namespace with the ServiceAccount "default",
// which admission requires of a Pod (no controller makes it in envtest).
func (e *env) causeNamespace(t *testing.T, name string) string {
	t.Helper()
	ns := e.namespace(t, name)
	require.NoError(t, e.c.Create(context.Background(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"}}))
	return ns
}

// waitJob waits for the Function's one build Job.
func (e *env) waitJob(t *testing.T, ns, name string) batchv1.Job {
	t.Helper()
	return waitOne(t, func(c require.TestingT) []batchv1.Job { return e.jobs(c, ns, name) })
}

// finishEveryBuild completes the builds of the Functions of ns until each
// is built (a queued one starts as another ends), so the build slots are
// free for the next case.
func (e *env) finishEveryBuild(t *testing.T, ns string, names ...string) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		e.finishAll(t, ns)
		for _, n := range names {
			assert.Equal(c, corev1.ConditionTrue, conditionOf(e.function(c, ns, n), v1alpha2.ConditionBuildReady).Status, n)
		}
	}, eventual, 200*time.Millisecond)
}

// buildPod creates job's Pod as the Job controller does, with the status
// condition the scheduler gave it.
func (e *env) buildPod(t *testing.T, job batchv1.Job, scheduled corev1.PodCondition) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	labels := map[string]string{batchv1.JobNameLabel: job.Name, batchv1.ControllerUidLabel: string(job.UID)}
	for k, v := range job.Spec.Template.Labels {
		labels[k] = v
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: job.Namespace, Name: job.Name + "-7xk2p", Labels: labels,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID, Controller: ptr.To(true)}}},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "build", Image: "example.org/build:1"}}},
	}
	require.NoError(t, e.c.Create(ctx, pod))
	scheduled.LastTransitionTime = metav1.Now()
	pod.Status = corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{scheduled}}
	require.NoError(t, e.c.Status().Update(ctx, pod))
	return pod
}

// jobEvent records a Warning event on job as the Job controller does
// (core/v1, through its recorder).
func (e *env) jobEvent(t *testing.T, job batchv1.Job, reason, message string) {
	t.Helper()
	now := metav1.Now()
	require.NoError(t, e.c.Create(context.Background(), &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: job.Namespace, Name: fmt.Sprintf("%s.%x", job.Name, now.UnixNano())},
		InvolvedObject: corev1.ObjectReference{APIVersion: "batch/v1", Kind: "Job", Namespace: job.Namespace, Name: job.Name,
			UID: job.UID, ResourceVersion: job.ResourceVersion},
		Reason: reason, Message: message, Type: corev1.EventTypeWarning, Count: 1,
		FirstTimestamp: now, LastTimestamp: now, Source: corev1.EventSource{Component: "job-controller"},
	}))
}

// waitingDeployment gives dep the status of a rollout that made no
// progress for a while, and creates its ReplicaSet; refused is the
// ReplicaSet's ReplicaFailure message ("": none).
func (e *env) waitingDeployment(t *testing.T, dep *appsv1.Deployment, refused string) *appsv1.ReplicaSet {
	t.Helper()
	ctx := context.Background()
	since := metav1.NewTime(time.Now().Add(-10 * time.Second))
	dep.Status = appsv1.DeploymentStatus{ObservedGeneration: dep.Generation, Replicas: 1, UpdatedReplicas: 1, UnavailableReplicas: 1,
		Conditions: []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionFalse, Reason: "MinimumReplicasUnavailable", Message: "Deployment does not have minimum availability.", LastUpdateTime: since, LastTransitionTime: since},
			{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "ReplicaSetUpdated", Message: "ReplicaSet is progressing.", LastUpdateTime: since, LastTransitionTime: since},
		}}
	require.NoError(t, e.c.Status().Update(ctx, dep))
	labels := map[string]string{appsv1.DefaultDeploymentUniqueLabelKey: "5d8f7"}
	for k, v := range dep.Spec.Template.Labels {
		labels[k] = v
	}
	template := *dep.Spec.Template.DeepCopy()
	template.Labels = labels
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: dep.Namespace, Name: dep.Name + "-5d8f7", Labels: labels,
			Annotations:     map[string]string{"deployment.kubernetes.io/revision": "1"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: dep.Name, UID: dep.UID, Controller: ptr.To(true)}}},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: template},
	}
	require.NoError(t, e.c.Create(ctx, rs))
	rs.Status = appsv1.ReplicaSetStatus{Replicas: 1, ObservedGeneration: rs.Generation}
	if refused != "" {
		rs.Status.Replicas = 0
		rs.Status.Conditions = []appsv1.ReplicaSetCondition{{Type: appsv1.ReplicaSetReplicaFailure, Status: corev1.ConditionTrue,
			Reason: "FailedCreate", Message: refused, LastTransitionTime: metav1.Now()}}
	}
	require.NoError(t, e.c.Status().Update(ctx, rs))
	return rs
}

// replicaPod creates a Pod of rs with the given conditions and, if not
// nil, the function container's status.
func (e *env) replicaPod(t *testing.T, rs *appsv1.ReplicaSet, name string, conditions []corev1.PodCondition, container *corev1.ContainerStatus) {
	t.Helper()
	ctx := context.Background()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: rs.Namespace, Name: name, Labels: rs.Spec.Template.Labels,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: ptr.To(true)}}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "function", Image: "registry.example:5000/hello:1"}}},
	}
	require.NoError(t, e.c.Create(ctx, pod))
	pod.Status = corev1.PodStatus{Phase: corev1.PodPending, Conditions: conditions}
	if container != nil {
		pod.Status.Conditions = append(pod.Status.Conditions,
			corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
			corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "ContainersNotReady",
				LastTransitionTime: metav1.NewTime(time.Now().Add(-2 * time.Minute))})
		pod.Status.ContainerStatuses = []corev1.ContainerStatus{*container}
	}
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].LastTransitionTime.IsZero() {
			pod.Status.Conditions[i].LastTransitionTime = metav1.Now()
		}
	}
	require.NoError(t, e.c.Status().Update(ctx, pod))
}

// waitWarnings waits until the Function has want Warning events of
// reason (the recorder sends them in the background), and checks that no
// more come.
func (e *env) waitWarnings(t *testing.T, ns, name, reason string, want int) {
	t.Helper()
	count := func(c require.TestingT) int {
		var events corev1.EventList
		require.NoError(c, e.c.List(context.Background(), &events, client.InNamespace(ns)))
		n := 0
		for _, ev := range events.Items {
			if ev.InvolvedObject.Kind == "Function" && ev.InvolvedObject.Name == name && ev.Reason == reason && ev.Type == corev1.EventTypeWarning {
				n++
			}
		}
		return n
	}
	require.EventuallyWithT(t, func(c *assert.CollectT) { assert.Equal(c, want, count(c)) }, eventual, tick)
	assert.Never(t, func() bool { return count(t) != want }, time.Second, 100*time.Millisecond)
}
