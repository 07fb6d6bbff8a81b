package reconciler

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/internal/function/resources"
	"github.com/kyma-project/serverless-manager/operator/pkg/build"
)

// prerequisitesGrace is how long a new Function waits silently for the
// copies of its namespace before it reports them missing.
const prerequisitesGrace = 10 * time.Second

// prerequisites reads the per-namespace copies a Function needs (registry
// Secret, Dockerfile ConfigMap, Function ServiceAccount) from the cache.
// One missing or unusable → ConfigurationReady False PrerequisitesMissing
// naming it, and the pass ends (1.8.4 backed off without a word, pitfall
// §10.11); the copy appearing triggers the next pass (the reconciler
// watches the copies).
func (r *Reconciler) prerequisites(ctx context.Context, p *pass) error {
	ns := p.fn.Namespace
	missing := func(format string, args ...any) error {
		p.stop = true
		if ns != r.cfg.BaseNamespace && r.cfg.Excluded(ns) {
			// Bug §11.18: 1.8.4 failed here forever without a word.
			setCondition(&p.status, v1alpha2.ConditionConfigurationReady, corev1.ConditionFalse, v1alpha2.ReasonPrerequisitesMissing,
				fmt.Sprintf("namespace %s is excluded (APP_KUBERNETES_EXCLUDED_NAMESPACES): the controller copies no registry Secret, Dockerfiles or ServiceAccount into it", ns), p.now)
			return nil
		}
		// The copies controller creates the copies when a namespace gets its
		// first Function, and adopts 1.8.4's copies after a takeover, within
		// moments; their watch event brings the next pass. Until then a new
		// Function, or any Function just after the controller started, says
		// nothing (no write, no Warning per Function, no flapping condition).
		since := min(p.now.Sub(p.fn.CreationTimestamp.Time), p.now.Sub(r.started))
		if wait := min(prerequisitesGrace, prerequisitesGrace-since); wait > 0 {
			p.keepStatus, p.requeueAfter = true, wait
			return nil
		}
		setCondition(&p.status, v1alpha2.ConditionConfigurationReady, corev1.ConditionFalse, v1alpha2.ReasonPrerequisitesMissing,
			fmt.Sprintf(format, args...), p.now)
		return nil
	}

	secret := &corev1.Secret{}
	secretName := r.cfg.ImageRegistryDefaultDockerConfigSecretName
	if found, err := r.getCopy(ctx, types.NamespacedName{Namespace: ns, Name: secretName}, secret); err != nil {
		return err
	} else if !found {
		return missing("registry Secret %s not found in namespace %s (the controller copies it from %s)", secretName, ns, r.cfg.BaseNamespace)
	}
	reg, err := resources.RegistryFromSecret(secret)
	if err != nil {
		return missing("registry Secret %s in namespace %s: %v", secretName, ns, err)
	}

	cm := &corev1.ConfigMap{}
	cmName := resources.DockerfileConfigMapName(p.fn.Spec.Runtime)
	if found, err := r.getCopy(ctx, types.NamespacedName{Namespace: ns, Name: cmName}, cm); err != nil {
		return err
	} else if !found {
		return missing("Dockerfile ConfigMap %s not found in namespace %s (the controller copies it from %s)", cmName, ns, r.cfg.BaseNamespace)
	}
	base, err := build.BaseImageOf(cm.Data["Dockerfile"])
	if err != nil {
		return missing("Dockerfile ConfigMap %s in namespace %s: %v", cmName, ns, err)
	}

	sa := &corev1.ServiceAccount{}
	saName := r.cfg.ImagePullAccountName
	if found, err := r.getCopy(ctx, types.NamespacedName{Namespace: ns, Name: saName}, sa); err != nil {
		return err
	} else if !found {
		return missing("ServiceAccount %s not found in namespace %s (the controller copies it from %s)", saName, ns, r.cfg.BaseNamespace)
	}

	p.in.Registry, p.in.BaseImage = reg, base
	p.pullImage, p.pushImage = resources.PullImage(p.in), resources.PushImage(p.in)
	return nil
}

// get reads obj from the cache; found is false when it does not exist.
func (r *Reconciler) get(ctx context.Context, key types.NamespacedName, obj client.Object) (bool, error) {
	if err := r.client.Get(ctx, key, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("reading %T %s: %w", obj, key, err)
	}
	return true, nil
}

// getCopy reads a per-namespace copy from the cache and, when the cache
// has none, from the API server: a copy its user labelled managed-by: user
// is theirs to keep and is not cached. That read happens only for a copy
// the cache lacks, so Functions in namespaces with the controller's own
// copies cost no API read.
func (r *Reconciler) getCopy(ctx context.Context, key types.NamespacedName, obj client.Object) (bool, error) {
	found, err := r.get(ctx, key, obj)
	if found || err != nil || r.api == nil {
		return found, err
	}
	if err := r.api.Get(ctx, key, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("reading %T %s: %w", obj, key, err)
	}
	return true, nil
}
