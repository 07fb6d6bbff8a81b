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
	"github.com/kyma-project/serverless-manager/operator/internal/steps"
	"github.com/kyma-project/serverless-manager/operator/pkg/build"
)

// prerequisitesGrace is how long a new Function waits silently for the
// copies of its namespace before it reports them missing.
const prerequisitesGrace = 10 * time.Second

// prerequisites reads the per-namespace copies a Function needs (registry
// Secret, Dockerfile ConfigMap, Function ServiceAccount) from the cache.
// One missing or unusable → ConfigurationReady False PrerequisitesMissing
// naming it, and the pass ends (1.8.4 backed off without a word); the
// copy appearing triggers the next pass (the reconciler
// watches the copies).
func (r *Reconciler) prerequisites(ctx context.Context, p *pass) (steps.Outcome, error) {
	ns := p.fn.Namespace
	// The copies controller creates the copies when a namespace gets its
	// first Function, and adopts 1.8.4's copies after a takeover, within
	// moments; their watch event brings the next pass. Until then a new
	// Function, or any Function just after the controller started, says
	// nothing (no write, no Warning per Function, no flapping condition).
	since := min(p.now.Sub(p.fn.CreationTimestamp.Time), p.now.Sub(r.started))
	graceLeft := min(prerequisitesGrace, prerequisitesGrace-since)
	excluded := ns != r.cfg.BaseNamespace && r.cfg.Excluded(ns)
	// Where the copies controller makes copies, a copy the cache lacks
	// within the grace is one not made yet: no API read (see getCopy).
	askAPI := graceLeft <= 0 || excluded || ns == r.cfg.BaseNamespace
	missing := func(format string, args ...any) (steps.Outcome, error) {
		if excluded {
			// 1.8.4 failed here forever without a word.
			setCondition(&p.status, v1alpha2.ConditionConfigurationReady, corev1.ConditionFalse, v1alpha2.ReasonPrerequisitesMissing,
				fmt.Sprintf("namespace %s is excluded (APP_KUBERNETES_EXCLUDED_NAMESPACES): the controller copies no registry Secret, Dockerfiles or ServiceAccount into it", ns), p.now)
			return steps.Fail(v1alpha2.ReasonPrerequisitesMissing), nil
		}
		if graceLeft > 0 {
			p.keepStatus = true
			return steps.RequeueAfter(graceLeft), nil
		}
		setCondition(&p.status, v1alpha2.ConditionConfigurationReady, corev1.ConditionFalse, v1alpha2.ReasonPrerequisitesMissing,
			fmt.Sprintf(format, args...), p.now)
		return steps.Fail(v1alpha2.ReasonPrerequisitesMissing), nil
	}

	secret := &corev1.Secret{}
	secretName := r.cfg.ImageRegistryDefaultDockerConfigSecretName
	if found, err := r.getCopy(ctx, types.NamespacedName{Namespace: ns, Name: secretName}, secret, askAPI); err != nil {
		return steps.Outcome{}, err
	} else if !found {
		return missing("registry Secret %s not found in namespace %s (the controller copies it from %s)", secretName, ns, r.cfg.BaseNamespace)
	}
	reg, err := resources.RegistryFromSecret(secret)
	if err != nil {
		return missing("registry Secret %s in namespace %s: %v", secretName, ns, err)
	}

	cm := &corev1.ConfigMap{}
	cmName := resources.DockerfileConfigMapName(p.fn.Spec.Runtime)
	if found, err := r.getCopy(ctx, types.NamespacedName{Namespace: ns, Name: cmName}, cm, askAPI); err != nil {
		return steps.Outcome{}, err
	} else if !found {
		return missing("Dockerfile ConfigMap %s not found in namespace %s (the controller copies it from %s)", cmName, ns, r.cfg.BaseNamespace)
	}
	base, err := build.BaseImageOf(cm.Data["Dockerfile"])
	if err != nil {
		return missing("Dockerfile ConfigMap %s in namespace %s: %v", cmName, ns, err)
	}

	sa := &corev1.ServiceAccount{}
	saName := r.cfg.ImagePullAccountName
	if found, err := r.getCopy(ctx, types.NamespacedName{Namespace: ns, Name: saName}, sa, askAPI); err != nil {
		return steps.Outcome{}, err
	} else if !found {
		return missing("ServiceAccount %s not found in namespace %s (the controller copies it from %s)", saName, ns, r.cfg.BaseNamespace)
	}

	p.in.Registry, p.in.BaseImage = reg, base
	p.pullImage, p.pushImage = resources.PullImage(p.in), resources.PushImage(p.in)
	return steps.Next(), nil
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

// getCopy reads a per-namespace copy from the cache, which holds the
// controller's copies and those a user took over (managed-by: user). Only
// with askAPI a miss goes to the API server: after the grace (a 1.8.4 copy
// the copies controller has not adopted yet is there), or where the copies
// controller makes none (the base and excluded namespaces: a copy there is
// the user's, whatever its labels). Otherwise a miss within the grace is a
// copy not made yet, whose creation's event brings the next pass; asking
// the API server would only fetch a 404.
func (r *Reconciler) getCopy(ctx context.Context, key types.NamespacedName, obj client.Object, askAPI bool) (bool, error) {
	found, err := r.get(ctx, key, obj)
	if found || err != nil || !askAPI || r.api == nil {
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
