package reconciler

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/internal/function/cleanup"
	"github.com/kyma-project/serverless-manager/operator/internal/function/resources"
	"github.com/kyma-project/serverless-manager/operator/internal/steps"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
)

// AnnotationGeneration on a build Job records the Function generation it
// was created for: a failed build is retried at once when the Function has
// changed since, instead of after the backoff.
const AnnotationGeneration = "serverless.kyma-project.io/function-generation"

// build makes sure the expected image exists. It is built when
// status.builtImage or a Deployment already has it (identical inputs never
// build twice, also after the Job's TTL removed it; a 1.8.4 Deployment is
// adopted without a rebuild). Otherwise the newest Job pushing to the
// expected destination decides: finished → built; failed → BuildReady
// False, retried after a backoff; running → wait for its watch event; none
// → create one if a build slot is free, else wait for one. A running Job
// that is the status's only news is reported once it is older than
// progressReportDelay, or not at all when it finishes before (a quick build
// costs no "started" status write).
func (r *Reconciler) build(ctx context.Context, p *pass) (steps.Outcome, error) {
	keepBuiltBase(p)
	current, stale := splitJobs(p.jobs, p.pushImage)
	// Unfinished builds of an older input push images nobody uses and hold slots.
	for _, j := range stale {
		if !jobDone(j) {
			if err := r.remove(ctx, j); err != nil {
				return steps.Outcome{}, err
			}
		}
	}

	known := ""
	if resources.SameImage(p.fn.Status.BuiltImage, p.pullImage) {
		known = p.fn.Status.BuiltImage
	} else if running, ok := runningImage(p.deployments, p.pullImage); ok {
		known = running
	}
	if known != "" {
		msg := fmt.Sprintf("Image %s built", p.pullImage)
		if current != nil && jobCondition(current, batchv1.JobComplete) != nil {
			msg = fmt.Sprintf("Job %s finished", current.Name)
		}
		r.built(p, resources.DigestOf(known), msg)
		return steps.Next(), nil
	}

	if current != nil {
		switch {
		case jobCondition(current, batchv1.JobComplete) != nil:
			out, seen := buildOutcome(p.buildPods, current)
			if seen && !out.Finished {
				// The Job's end reached the cache before its Pod's: the Pod's
				// update brings the digest, and the status with it.
				p.keepStatus = true
				return steps.Next(), nil
			}
			p.finishedJob = current
			r.built(p, out.Digest, fmt.Sprintf("Job %s finished", current.Name))
			return steps.Next(), nil
		case jobCondition(current, batchv1.JobFailed) != nil:
			wait, err := r.failed(ctx, p, current)
			if err != nil || wait > 0 {
				return steps.Next().Within(wait), err
			}
		default:
			r.slots.Leave(p.key)
			return steps.Next().Within(r.buildRunning(ctx, p, current)), nil
		}
	}

	if r.ownImageMissing(p, v1alpha2.ConditionBuildReady) {
		return steps.Next(), nil // the Deployment of an earlier build stays
	}
	if err := r.packageConfig(ctx, p); err != nil {
		return steps.Outcome{}, err
	}
	if wait, err := r.registryNotReady(ctx, p); err != nil || wait {
		return steps.Next().Within(registryRecheck), err
	}
	if !p.in.Registry.Internal && r.cfg.RegistryCleanupExternal {
		// The opt-in clean-up of an external registry touches only the
		// repositories recorded as the module's: this one before it is pushed to.
		record := cleanup.Repositories{Client: r.client, Namespace: r.cfg.BaseNamespace}
		if err := record.Remember(ctx, p.in.Registry.PushAddress, resources.Repository(p.fn)); err != nil {
			return steps.Outcome{}, err
		}
	}
	job := resources.BuildJob(p.in, p.sourceConfigMap)
	if job.Annotations == nil {
		job.Annotations = map[string]string{}
	}
	job.Annotations[AnnotationGeneration] = strconv.FormatInt(p.fn.Generation, 10)
	started, running, err := r.slots.Start(ctx, p.key, func() (*batchv1.Job, error) { return job, r.create(ctx, job) })
	if err != nil {
		return steps.Outcome{}, fmt.Errorf("creating the build Job: %w", err)
	}
	if !started {
		ahead, paused := r.slots.Queue(p.key)
		msg := fmt.Sprintf("queued behind the build limit: %d of %d builds running, %d ahead of it in the queue", running, r.slots.Max(), ahead)
		if paused {
			msg = fmt.Sprintf("queued: builds are paused while the internal registry is cleaned up, %d ahead of it in the queue", ahead)
		}
		if c := condition(&p.status, v1alpha2.ConditionBuildReady); c != nil && c.Reason == v1alpha2.ReasonJobQueued &&
			queuedPlaceFresh(c.Message, msg) {
			// The cause is the same: the place as reported stands, so that
			// a burst of queued Functions costs one status write each, not
			// one per pass while the queue moves.
			msg = c.Message
		}
		setCondition(&p.status, v1alpha2.ConditionBuildReady, corev1.ConditionUnknown, v1alpha2.ReasonJobQueued, msg, p.now)
		// A build's end wakes only the head of the queue (WakeHandler);
		// the others look again now and then.
		return steps.Next().Within(queueRecheck), nil
	}
	r.metrics.BuildStarted()
	p.status.RuntimeImage = resources.RuntimeImage(p.in)
	setCondition(&p.status, v1alpha2.ConditionBuildReady, corev1.ConditionUnknown, v1alpha2.ReasonJobCreated,
		fmt.Sprintf("Job %s created", job.Name), p.now)
	p.buildReportIn = buildReportWait(p, p.now.Time)
	return steps.Next(), nil
}

// queuedPlaceFresh reports whether a queued build's reported message may
// stand instead of now's: the same kind of wait (paused or behind the
// limit). The place it names only shrinks while the Function waits.
func queuedPlaceFresh(reported, now string) bool {
	kind := func(m string) string { before, _, _ := strings.Cut(m, ":"); return before }
	return kind(reported) == kind(now)
}

// queueRecheck is how often a Function queued for a build slot looks at
// its place in the queue again.
// A minute: a burst of Functions builds in about that, so a queued one
// writes its place about once more.
const queueRecheck = time.Minute

// Reads of a build Job's refused Pods, from the API server: the Job
// controller reports them only as events on the Job.
// +kubebuilder:rbac:groups="",resources=events,verbs=list

// buildRunning reports a build Job that has not ended: why its Pod does
// not run when the cluster says so (buildCause: its Pod not placed, with
// the scheduler's message, from the cache of build Pods; its Pod refused,
// with the API server's answer), else that it runs. The running Job is
// reported once (JobRunning, after progressReportDelay); a cause at once,
// and again only when it changes. It returns when to look again (0: on the
// Job's or its Pod's next change).
func (r *Reconciler) buildRunning(ctx context.Context, p *pass, job *batchv1.Job) time.Duration {
	refusal, recheck, err := r.podRefusal(ctx, p, job)
	if err != nil {
		// Only the cause is lost; the next look reads again.
		logr.FromContextOrDiscard(ctx).Info("reading the events of a build Job without a Pod failed", "job", job.Name, "error", err.Error())
	}
	if found := buildCause(job, p.buildPods, refusal); found != nil {
		p.status.RuntimeImage = resources.RuntimeImage(p.in)
		setCondition(&p.status, v1alpha2.ConditionBuildReady, found.status, found.reason, found.message, p.now)
		return recheck
	}
	c := condition(&p.status, v1alpha2.ConditionBuildReady)
	if c == nil || c.Status != corev1.ConditionUnknown || c.Reason == v1alpha2.ReasonJobPodUnschedulable || !strings.Contains(c.Message, job.Name) {
		p.status.RuntimeImage = resources.RuntimeImage(p.in)
		setCondition(&p.status, v1alpha2.ConditionBuildReady, corev1.ConditionUnknown, v1alpha2.ReasonJobRunning,
			fmt.Sprintf("Job %s is still in progress", job.Name), p.now)
		p.buildReportIn = buildReportWait(p, job.CreationTimestamp.Time)
	}
	return recheck
}

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

// registryRecheck bounds a build's wait for the internal registry when no
// change of its EndpointSlices wakes the Function: the wait is a level the
// next pass reads again, not only an edge the watch must deliver.
const registryRecheck = 10 * time.Second

// registryNotReady holds back a build that would push to the internal
// registry while its Service has no ready endpoint (a registry re-created
// by a mode switch or a reinstall, its Pod not ready yet): such a build
// cannot push, fails, and costs the Function a backoff. BuildReady says
// what the build waits for; a change of the registry's EndpointSlices
// requeues the Function, and registryRecheck at the latest (the build
// step's requeue). A Job already running is left to end as it does.
// External registries are never waited for.
func (r *Reconciler) registryNotReady(ctx context.Context, p *pass) (bool, error) {
	if !p.in.Registry.Internal {
		return false, nil
	}
	// Before the read: a change the read does not see finds the Function
	// among the waiting.
	r.registryWaits.add(p.key)
	found, err := r.moduleServiceSlices(ctx, module.RegistryServiceName)
	if err != nil {
		return false, err
	}
	if resources.ServiceHasReadyEndpoint(module.RegistryServiceName, found) {
		r.registryWaits.remove(p.key)
		return false, nil
	}
	r.slots.Leave(p.key)
	setCondition(&p.status, v1alpha2.ConditionBuildReady, corev1.ConditionUnknown, v1alpha2.ReasonJobWaiting,
		fmt.Sprintf("waiting for the internal registry %s/%s to have a ready endpoint", r.cfg.BaseNamespace, module.RegistryServiceName), p.now)
	return true, nil
}

// registryWaiters are the Functions whose build waits for the internal
// registry. A change of the registry's EndpointSlices takes them all: each
// pass adds its Function again while the wait lasts.
type registryWaiters struct {
	mu   sync.Mutex
	keys map[types.NamespacedName]struct{}
}

func newRegistryWaiters() *registryWaiters {
	return &registryWaiters{keys: map[types.NamespacedName]struct{}{}}
}

func (w *registryWaiters) add(key types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.keys[key] = struct{}{}
}

func (w *registryWaiters) remove(key types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.keys, key)
}

// take returns the waiting Functions and forgets them.
func (w *registryWaiters) take() []types.NamespacedName {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]types.NamespacedName, 0, len(w.keys))
	for k := range w.keys {
		out = append(out, k)
	}
	clear(w.keys)
	return out
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

// keepBuiltBase keeps the runtime base image a Function's image was built
// on (status.runtimeImage) while that image is still the one it would build
// from it: a module upgrade that only brings newer runtime bases rebuilds
// and rolls nothing, and a taken-over Function runs on as it did. The next
// change of the Function's inputs builds on the current base. (1.8.4
// rebuilt every Function when its bases changed.)
func keepBuiltBase(p *pass) {
	old := p.fn.Status.RuntimeImage
	if old == "" || old == p.in.BaseImage || p.fn.Spec.RuntimeImageOverride != "" {
		return
	}
	in := p.in
	in.BaseImage = old
	pull := resources.PullImage(in)
	if _, running := runningImage(p.deployments, pull); !running && !resources.SameImage(p.fn.Status.BuiltImage, pull) {
		return
	}
	p.in = in
	p.pullImage, p.pushImage = pull, resources.PushImage(in)
}

// built records that the expected image exists, with its digest when
// known: the Deployment runs that digest.
func (r *Reconciler) built(p *pass, digest, message string) {
	p.built = true
	r.slots.Leave(p.key)
	r.retries.reset(p.key)
	p.in.Digest = digest
	p.status.BuiltImage = resources.RunImage(p.in)
	p.status.RuntimeImage = resources.RuntimeImage(p.in)
	if !isTrue(&p.status, v1alpha2.ConditionBuildReady) {
		setCondition(&p.status, v1alpha2.ConditionBuildReady, corev1.ConditionTrue, v1alpha2.ReasonJobFinished, message, p.now)
	}
}

// failed reports a failed build (any Job failure reason; 1.8.4 saw only
// BackoffLimitExceeded) and
// decides whether to retry now: after the backoff (wait, > 0, until then),
// or at once when the Function changed since the Job was created (wait 0).
// A retry deletes the Job.
func (r *Reconciler) failed(ctx context.Context, p *pass, job *batchv1.Job) (wait time.Duration, err error) {
	c := jobCondition(job, batchv1.JobFailed)
	msg := fmt.Sprintf("Job %s failed, it will be re-run: %s", job.Name, jobFailure(c))
	if out, _ := buildOutcome(p.buildPods, job); out.FailedStep != "" {
		msg += fmt.Sprintf("; step %s: %s", out.FailedStep, out.Failure)
	}
	setCondition(&p.status, v1alpha2.ConditionBuildReady, corev1.ConditionFalse, v1alpha2.ReasonJobFailed, msg, p.now)
	if wait = retryIn(job, c, p.fn, r.retries.delay(p.key, r.cfg.GitFetchRequeueDuration), p.now.Time); wait > 0 {
		return wait, nil
	}
	r.retries.retried(p.key)
	return 0, r.remove(ctx, job)
}

// retryIn is how long a failed build waits before its retry: 0 when the
// Function changed since the Job was created (generation or labels), else
// what remains of delay after the failure.
func retryIn(job *batchv1.Job, failed *batchv1.JobCondition, fn *v1alpha2.Function, delay time.Duration, now time.Time) time.Duration {
	if job.Annotations[AnnotationGeneration] != strconv.FormatInt(fn.Generation, 10) ||
		!maps.Equal(job.Labels, resources.FunctionLabels(fn)) {
		return 0
	}
	at := failed.LastTransitionTime.Time
	if at.IsZero() {
		at = job.CreationTimestamp.Time
	}
	return max(0, at.Add(delay).Sub(now))
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

// splitJobs returns the newest Job pushing to destination (jobs are sorted
// oldest first) and the Jobs pushing elsewhere.
func splitJobs(jobs []batchv1.Job, destination string) (*batchv1.Job, []*batchv1.Job) {
	var current *batchv1.Job
	var stale []*batchv1.Job
	for i := range jobs {
		if resources.JobDestination(&jobs[i]) == destination {
			current = &jobs[i]
		} else {
			stale = append(stale, &jobs[i])
		}
	}
	return current, stale
}

// runningImage is the reference of image (by tag or digest) a Deployment's
// function container runs.
func runningImage(deps []appsv1.Deployment, image string) (string, bool) {
	for i := range deps {
		if c := deps[i].Spec.Template.Spec.Containers; len(c) > 0 && resources.SameImage(c[0].Image, image) {
			return c[0].Image, true
		}
	}
	return "", false
}

// buildOutcome reads the newest Pod of job; seen is false when the cache has
// none (simulated away, or removed with an old Job).
func buildOutcome(pods []corev1.Pod, job *batchv1.Job) (out resources.BuildOutcome, seen bool) {
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

// ownImageMissing reports on condition typ that the controller's own image,
// which runs the build Job's steps (and fetches Git sources), is not
// configured.
func (r *Reconciler) ownImageMissing(p *pass, typ string) bool {
	if r.cfg.Build.RepoFetcherImage != "" {
		return false
	}
	setCondition(&p.status, typ, corev1.ConditionFalse, v1alpha2.ReasonPrerequisitesMissing,
		"APP_FUNCTION_BUILD_REPO_FETCHER_IMAGE is not set: the build Job runs its steps and fetches Git sources with the controller's own image (the chart sets it)", p.now)
	return true
}

// packageConfig identifies the package registry configuration of the
// Function's namespace for the dependency key: Functions built against
// different registries or credentials never share a dependency layer.
func (r *Reconciler) packageConfig(ctx context.Context, p *pass) error {
	secret := &corev1.Secret{}
	key := client.ObjectKey{Namespace: p.fn.Namespace, Name: r.cfg.PackageRegistryConfigSecretName}
	if err := r.pkgs.Get(ctx, key, secret); err != nil {
		if apierrors.IsNotFound(err) {
			p.in.PackageConfigDigest = ""
			return nil
		}
		return fmt.Errorf("reading the package registry config %s: %w", key, err)
	}
	p.in.PackageConfigDigest = resources.PackageConfigDigest(secret)
	return nil
}
