package reconciler

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/watch"
	"github.com/kyma-project/serverless-manager/operator/internal/steps"
)

// Scope is the module namespace of the moment (package scope): what the
// manager caches, watches and may write there follows the served CR.
type Scope interface {
	// Enter makes namespace the module namespace (permissions, cache).
	Enter(ctx context.Context, namespace string) error
	// Leave gives namespace up once the module is gone from it.
	Leave(ctx context.Context, namespace string) error
	// Watch runs w on the current namespace cache and on every later one.
	Watch(ctx context.Context, w func(ctx context.Context, c cache.Cache) error) error
}

// stepScope moves the module namespace to the served CR's: the module is
// installed into (or uninstalled from) the CR's namespace, whichever it is.
func (r *Reconciler) stepScope(ctx context.Context, s *state) (steps.Outcome, error) {
	if r.opts.Scope == nil {
		return steps.Next(), nil
	}
	if err := r.opts.Scope.Enter(ctx, s.cr.Namespace); err != nil {
		condType, cause := v1alpha1.ConditionInstalled, v1alpha1.ReasonScopeFailed
		if s.cr.DeletionTimestamp != nil {
			condType, cause = v1alpha1.ConditionDeleted, v1alpha1.ReasonDeletionFailed
		}
		return r.fail(s, condType, cause, fmt.Errorf("taking up namespace %s: %w", s.cr.Namespace, err), true)
	}
	return steps.Next(), nil
}

// stepLeaveScope ends an uninstall's hold on the CR's namespace: nothing of
// the module is left there, so the manager stops caching it and drops its
// permissions there (the next served CR enters its own).
func (r *Reconciler) stepLeaveScope(ctx context.Context, s *state) (steps.Outcome, error) {
	if r.opts.Scope == nil {
		return steps.Next(), nil
	}
	if err := r.opts.Scope.Leave(ctx, s.cr.Namespace); err != nil {
		return r.fail(s, v1alpha1.ConditionDeleted, v1alpha1.ReasonDeletionFailed, fmt.Errorf("leaving namespace %s: %w", s.cr.Namespace, err), true)
	}
	return steps.Next(), nil
}

// watchNamespaced reconciles on every change of the module's namespaced
// objects, in the namespace cache of the moment: each new cache gets its
// informers (listed before the cache counts as synced) and the watches.
func (r *Reconciler) watchNamespaced(scheme *runtime.Scheme, c controller.Controller, toServerless handler.EventHandler) error {
	objs, err := watch.NamespacedObjects(scheme)
	if err != nil {
		return err
	}
	return r.opts.Scope.Watch(context.Background(), func(ctx context.Context, nc cache.Cache) error {
		for _, obj := range objs {
			obj := obj.DeepCopyObject().(client.Object)
			if _, err := nc.GetInformer(ctx, obj); err != nil {
				return fmt.Errorf("watching %T: %w", obj, err)
			}
			if err := c.Watch(source.Kind(nc, obj, toServerless)); err != nil {
				return err
			}
		}
		return nil
	})
}
