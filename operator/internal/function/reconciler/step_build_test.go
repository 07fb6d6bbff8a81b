package reconciler

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/internal/function/resources"
)

// reportBuild is the one writer of BuildReady: what the status already
// says stands where it is still true, and a failed Job retried in the same
// pass moves lastTransitionTime as the False it passed through.
func TestReportBuild(t *testing.T) {
	t0 := metav1.Date(2026, 2, 1, 12, 0, 0, 0, time.UTC)
	now := metav1.NewTime(t0.Add(time.Minute))
	running := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "hello-build-x", CreationTimestamp: metav1.NewTime(now.Add(-2 * time.Second))}}
	state := func(status corev1.ConditionStatus, reason, msg string) *cause { return &cause{status, reason, msg} }
	tests := []struct {
		name   string
		before *cause // BuildReady before the pass (nil: none)
		report buildReport
		// want is BuildReady after; moved: its lastTransitionTime is now.
		want          cause
		moved         bool
		runtimeImage  bool // status.runtimeImage set to the build's base
		builtImage    bool
		buildReportIn time.Duration
	}{
		{name: "a Job created", before: state(corev1.ConditionUnknown, v1alpha2.ReasonJobWaiting, "waiting"),
			report: buildReport{state: state(corev1.ConditionUnknown, v1alpha2.ReasonJobCreated, "Job hello-build-x created")},
			want:   cause{corev1.ConditionUnknown, v1alpha2.ReasonJobCreated, "Job hello-build-x created"}, runtimeImage: true, buildReportIn: progressReportDelay},
		{name: "a failed Job retried at once passes through False", before: state(corev1.ConditionUnknown, v1alpha2.ReasonJobRunning, "Job hello-build-w is still in progress"),
			report: buildReport{failed: state(corev1.ConditionFalse, v1alpha2.ReasonJobFailed, "Job hello-build-w failed"),
				state: state(corev1.ConditionUnknown, v1alpha2.ReasonJobCreated, "Job hello-build-x created")},
			want: cause{corev1.ConditionUnknown, v1alpha2.ReasonJobCreated, "Job hello-build-x created"}, moved: true, runtimeImage: true, buildReportIn: progressReportDelay},
		{name: "a failed Job waiting for its retry", before: state(corev1.ConditionUnknown, v1alpha2.ReasonJobRunning, "Job hello-build-w is still in progress"),
			report: buildReport{failed: state(corev1.ConditionFalse, v1alpha2.ReasonJobFailed, "Job hello-build-w failed")},
			want:   cause{corev1.ConditionFalse, v1alpha2.ReasonJobFailed, "Job hello-build-w failed"}, moved: true},
		{name: "finished, already True: the message stands", before: state(corev1.ConditionTrue, v1alpha2.ReasonJobFinished, "Job hello-build-w finished"),
			report: buildReport{state: state(corev1.ConditionTrue, v1alpha2.ReasonJobFinished, "Image x built")},
			want:   cause{corev1.ConditionTrue, v1alpha2.ReasonJobFinished, "Job hello-build-w finished"}, runtimeImage: true, builtImage: true},
		{name: "finished", before: state(corev1.ConditionUnknown, v1alpha2.ReasonJobRunning, "Job hello-build-x is still in progress"),
			report: buildReport{state: state(corev1.ConditionTrue, v1alpha2.ReasonJobFinished, "Job hello-build-x finished")},
			want:   cause{corev1.ConditionTrue, v1alpha2.ReasonJobFinished, "Job hello-build-x finished"}, moved: true, runtimeImage: true, builtImage: true},
		{name: "running, reported as created: no news", before: state(corev1.ConditionUnknown, v1alpha2.ReasonJobCreated, "Job hello-build-x created"),
			report: buildReport{state: state(corev1.ConditionUnknown, v1alpha2.ReasonJobRunning, "Job hello-build-x is still in progress"), running: running},
			want:   cause{corev1.ConditionUnknown, v1alpha2.ReasonJobCreated, "Job hello-build-x created"}},
		{name: "running once its Pod is placed", before: state(corev1.ConditionUnknown, v1alpha2.ReasonJobPodUnschedulable, "Job hello-build-x: Pod p is not placed: no node"),
			report: buildReport{state: state(corev1.ConditionUnknown, v1alpha2.ReasonJobRunning, "Job hello-build-x is still in progress"), running: running},
			want:   cause{corev1.ConditionUnknown, v1alpha2.ReasonJobRunning, "Job hello-build-x is still in progress"}, runtimeImage: true, buildReportIn: progressReportDelay - 2*time.Second},
		{name: "its Pod refused", before: state(corev1.ConditionUnknown, v1alpha2.ReasonJobCreated, "Job hello-build-x created"),
			report: buildReport{state: state(corev1.ConditionFalse, v1alpha2.ReasonJobPodRefused, "Job hello-build-x cannot create its Pod: quota")},
			want:   cause{corev1.ConditionFalse, v1alpha2.ReasonJobPodRefused, "Job hello-build-x cannot create its Pod: quota"}, moved: true, runtimeImage: true},
		{name: "queued: the place reported stands", before: state(corev1.ConditionUnknown, v1alpha2.ReasonJobQueued, "queued behind the build limit: 2 of 2 builds running, 5 ahead of it in the queue"),
			report: buildReport{state: state(corev1.ConditionUnknown, v1alpha2.ReasonJobQueued, "queued behind the build limit: 2 of 2 builds running, 3 ahead of it in the queue")},
			want:   cause{corev1.ConditionUnknown, v1alpha2.ReasonJobQueued, "queued behind the build limit: 2 of 2 builds running, 5 ahead of it in the queue"}},
		{name: "queued: paused now", before: state(corev1.ConditionUnknown, v1alpha2.ReasonJobQueued, "queued behind the build limit: 2 of 2 builds running, 5 ahead of it in the queue"),
			report: buildReport{state: state(corev1.ConditionUnknown, v1alpha2.ReasonJobQueued, "queued: builds are paused while the internal registry is cleaned up, 3 ahead of it in the queue")},
			want:   cause{corev1.ConditionUnknown, v1alpha2.ReasonJobQueued, "queued: builds are paused while the internal registry is cleaned up, 3 ahead of it in the queue"}},
		{name: "nothing found: as it was", before: state(corev1.ConditionUnknown, v1alpha2.ReasonJobRunning, "Job hello-build-x is still in progress"),
			want: cause{corev1.ConditionUnknown, v1alpha2.ReasonJobRunning, "Job hello-build-x is still in progress"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fn := newFunction("hello")
			setCondition(&fn.Status, v1alpha2.ConditionBuildReady, tt.before.status, tt.before.reason, tt.before.message, t0)
			cfg := testConfig(t)
			p := newPass(fn, &cfg, now)
			p.in.Registry = resources.Registry{PushAddress: "push.example", PullAddress: "pull.example"}
			p.in.BaseImage, p.in.Digest = "example.org/runtime:2", "sha256:1"

			reportBuild(p, tt.report)

			c := p.status.Condition(v1alpha2.ConditionBuildReady)
			assert.Equal(t, tt.want, cause{c.Status, c.Reason, c.Message})
			wantTime := t0
			if tt.moved {
				wantTime = now
			}
			assert.Equal(t, wantTime, c.LastTransitionTime, "lastTransitionTime")
			wantRuntime, wantBuilt := "", ""
			if tt.runtimeImage {
				wantRuntime = "example.org/runtime:2"
			}
			if tt.builtImage {
				wantBuilt = resources.PullImage(p.in) + "@sha256:1"
			}
			assert.Equal(t, wantRuntime, p.status.RuntimeImage, "status.runtimeImage")
			assert.Equal(t, wantBuilt, p.status.BuiltImage, "status.builtImage")
			assert.Equal(t, tt.buildReportIn, p.buildReportIn, "status write deferred")
		})
	}
}
