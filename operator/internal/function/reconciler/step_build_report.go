package reconciler

import (
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/internal/function/resources"
)

// reportBuild is the one place the build step writes the status: BuildReady
// from what the step found, and the images that go with it. A failed Job is
// written first, also when the pass retries it at once (the condition
// passes through False). What the status already says stands where it is
// still true: a finished build's True BuildReady, a running Job reported
// once (again after a cause of its Pod), a queued build's place while it
// waits the same way (queuedPlaceFresh: a burst of queued Functions costs
// one status write each, not one per pass while the queue moves).
// status.runtimeImage names the base of a build that exists (created,
// running or done), status.builtImage the image built; a Job that starts
// or runs is news that may wait (buildReportWait).
func reportBuild(p *pass, report buildReport) {
	st := &p.status
	if f := report.failed; f != nil {
		setCondition(st, v1alpha2.ConditionBuildReady, f.status, f.reason, f.message, p.now)
	}
	state := report.state
	if state == nil {
		return
	}
	cur, msg := st.Condition(v1alpha2.ConditionBuildReady), state.message
	write, usesBase, waits, since := true, false, false, p.now.Time
	switch state.reason {
	case v1alpha2.ReasonJobFinished:
		st.BuiltImage = resources.RunImage(p.in)
		write, usesBase = cur == nil || cur.Status != corev1.ConditionTrue, true
	case v1alpha2.ReasonJobRunning:
		write = cur == nil || cur.Status != corev1.ConditionUnknown || cur.Reason == v1alpha2.ReasonJobPodUnschedulable ||
			!strings.Contains(cur.Message, report.running.Name)
		usesBase, waits, since = write, true, report.running.CreationTimestamp.Time
	case v1alpha2.ReasonJobCreated:
		usesBase, waits = true, true
	case v1alpha2.ReasonJobPodUnschedulable, v1alpha2.ReasonJobPodRefused:
		usesBase = true
	case v1alpha2.ReasonJobQueued:
		if cur != nil && cur.Reason == v1alpha2.ReasonJobQueued && queuedPlaceFresh(cur.Message, msg) {
			msg = cur.Message
		}
	}
	if usesBase {
		st.RuntimeImage = resources.RuntimeImage(p.in)
	}
	if !write {
		return
	}
	setCondition(st, v1alpha2.ConditionBuildReady, state.status, state.reason, msg, p.now)
	if waits {
		p.buildReportIn = buildReportWait(p, since)
	}
}

// buildReportWait is how long a status whose only news is that a build Job
// created at created runs may stay unwritten: the rest of
// progressReportDelay, or 0 when the status reports a failure (its end is
// news: a fixed Git password, a fixed dependency, written at once).
func buildReportWait(p *pass, created time.Time) time.Duration {
	for _, c := range p.fn.Status.Conditions {
		if c.Status == corev1.ConditionFalse {
			return 0
		}
	}
	return max(0, progressReportDelay-p.now.Sub(created))
}
