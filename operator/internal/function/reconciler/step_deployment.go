package reconciler

import (
	"context"
	"fmt"
	"maps"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/internal/function/resources"
	"github.com/kyma-project/serverless-manager/operator/internal/steps"
)

// deployment keeps exactly one Deployment. Before the first build finished
// there is none, and the pass ends here. While a rebuild runs, a Deployment
// on an earlier build of the Function keeps its image but gets every other
// change (env, replicas, resources…), so those never wait for a build (1.8.4
// held them back); one on another image (a runtime change, buildless mode)
// waits for the build. A scale-to-zero Function's drop to 0 replicas waits
// for the drain (holdReplicas). Extra Deployments
// are deleted, keeping the one with the expected image (else the oldest).
func (r *Reconciler) deployment(ctx context.Context, p *pass) (steps.Outcome, error) {
	keep := pickDeployment(p.deployments, p.pullImage)
	for i := range p.deployments {
		if &p.deployments[i] != keep {
			if err := r.remove(ctx, &p.deployments[i]); err != nil {
				return steps.Outcome{}, err
			}
		}
	}
	if keep == nil && !p.built {
		return steps.Stop(), nil
	}
	desired := resources.Deployment(p.in)
	if !p.built && liveRuntime(keep) != string(p.fn.Spec.Runtime) {
		// A runtime change: the old image cannot run with the new runtime's
		// settings; the Deployment waits for the build.
		p.deployment = keep
		return steps.Next(), nil
	}
	if !p.built {
		c := keep.Spec.Template.Spec.Containers
		if len(c) == 0 {
			return steps.Stop(), nil // not a Deployment this controller made; wait for the build
		}
		if !resources.BuiltForFunction(c[0].Image, p.in) {
			// Not a build of this Function (buildless mode's runtime image,
			// another registry): its Pods' settings belong to that image, so
			// the Deployment waits for the build and then rolls once.
			p.deployment = keep
			return steps.Next(), nil
		}
		desired.Spec.Template.Spec.Containers[0].Image = c[0].Image
	}
	if keep == nil {
		if err := r.create(ctx, desired); err != nil {
			return r.deploymentFailed(p, "create", err)
		}
		p.deployment, p.rolled = desired, v1alpha2.ReasonDeploymentCreated
		podStatus(p)
		return steps.Next(), nil
	}
	p.deployment = keep
	recheck, err := r.drain(ctx, p, keep, desired)
	if err != nil {
		return steps.Outcome{}, err
	}
	updated, changed := resources.UpdateDeployment(keep, desired)
	if !changed {
		podStatus(p)
		return steps.Next().Within(recheck), nil
	}
	// A replicas-only change (kubectl scale, HPA) is no rollout.
	rolled := !equality.Semantic.DeepEqual(keep.Spec.Template, updated.Spec.Template)
	if err := r.update(ctx, updated); err != nil {
		out, err := r.deploymentFailed(p, "update", err)
		return out.Within(recheck), err
	}
	if rolled {
		p.rolled = v1alpha2.ReasonDeploymentUpdated
	}
	p.deployment = updated
	podStatus(p)
	return steps.Next().Within(recheck), nil
}

// podStatus records what the Deployment now gives the Function's Pods, in
// release 1.13's status fields: the spec.annotations on the Pod template
// and both security contexts in effect.
func podStatus(p *pass) {
	p.status.FunctionAnnotations = maps.Clone(p.fn.Spec.Annotations)
	if len(p.status.FunctionAnnotations) == 0 {
		p.status.FunctionAnnotations = nil
	}
	p.status.PodSecurityContext = resources.PodSecurityContext(p.fn)
	p.status.ContainerSecurityContext = resources.ContainerSecurityContext(p.fn)
}

// deploymentFailed turns a rejected Deployment into Running False
// DeploymentFailed (no retry: the Function must change); other errors are
// returned for a retry with backoff.
func (r *Reconciler) deploymentFailed(p *pass, verb string, err error) (steps.Outcome, error) {
	if !apierrors.IsInvalid(err) && !apierrors.IsBadRequest(err) {
		return steps.Outcome{}, fmt.Errorf("%s the Deployment: %w", verb, err)
	}
	setCondition(&p.status, v1alpha2.ConditionRunning, corev1.ConditionFalse, v1alpha2.ReasonDeploymentFailed,
		fmt.Sprintf("the Deployment could not be %sd: %v", verb, err), p.now)
	return steps.Fail(v1alpha2.ReasonDeploymentFailed), nil
}

// pickDeployment returns the Deployment to keep: the oldest running image,
// else the oldest; nil when there is none.
func pickDeployment(deps []appsv1.Deployment, image string) *appsv1.Deployment {
	for i := range deps {
		if c := deps[i].Spec.Template.Spec.Containers; len(c) > 0 && resources.SameImage(c[0].Image, image) {
			return &deps[i]
		}
	}
	if len(deps) > 0 {
		return &deps[0]
	}
	return nil
}

// liveRuntime is the FUNC_RUNTIME a Deployment's function container runs with.
func liveRuntime(dep *appsv1.Deployment) string {
	for _, c := range dep.Spec.Template.Spec.Containers {
		for _, e := range c.Env {
			if e.Name == "FUNC_RUNTIME" {
				return e.Value
			}
		}
	}
	return ""
}
