package reconciler

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/internal/function/resources"
	"github.com/kyma-project/serverless-manager/operator/internal/steps"
	"github.com/kyma-project/serverless-manager/operator/pkg/scaletozero"
)

// service keeps the Service named after the Function, as desired makes it
// (the mode's); other Services with the Function's labels are deleted. A
// Service of that name that is not the Function's (no internal labels) is
// not taken over: Running False ServiceFailed says so. A scale-to-zero
// Function's Service loses its selector while the Function is parked
// (route); in mesh mode it has a private Service too (privateService).
func (r *Reconciler) service(desiredOf func(*pass) *corev1.Service) func(context.Context, *pass) (steps.Outcome, error) {
	return func(ctx context.Context, p *pass) (steps.Outcome, error) {
		desired := desiredOf(p)
		if scaletozero.Enabled(p.fn) {
			if out, err := r.route(ctx, p, desired); err != nil || out.Ends() {
				return out, err
			}
			return r.privateService(ctx, p)
		}
		if out, err := r.keepService(ctx, p, desired); err != nil || out.Ends() {
			return out, err
		}
		// Scale to zero turned off: the selector is back, the slice and
		// the private Service go.
		if err := r.dropSlices(ctx, p, nil); err != nil {
			return steps.Outcome{}, err
		}
		return r.privateService(ctx, p)
	}
}

func (r *Reconciler) keepService(ctx context.Context, p *pass, desired *corev1.Service) (steps.Outcome, error) {
	var live *corev1.Service
	for i := range p.services {
		if p.services[i].Name == desired.Name {
			live = &p.services[i]
			continue
		}
		if err := r.remove(ctx, &p.services[i]); err != nil {
			return steps.Outcome{}, err
		}
	}
	if live == nil {
		return r.createService(ctx, p, desired)
	}
	updated, changed := resources.UpdateService(live, desired)
	if !changed {
		return steps.Next(), nil
	}
	return r.updateService(ctx, p, updated)
}

// createService creates desired. A Service of its name that is not the
// Function's (the cache found none among its children), or one the API
// server refuses, is ServiceFailed.
func (r *Reconciler) createService(ctx context.Context, p *pass, desired *corev1.Service) (steps.Outcome, error) {
	err := r.create(ctx, desired)
	switch {
	case apierrors.IsAlreadyExists(err):
		return r.serviceFailed(p, fmt.Sprintf("Service %s create error: a Service of that name exists and does not belong to the Function", desired.Name))
	case apierrors.IsInvalid(err):
		return r.serviceFailed(p, fmt.Sprintf("Service %s create error: %v", desired.Name, err))
	case err != nil:
		return steps.Outcome{}, fmt.Errorf("creating Service %s: %w", desired.Name, err)
	}
	return steps.Next(), nil
}

// updateService writes updated; an update the API server refuses as
// invalid is ServiceFailed.
func (r *Reconciler) updateService(ctx context.Context, p *pass, updated *corev1.Service) (steps.Outcome, error) {
	if err := r.update(ctx, updated); err != nil {
		if apierrors.IsInvalid(err) {
			return r.serviceFailed(p, fmt.Sprintf("Service %s update error: %v", updated.Name, err))
		}
		return steps.Outcome{}, fmt.Errorf("updating Service %s: %w", updated.Name, err)
	}
	return steps.Next(), nil
}

// serviceFailed reports a Service that cannot be made. The cause (a foreign
// Service, which the cache does not see go) sends no event, so the pass is
// retried after the failure backoff.
func (r *Reconciler) serviceFailed(p *pass, msg string) (steps.Outcome, error) {
	setCondition(&p.status, v1alpha2.ConditionRunning, corev1.ConditionFalse, v1alpha2.ReasonServiceFailed, msg, p.now)
	return steps.Fail(v1alpha2.ReasonServiceFailed).Within(r.cfg.GitFetchRequeueDuration), nil
}
