package reconciler

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/internal/function/resources"
)

// The build Job as the build step sees it, in the order the step reads it:
// the Jobs a pass finds and their state (conditions, Pods), a failed one's
// retry, why a running one waits (its Pod, its events), and the one the
// step creates (its spec is resources.BuildJob's).

// buildJobs is what a pass finds of a Function's build Jobs.
type buildJobs struct {
	// current is the newest Job pushing to the expected image (nil: none).
	current *batchv1.Job
	// complete and failed are current's True Complete and Failed
	// conditions (nil: not so).
	complete, failed *batchv1.JobCondition
	// pod is what current's newest Pod reported; podSeen is false when the
	// cache has none (simulated away, or removed with an old Job).
	pod     resources.BuildOutcome
	podSeen bool
	// unfinished are the Jobs pushing elsewhere that still run: builds of
	// an older input, which push images nobody uses and hold slots.
	unfinished []*batchv1.Job
}

// readBuildJobs reads the pass's build Jobs and Pods for the image it
// expects to push.
func readBuildJobs(p *pass) buildJobs {
	var found buildJobs
	for i := range p.jobs {
		j := &p.jobs[i]
		switch {
		case resources.JobDestination(j) == p.pushImage:
			found.current = j // sorted oldest first: the last is the newest
		case !jobDone(j):
			found.unfinished = append(found.unfinished, j)
		}
	}
	if found.current != nil {
		found.complete = jobCondition(found.current, batchv1.JobComplete)
		found.failed = jobCondition(found.current, batchv1.JobFailed)
		found.pod, found.podSeen = newestPodOutcome(p.buildPods, found.current)
	}
	return found
}

// jobDone reports whether a Job has finished, either way.
func jobDone(j *batchv1.Job) bool {
	return jobCondition(j, batchv1.JobComplete) != nil || jobCondition(j, batchv1.JobFailed) != nil
}

// jobCondition returns the Job's condition t if it is True.
func jobCondition(j *batchv1.Job, t batchv1.JobConditionType) *batchv1.JobCondition {
	for i := range j.Status.Conditions {
		if c := &j.Status.Conditions[i]; c.Type == t && c.Status == corev1.ConditionTrue {
			return c
		}
	}
	return nil
}

// newestPodOutcome reads the newest Pod of job; seen is false when there
// is none.
func newestPodOutcome(pods []corev1.Pod, job *batchv1.Job) (out resources.BuildOutcome, seen bool) {
	var newest *corev1.Pod
	for i := range pods {
		if pods[i].Labels[resources.LabelJobName] == job.Name &&
			(newest == nil || newest.CreationTimestamp.Before(&pods[i].CreationTimestamp)) {
			newest = &pods[i]
		}
	}
	if newest == nil {
		return out, false
	}
	return resources.ReadBuildPod(newest), true
}

// failureMessage says how the current Job failed: its condition, and the
// step that failed with its message when its Pod reported one.
func (j buildJobs) failureMessage() string {
	msg := fmt.Sprintf("Job %s failed, it will be re-run: %s", j.current.Name, jobFailure(j.failed))
	if j.pod.FailedStep != "" {
		msg += fmt.Sprintf("; step %s: %s", j.pod.FailedStep, j.pod.Failure)
	}
	return msg
}

// jobFailure describes a Job failure by its condition.
func jobFailure(c *batchv1.JobCondition) string {
	switch {
	case c.Reason != "" && c.Message != "":
		return c.Reason + ": " + c.Message
	case c.Reason != "":
		return c.Reason
	case c.Message != "":
		return c.Message
	}
	return "no reason given"
}

// retry decides whether a failed build (any Job failure reason; 1.8.4 saw
// only BackoffLimitExceeded) runs again now: after the backoff (wait, > 0,
// until then), or at once when the Function changed since the Job was
// created or the internal registry became ready again after the failure
// (wait 0). A retry deletes the Job.
func (r *Reconciler) retry(ctx context.Context, p *pass, jobs buildJobs) (wait time.Duration, err error) {
	if wait = retryIn(jobs.current, jobs.failed, p.fn, r.retries.delay(p.key, r.cfg.GitFetchRequeueDuration), p.now.Time); wait > 0 {
		back, err := r.registryBackAfter(ctx, p, failedAt(jobs.current, jobs.failed))
		if err != nil || !back {
			return wait, err
		}
	}
	r.retries.retried(p.key)
	return 0, r.remove(ctx, jobs.current)
}

// retryIn is how long a failed build waits before its retry: 0 when the
// Function changed since the Job was created (generation or labels), else
// what remains of delay after the failure.
func retryIn(job *batchv1.Job, failed *batchv1.JobCondition, fn *v1alpha2.Function, delay time.Duration, now time.Time) time.Duration {
	if job.Annotations[AnnotationGeneration] != strconv.FormatInt(fn.Generation, 10) ||
		!maps.Equal(job.Labels, resources.FunctionLabels(fn)) {
		return 0
	}
	return max(0, failedAt(job, failed).Add(delay).Sub(now))
}

// failedAt is when the Job failed: its Failed condition's transition, or
// its creation when the condition has no time.
func failedAt(job *batchv1.Job, failed *batchv1.JobCondition) time.Time {
	if at := failed.LastTransitionTime.Time; !at.IsZero() {
		return at
	}
	return job.CreationTimestamp.Time
}

// AnnotationGeneration on a build Job (newBuildJob) records the Function
// generation it was created for: a failed build is retried at once when the Function has
// changed since, instead of after the backoff.
const AnnotationGeneration = "serverless.kyma-project.io/function-generation"

// runningState says why a build Job that has not ended does not run when
// the cluster says so (buildCause: its Pod not placed, with the
// scheduler's message, from the cache of build Pods; its Pod refused, with
// the API server's answer), else that it runs (running is then the Job).
// recheck is when to look again (0: on the Job's or its Pod's next change).
func (r *Reconciler) runningState(ctx context.Context, p *pass, job *batchv1.Job) (state *cause, running *batchv1.Job, recheck time.Duration) {
	refusal, recheck, err := r.podRefusal(ctx, p, job)
	if err != nil {
		// Only the cause is lost; the next look reads again.
		logr.FromContextOrDiscard(ctx).Info("reading the events of a build Job without a Pod failed", "job", job.Name, "error", err.Error())
	}
	if found := buildCause(job, p.buildPods, refusal); found != nil {
		return found, nil, recheck
	}
	return &cause{corev1.ConditionUnknown, v1alpha2.ReasonJobRunning, fmt.Sprintf("Job %s is still in progress", job.Name)}, job, recheck
}

// Reads of a build Job's refused Pods, from the API server: the Job
// controller reports them only as events on the Job.
// +kubebuilder:rbac:groups="",resources=events,verbs=list

// podRefusal returns the newest FailedCreate event of a build Job that
// has had no Pod for lookAfter: the Job controller creates a Pod within
// moments, so a Job without one was most likely refused (a ResourceQuota,
// a LimitRange). Only such a Job is read, and again at growing intervals
// while it stays so; a Job with a Pod costs no request. recheck is when to
// look again (0: no need).
func (r *Reconciler) podRefusal(ctx context.Context, p *pass, job *batchv1.Job) (_ *corev1.Event, recheck time.Duration, _ error) {
	if r.api == nil || job.Status.Active > 0 || len(jobPods(job, p.buildPods)) > 0 {
		return nil, 0, nil
	}
	waited := p.now.Sub(job.CreationTimestamp.Time)
	if waited < lookAfter {
		return nil, lookAfter - waited, nil
	}
	recheck = min(max(waited/2, minPollInterval), maxPollInterval)
	var events corev1.EventList
	if err := r.api.List(ctx, &events, client.InNamespace(job.Namespace),
		client.MatchingFields{"involvedObject.uid": string(job.UID), "reason": failedCreate}); err != nil {
		return nil, recheck, fmt.Errorf("listing the events of Job %s: %w", job.Name, err)
	}
	return newestRefusal(events.Items), recheck, nil
}

// jobPods are the Pods of job that are not being deleted.
func jobPods(job *batchv1.Job, pods []corev1.Pod) []*corev1.Pod {
	var out []*corev1.Pod
	for i := range pods {
		if pods[i].Labels[resources.LabelJobName] == job.Name && pods[i].DeletionTimestamp == nil {
			out = append(out, &pods[i])
		}
	}
	return out
}

// newestRefusal is the newest Warning event FailedCreate among events, or
// nil.
func newestRefusal(events []corev1.Event) *corev1.Event {
	var newest *corev1.Event
	for i := range events {
		e := &events[i]
		if e.Reason != failedCreate || e.Type != corev1.EventTypeWarning {
			continue
		}
		if newest == nil || lastSeen(e).After(lastSeen(newest)) {
			newest = e
		}
	}
	return newest
}

// lastSeen is when an event last happened, in whichever field its
// recorder filled (core/v1 recorders: lastTimestamp; events.k8s.io:
// series or eventTime).
func lastSeen(e *corev1.Event) time.Time {
	var t time.Time
	for _, c := range []time.Time{e.CreationTimestamp.Time, e.FirstTimestamp.Time, e.LastTimestamp.Time, e.EventTime.Time} {
		if c.After(t) {
			t = c
		}
	}
	if e.Series != nil && e.Series.LastObservedTime.After(t) {
		t = e.Series.LastObservedTime.Time
	}
	return t
}

// buildCause names why job's build does not run, or returns nil: its Pod
// not placed, with the scheduler's message, or, while it has no Pod, the
// API server's answer to the last try to create one (refusal, the newest
// FailedCreate event of the Job; nil if none).
func buildCause(job *batchv1.Job, pods []corev1.Pod, refusal *corev1.Event) *cause {
	live := jobPods(job, pods)
	for _, pod := range live {
		if c := unschedulable(pod); c != nil {
			return &cause{corev1.ConditionUnknown, v1alpha2.ReasonJobPodUnschedulable,
				fmt.Sprintf("Job %s: Pod %s%s%s", job.Name, pod.Name, v1alpha2.NotPlacedSeparator, c.Message)}
		}
	}
	if len(live) > 0 || refusal == nil {
		return nil
	}
	// The controllers prefix the API server's answer with their own words.
	answer := strings.TrimPrefix(refusal.Message, "Error creating: ")
	return &cause{corev1.ConditionFalse, v1alpha2.ReasonJobPodRefused,
		fmt.Sprintf("Job %s cannot create its Pod: %s", job.Name, answer)}
}

// newBuildJob is the build Job to create for the pass's inputs.
func newBuildJob(p *pass) *batchv1.Job {
	job := resources.BuildJob(p.in, p.sourceConfigMap)
	if job.Annotations == nil {
		job.Annotations = map[string]string{}
	}
	job.Annotations[AnnotationGeneration] = strconv.FormatInt(p.fn.Generation, 10)
	return job
}
