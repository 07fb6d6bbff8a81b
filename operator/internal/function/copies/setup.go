package copies

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
)

// What the copies need, and nothing more: bases and copies are read through
// the cache (list/watch) and adoption reads one object (get); copies are
// created, updated and deleted, never patched.
// +kubebuilder:rbac:groups="",resources=configmaps;secrets;serviceaccounts,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups=serverless.kyma-project.io,resources=functions,verbs=get;list;watch

// ControllerName names the controller (logs, metrics).
const ControllerName = "function-copies"

// SetupWithManager registers the controller. Requests are namespaces:
// a Function created or deleted asks for its namespace, a base object's
// change for every namespace that holds Functions, a copy's change for the
// copy's namespace. There is no periodic resync.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	// Reconciles read namespace metadata from the cache; nothing needs its
	// events, but the informer must exist.
	if _, err := mgr.GetCache().GetInformer(context.Background(), namespaceMeta()); err != nil {
		return fmt.Errorf("namespace informer: %w", err)
	}
	objects := handler.EnqueueRequestsFromMapFunc(r.mapObject)
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		Watches(&v1alpha2.Function{}, handler.EnqueueRequestsFromMapFunc(functionNamespace),
			builder.WithPredicates(functionComesOrGoes())).
		Watches(&corev1.ConfigMap{}, objects).
		Watches(&corev1.Secret{}, objects).
		Watches(&corev1.ServiceAccount{}, objects).
		Complete(r)
}

func namespaceMeta() *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	return m
}

func functionNamespace(_ context.Context, obj client.Object) []reconcile.Request {
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: obj.GetNamespace()}}}
}

// functionComesOrGoes passes what can change whether a namespace holds
// Functions: creates, deletes, and the start of a deletion.
func functionComesOrGoes() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc: func(event.CreateEvent) bool { return true },
		DeleteFunc: func(event.DeleteEvent) bool { return true },
		UpdateFunc: func(e event.UpdateEvent) bool {
			return (e.ObjectOld.GetDeletionTimestamp() == nil) != (e.ObjectNew.GetDeletionTimestamp() == nil)
		},
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

// mapObject maps a ConfigMap, Secret or ServiceAccount event: a base's to
// every namespace holding Functions, a copy's (its user's too: deleted or
// handed back, it is the controller's to make again) to its namespace. The
// Function controller's own children (also cached) map to nothing. For an
// update it is called with the old and the new object, so a base that stops
// being one (label or name change) still counts.
func (r *Reconciler) mapObject(ctx context.Context, obj client.Object) []reconcile.Request {
	if obj.GetNamespace() == r.cfg.BaseNamespace {
		if !r.isBase(obj) {
			return nil
		}
		return r.functionNamespaces(ctx)
	}
	if IsCopy(obj) || isTakenOver(obj) {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: obj.GetNamespace()}}}
	}
	return nil
}

// isBase tells a base object by its config label, and the Secret by its name.
func (r *Reconciler) isBase(obj client.Object) bool {
	if obj.GetLabels()[v1alpha2.LabelConfig] != configValue(obj) {
		return false
	}
	_, secret := obj.(*corev1.Secret)
	return !secret || obj.GetName() == r.cfg.BaseDefaultSecretName
}

// functionNamespaces lists the namespaces that hold Functions, from the
// cache (the items are not copied: only their namespace is read).
func (r *Reconciler) functionNamespaces(ctx context.Context) []reconcile.Request {
	list := &v1alpha2.FunctionList{}
	if err := r.client.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing Functions for a base object's change")
		return nil
	}
	seen := map[string]bool{}
	var reqs []reconcile.Request
	for i := range list.Items {
		ns := list.Items[i].Namespace
		if !seen[ns] {
			seen[ns] = true
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: ns}})
		}
	}
	return reqs
}
