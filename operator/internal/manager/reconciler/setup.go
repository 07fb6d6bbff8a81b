package reconciler

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/watch"
	"github.com/kyma-project/serverless-manager/operator/pkg/kinds"
)

// SetupWithManager registers the controller: it reconciles Serverless CRs
// on their own changes and on any change of the module's objects, so drift
// and rollout progress are noticed without polling.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	toServerless := handler.EnqueueRequestsFromMapFunc(r.allServerless)
	b := ctrl.NewControllerManagedBy(mgr).
		Named("serverless").
		// Every change of the CR, its status included: a reconcile that read
		// a copy lagging behind the manager's last status write and therefore
		// saw nothing to write is run again once the cache has caught up. It
		// costs no request: the next reconcile finds nothing to change.
		For(&v1alpha1.Serverless{}).
		// Another CR may take over when the served one is gone.
		Watches(&v1alpha1.Serverless{}, toServerless, builder.WithPredicates(onlyDeletes()))

	for _, k := range kinds.Managed() {
		if k.Namespaced && r.opts.Scope != nil {
			continue // in the namespace cache: watchNamespaced
		}
		obj, err := watch.NewObject(mgr.GetScheme(), k)
		if err != nil {
			return err
		}
		if k.Full {
			b = b.Watches(obj, toServerless)
		} else {
			b = b.WatchesMetadata(obj, toServerless)
		}
	}
	// The users' objects the configuration reads, watched by name.
	if r.opts.Named != nil {
		b = b.WatchesRawSource(source.Channel(r.opts.Named.Events(), toServerless))
	}
	node := &metav1.PartialObjectMetadata{}
	node.SetGroupVersionKind(schema.GroupVersionKind{Version: "v1", Kind: "Node"})
	// The default presets depend on the node count only.
	b = b.WatchesMetadata(node, toServerless, builder.WithPredicates(createsOrDeletes()))
	c, err := b.Build(r)
	if err != nil {
		return err
	}
	if r.opts.Scope != nil {
		if err := r.watchNamespaced(mgr.GetScheme(), c, toServerless); err != nil {
			return err
		}
	}

	// Functions are watched only while an uninstall waits for them: the CRD
	// may not exist before the module is installed, and most of the time
	// the manager has no business caching every Function of the cluster.
	fn := &metav1.PartialObjectMetadata{}
	fn.SetGroupVersionKind(functionListGVK.GroupVersion().WithKind("Function"))
	r.functionsWatch = &functionsWatch{
		start: func() (func(context.Context) error, error) {
			src := source.Kind(mgr.GetCache(), client.Object(fn), toServerless, onlyDeletes())
			return src.WaitForSync, c.Watch(src)
		},
		stop: func(ctx context.Context) error { return mgr.GetCache().RemoveInformer(ctx, fn) },
	}
	return nil
}

// allServerless maps any event to every Serverless CR of the cluster
// (any namespace may hold the served one); there is usually one.
func (r *Reconciler) allServerless(ctx context.Context, _ client.Object) []reconcile.Request {
	list := &v1alpha1.ServerlessList{}
	if err := r.client.List(ctx, list); err != nil {
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for _, cr := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&cr)})
	}
	return reqs
}

func onlyDeletes() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		UpdateFunc:  func(event.UpdateEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return true },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

func createsOrDeletes() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return true },
		UpdateFunc:  func(event.UpdateEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return true },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}
