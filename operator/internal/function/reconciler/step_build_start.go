package reconciler

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/internal/function/cleanup"
	"github.com/kyma-project/serverless-manager/operator/internal/function/resources"
	"github.com/kyma-project/serverless-manager/operator/internal/steps"
)

// startBuild creates the build Job when the build can start: the
// controller's own image is configured, the internal registry it pushes to
// has a ready endpoint, a build slot is free. It says where the build is:
// created, queued, or what it waits for.
func (r *Reconciler) startBuild(ctx context.Context, p *pass) (*cause, steps.Outcome, error) {
	if missing := r.ownImageMissing(); missing != nil {
		return missing, steps.Next(), nil // the Deployment of an earlier build stays
	}
	if err := r.packageConfig(ctx, p); err != nil {
		return nil, steps.Outcome{}, err
	}
	if waiting, err := r.registryNotReady(ctx, p); err != nil || waiting != nil {
		return waiting, steps.Next().Within(registryRecheck), err
	}
	if !p.in.Registry.Internal && r.cfg.RegistryCleanupExternal {
		// The opt-in clean-up of an external registry touches only the
		// repositories recorded as the module's: this one before it is pushed to.
		record := cleanup.Repositories{Client: r.client, Namespace: r.cfg.BaseNamespace}
		if err := record.Remember(ctx, p.in.Registry.PushAddress, resources.Repository(p.fn)); err != nil {
			return nil, steps.Outcome{}, err
		}
	}
	job := newBuildJob(p)
	started, running, err := r.slots.Start(ctx, p.key, func() (*batchv1.Job, error) { return job, r.create(ctx, job) })
	if err != nil {
		return nil, steps.Outcome{}, fmt.Errorf("creating the build Job: %w", err)
	}
	if !started {
		// A build's end wakes only the head of the queue (WakeHandler);
		// the others look again now and then.
		return &cause{corev1.ConditionUnknown, v1alpha2.ReasonJobQueued, r.slots.queuedMessage(p.key, running)},
			steps.Next().Within(queueRecheck), nil
	}
	r.metrics.BuildStarted()
	return &cause{corev1.ConditionUnknown, v1alpha2.ReasonJobCreated, fmt.Sprintf("Job %s created", job.Name)}, steps.Next(), nil
}

// ownImageMissing is the cause (for the condition of the step that asks)
// when the controller's own image, which runs the build Job's steps (and
// fetches Git sources), is not configured; nil when it is.
func (r *Reconciler) ownImageMissing() *cause {
	if r.cfg.Build.RepoFetcherImage != "" {
		return nil
	}
	return &cause{corev1.ConditionFalse, v1alpha2.ReasonPrerequisitesMissing,
		"APP_FUNCTION_BUILD_REPO_FETCHER_IMAGE is not set: the build Job runs its steps and fetches Git sources with the controller's own image (the chart sets it)"}
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
