package reconciler

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/internal/function/resources"
	"github.com/kyma-project/serverless-manager/operator/internal/steps"
)

// The build step, in the order it runs: the image it expects (this file),
// its Jobs (step_build_job.go), a new Job when none runs
// (step_build_start.go, with the registry's wait in step_build_registry.go
// and the slots in step_build_slots.go), and the one status write of what
// it found (step_build_report.go).

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
	report, out, err := r.buildState(ctx, p)
	reportBuild(p, report)
	return out, err
}

// buildReport is what the build step found, for reportBuild to write.
type buildReport struct {
	// failed: the current Job failed. It is written also when the pass
	// retries the build at once and state follows.
	failed *cause
	// state is where the build is now (nil: BuildReady stays as it is).
	state *cause
	// running is the Job a JobRunning state is about.
	running *batchv1.Job
}

// buildState does what the build needs now (removes builds of an older
// input, retries a failed one, starts one) and says where it is.
func (r *Reconciler) buildState(ctx context.Context, p *pass) (buildReport, steps.Outcome, error) {
	keepBuiltBase(p)
	known := knownImage(p)
	jobs := readBuildJobs(p)
	for _, j := range jobs.unfinished {
		if err := r.remove(ctx, j); err != nil {
			return buildReport{}, steps.Outcome{}, err
		}
	}

	var report buildReport
	switch {
	case known != "":
		msg := fmt.Sprintf("Image %s built", p.pullImage)
		if jobs.complete != nil {
			msg = fmt.Sprintf("Job %s finished", jobs.current.Name)
		}
		return r.built(p, resources.DigestOf(known), msg), steps.Next(), nil
	case jobs.current == nil:
	case jobs.complete != nil:
		if jobs.podSeen && !jobs.pod.Finished {
			// The Job's end reached the cache before its Pod's: the Pod's
			// update brings the digest, and the status with it.
			p.keepStatus = true
			return report, steps.Next(), nil
		}
		p.finishedJob = jobs.current
		return r.built(p, jobs.pod.Digest, fmt.Sprintf("Job %s finished", jobs.current.Name)), steps.Next(), nil
	case jobs.failed != nil:
		report.failed = &cause{corev1.ConditionFalse, v1alpha2.ReasonJobFailed, jobs.failureMessage()}
		wait, err := r.retry(ctx, p, jobs)
		if err != nil || wait > 0 {
			return report, steps.Next().Within(wait), err
		}
	default:
		r.slots.Leave(p.key)
		state, running, recheck := r.runningState(ctx, p, jobs.current)
		report.state, report.running = state, running
		return report, steps.Next().Within(recheck), nil
	}

	state, out, err := r.startBuild(ctx, p)
	report.state = state
	return report, out, err
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

// knownImage is the expected image as status.builtImage or a Deployment
// already has it (by tag or digest), "" when neither has it.
func knownImage(p *pass) string {
	if resources.SameImage(p.fn.Status.BuiltImage, p.pullImage) {
		return p.fn.Status.BuiltImage
	}
	running, _ := runningImage(p.deployments, p.pullImage)
	return running
}

// built records that the expected image exists, with its digest when
// known: the Deployment runs that digest.
func (r *Reconciler) built(p *pass, digest, message string) buildReport {
	p.built = true
	r.slots.Leave(p.key)
	r.retries.reset(p.key)
	p.in.Digest = digest
	return buildReport{state: &cause{corev1.ConditionTrue, v1alpha2.ReasonJobFinished, message}}
}
