package reconciler

import (
	"context"
	"maps"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/internal/function/resources"
	"github.com/kyma-project/serverless-manager/operator/internal/steps"
)

// buildlessDeployment keeps exactly one Deployment, release 1.13's for the
// Function (resources.BuildlessDeployment). One that differs from it only
// where 1.13 does not look, or only by what the API server defaults, is
// adopted as it is: no write, no Pod restarted. A replicas change only
// scales (for a scale-to-zero Function a drop to 0 after the drain,
// holdReplicas); any compared field replaces the template (the Pods roll once).
//
// A second Deployment is never created. Where several match the Function's
// labels (1.13 deletes them all and starts a new one, with downtime), the
// one already running the desired template is kept, else the oldest (it
// served longest); the others are deleted.
func (r *Reconciler) buildlessDeployment(ctx context.Context, p *pass) (steps.Outcome, error) {
	in := resources.BuildlessInputs{Function: p.fn, Config: &r.cfg, Commit: p.status.Commit, GitAuth: p.gitKeys}
	keep, desired, why := pickBuildless(p.deployments, in)
	log := logr.FromContextOrDiscard(ctx)
	for i := range p.deployments {
		if &p.deployments[i] == keep {
			continue
		}
		log.Info("deleting a duplicate Deployment of the Function", "deleted", p.deployments[i].Name, "kept", keep.Name, "why", why)
		if err := r.remove(ctx, &p.deployments[i]); err != nil {
			return steps.Outcome{}, err
		}
	}
	if keep == nil {
		if err := r.create(ctx, desired); err != nil {
			return r.deploymentFailed(p, "create", err)
		}
		p.deployment, p.rolled = desired, v1alpha2.ReasonDeploymentCreated
		buildlessPodStatus(p, desired)
		return steps.Next(), nil
	}
	p.deployment = keep
	recheck, err := r.drain(ctx, p, keep, desired)
	if err != nil {
		return steps.Outcome{}, err
	}
	updated, change := resources.UpdateBuildlessDeployment(keep, desired)
	if change.Any() {
		if err := r.update(ctx, updated); err != nil {
			out, err := r.deploymentFailed(p, "update", err)
			return out.Within(recheck), err
		}
		if change.Template {
			log.Info("Deployment updated: the Pods roll", "deployment", keep.Name, "field", change.Field)
			p.rolled = v1alpha2.ReasonDeploymentUpdated
		}
		p.deployment = updated
	}
	buildlessPodStatus(p, p.deployment)
	return steps.Next().Within(recheck), nil
}

// pickBuildless returns the Deployment to keep (nil for none), the desired
// one built against it (its foreign template annotations) and why it is
// kept. deps are oldest first.
func pickBuildless(deps []appsv1.Deployment, in resources.BuildlessInputs) (*appsv1.Deployment, *appsv1.Deployment, string) {
	if len(deps) == 0 {
		return nil, resources.BuildlessDeployment(in), ""
	}
	if len(deps) > 1 {
		for i := range deps {
			in.Live = &deps[i]
			desired := resources.BuildlessDeployment(in)
			if !resources.CompareBuildless(&deps[i], desired).Template {
				return &deps[i], desired, "the oldest that runs the Function's template: its Pods stay"
			}
		}
	}
	in.Live = &deps[0]
	return &deps[0], resources.BuildlessDeployment(in), "the oldest: it served longest"
}

// buildlessPodStatus records what the Deployment gives the Function's Pods,
// as release 1.13 does: the runtime image, the spec.annotations now on the
// Pod template (status.functionAnnotations, read by the next merge) and
// both security contexts in effect.
func buildlessPodStatus(p *pass, dep *appsv1.Deployment) {
	p.status.RuntimeImage = dep.Spec.Template.Spec.Containers[0].Image
	p.status.FunctionAnnotations = maps.Clone(p.fn.Spec.Annotations)
	if len(p.status.FunctionAnnotations) == 0 {
		p.status.FunctionAnnotations = nil
	}
	p.status.PodSecurityContext = resources.BuildlessPodSecurityContext(p.fn)
	p.status.ContainerSecurityContext = resources.BuildlessContainerSecurityContext(p.fn)
}
