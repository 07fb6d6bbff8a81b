package reconciler

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/internal/function/resources"
)

func failedJob(fn *v1alpha2.Function, failedAt time.Time) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "hello-build-x", Labels: resources.FunctionLabels(fn),
			Annotations: map[string]string{AnnotationGeneration: "1"}},
		Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{{
			Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit",
			LastTransitionTime: metav1.NewTime(failedAt),
		}}},
	}
}

func TestRetryIn(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		edit func(fn *v1alpha2.Function, j *batchv1.Job)
		want time.Duration
	}{
		{"within the backoff", func(*v1alpha2.Function, *batchv1.Job) {}, 20 * time.Second},
		{"backoff over", func(_ *v1alpha2.Function, j *batchv1.Job) {
			j.Status.Conditions[0].LastTransitionTime = metav1.NewTime(now.Add(-time.Minute))
		}, 0},
		{"Function spec changed since", func(fn *v1alpha2.Function, _ *batchv1.Job) { fn.Generation = 2 }, 0},
		{"Function labels changed since", func(fn *v1alpha2.Function, _ *batchv1.Job) {
			fn.Labels = map[string]string{"local.serverless.kyma-project.io/build": "ok"}
		}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fn := newFunction("hello")
			j := failedJob(fn, now.Add(-10*time.Second))
			tt.edit(fn, j)
			assert.Equal(t, tt.want, retryIn(j, jobCondition(j, batchv1.JobFailed), fn, 30*time.Second, now))
		})
	}
}

func TestJobFailure(t *testing.T) {
	assert.Equal(t, "DeadlineExceeded: Job was active longer than specified deadline",
		jobFailure(&batchv1.JobCondition{Reason: "DeadlineExceeded", Message: "Job was active longer than specified deadline"}))
	assert.Equal(t, "PodFailurePolicy", jobFailure(&batchv1.JobCondition{Reason: "PodFailurePolicy"}))
	assert.Equal(t, "no reason given", jobFailure(&batchv1.JobCondition{}))
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
