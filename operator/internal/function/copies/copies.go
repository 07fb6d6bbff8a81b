// Package copies keeps the per-namespace prerequisites of Functions: copies
// of the registry Secret, the runtime Dockerfile ConfigMaps and the Function
// ServiceAccount of the base namespace. Unlike release 1.8.4, which copied
// them into every namespace, a namespace holds copies only while it holds
// Functions. Copies follow their bases within seconds, are restored when
// edited or deleted, and go when the last Function of their namespace, or
// their base, goes. Base objects get no finalizer.
//
// One reconcile handles one namespace (the request's Name); all reads come
// from the cache, which holds the copies and those their users took over
// (managed-by: user), except when a create meets a copy the cache does not
// hold (one left by 1.8.4).
package copies

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/internal/function/config"
)

// Reconciler keeps the copies of one namespace per request.
type Reconciler struct {
	// client reads from the cache (Functions, namespace metadata, bases,
	// copies) and writes.
	client client.Client
	// api reads a copy the cache does not hold: one left by 1.8.4 (adopted),
	// or one labelled managed-by=user that the cache did not show yet
	// (left alone).
	api client.Reader
	cfg *config.Config
	mem *memory
}

// New wires a Reconciler. c reads from the manager's cache, configured as
// the Function controller's (bases in the base namespace by their config
// label, copies elsewhere by managed-by=function-controller or user,
// namespaces as metadata); api reads from the API server.
func New(c client.Client, api client.Reader, cfg *config.Config) *Reconciler {
	return &Reconciler{client: c, api: api, cfg: cfg, mem: newMemory(time.Now)}
}

// Reconcile makes the copies of namespace req.Name what they should be: the
// bases' copies while it holds Functions and is neither excluded nor
// terminating, none otherwise. It writes only what differs.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	ns := req.Name
	if ns == r.cfg.BaseNamespace {
		// The bases themselves live there; nothing is copied in or out.
		return ctrl.Result{}, nil
	}
	terminating, err := r.terminating(ctx, ns)
	if err != nil || terminating {
		// The namespace takes its copies with it.
		return ctrl.Result{}, err
	}
	var desired []client.Object
	if !r.cfg.Excluded(ns) {
		has, err := r.hasFunctions(ctx, ns)
		if err != nil {
			return ctrl.Result{}, err
		}
		if has {
			bases, err := r.bases(ctx)
			if err != nil {
				return ctrl.Result{}, err
			}
			desired = Desired(bases, ns)
		}
	}
	live, err := r.copies(ctx, ns)
	if err != nil {
		return ctrl.Result{}, err
	}

	var (
		errs []error
		wait time.Duration
	)
	for _, a := range Plan(desired, live) {
		k := keyOf(a.Object)
		if lag, left := r.mem.lagging(k, resourceVersion(a.Live)); lag {
			// Our own write is on its way into the cache; its event brings
			// another pass, the requeue is the fallback.
			wait = max(wait, left)
			continue
		}
		if a.Op == OpCreate {
			taken, err := r.takenOver(ctx, a.Object)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if taken || r.mem.optedOut(k) {
				continue
			}
		}
		if err := r.apply(ctx, a); err != nil {
			errs = append(errs, fmt.Errorf("%s %s %s/%s: %w", a.Op, k.Kind, k.Namespace, k.Name, err))
		}
	}
	return ctrl.Result{RequeueAfter: wait}, errors.Join(errs...)
}

// terminating reports a namespace being deleted. A namespace the cache does
// not know yet (just created) counts as active: writes into a namespace that
// is really gone fail harmlessly.
func (r *Reconciler) terminating(ctx context.Context, ns string) (bool, error) {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	if err := r.client.Get(ctx, client.ObjectKey{Name: ns}, m); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("reading namespace %s: %w", ns, err)
	}
	return m.DeletionTimestamp != nil, nil
}

// hasFunctions reports whether ns holds a Function that is not being deleted.
func (r *Reconciler) hasFunctions(ctx context.Context, ns string) (bool, error) {
	list := &v1alpha2.FunctionList{}
	if err := r.client.List(ctx, list, client.InNamespace(ns), client.UnsafeDisableDeepCopy); err != nil {
		return false, fmt.Errorf("listing Functions in %s: %w", ns, err)
	}
	for i := range list.Items {
		if list.Items[i].DeletionTimestamp == nil {
			return true, nil
		}
	}
	return false, nil
}

// bases reads the base objects from the cache. Objects being deleted are
// left out (their copies go now). The lists are not deep-copied: Desired
// copies what it takes.
func (r *Reconciler) bases(ctx context.Context) (Bases, error) {
	base := r.cfg.BaseNamespace
	var b Bases
	cms := &corev1.ConfigMapList{}
	if err := r.client.List(ctx, cms, client.InNamespace(base), client.UnsafeDisableDeepCopy,
		client.MatchingLabels{v1alpha2.LabelConfig: v1alpha2.ConfigRuntime}); err != nil {
		return b, fmt.Errorf("listing runtime ConfigMaps in %s: %w", base, err)
	}
	for _, cm := range cms.Items {
		if cm.DeletionTimestamp == nil {
			b.ConfigMaps = append(b.ConfigMaps, cm)
		}
	}
	s := &corev1.Secret{}
	err := r.client.Get(ctx, client.ObjectKey{Namespace: base, Name: r.cfg.BaseDefaultSecretName}, s)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return b, fmt.Errorf("reading Secret %s/%s: %w", base, r.cfg.BaseDefaultSecretName, err)
	case s.DeletionTimestamp == nil && s.Labels[v1alpha2.LabelConfig] == v1alpha2.ConfigCredentials:
		b.Secret = s
	}
	sas := &corev1.ServiceAccountList{}
	if err := r.client.List(ctx, sas, client.InNamespace(base), client.UnsafeDisableDeepCopy,
		client.MatchingLabels{v1alpha2.LabelConfig: v1alpha2.ConfigServiceAccount}); err != nil {
		return b, fmt.Errorf("listing ServiceAccounts in %s: %w", base, err)
	}
	for _, sa := range sas.Items {
		if sa.DeletionTimestamp == nil {
			b.ServiceAccounts = append(b.ServiceAccounts, sa)
		}
	}
	return b, nil
}

// copies reads the copies of ns from the cache (not deep-copied: Plan and
// update copy before they change anything).
func (r *Reconciler) copies(ctx context.Context, ns string) ([]client.Object, error) {
	var out []client.Object
	lists := []struct {
		config string
		list   client.ObjectList
		items  func(client.ObjectList) []client.Object
	}{
		{v1alpha2.ConfigRuntime, &corev1.ConfigMapList{}, func(l client.ObjectList) []client.Object {
			return pointers(l.(*corev1.ConfigMapList).Items)
		}},
		{v1alpha2.ConfigCredentials, &corev1.SecretList{}, func(l client.ObjectList) []client.Object {
			return pointers(l.(*corev1.SecretList).Items)
		}},
		{v1alpha2.ConfigServiceAccount, &corev1.ServiceAccountList{}, func(l client.ObjectList) []client.Object {
			return pointers(l.(*corev1.ServiceAccountList).Items)
		}},
	}
	for _, l := range lists {
		if err := r.client.List(ctx, l.list, client.InNamespace(ns), client.UnsafeDisableDeepCopy, client.MatchingLabels{
			v1alpha2.LabelManagedBy: v1alpha2.ManagedByController,
			v1alpha2.LabelConfig:    l.config,
		}); err != nil {
			return nil, fmt.Errorf("listing copies in %s: %w", ns, err)
		}
		for _, o := range l.items(l.list) {
			if IsCopy(o) {
				out = append(out, o)
			}
		}
	}
	return out, nil
}

// takenOver reports a copy its user labelled managed-by=user: the cache
// holds it, and it is left alone (no create the API server would refuse).
func (r *Reconciler) takenOver(ctx context.Context, desired client.Object) (bool, error) {
	live := newOfKind(desired)
	if err := r.client.Get(ctx, client.ObjectKeyFromObject(desired), live); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("reading %s %s/%s: %w", kindOf(desired), desired.GetNamespace(), desired.GetName(), err)
	}
	return live.GetLabels()[v1alpha2.LabelManagedBy] == v1alpha2.ManagedByUser, nil
}

func pointers[T any, PT interface {
	*T
	client.Object
}](items []T) []client.Object {
	out := make([]client.Object, 0, len(items))
	for i := range items {
		out = append(out, PT(&items[i]))
	}
	return out
}

func keyOf(obj client.Object) key {
	return key{Kind: kindOf(obj), Namespace: obj.GetNamespace(), Name: obj.GetName()}
}

// resourceVersion of a cached object, "" for none.
func resourceVersion(obj client.Object) string {
	if obj == nil {
		return ""
	}
	return obj.GetResourceVersion()
}

// optOutTTL is how long a user's copy is trusted to stay one: the kind's
// 1.8.4 resync period, the one knob that already says how often to look.
func (r *Reconciler) optOutTTL(kind string) time.Duration {
	switch kind {
	case "ConfigMap":
		return r.cfg.ConfigMapRequeueDuration
	case "Secret":
		return r.cfg.SecretRequeueDuration
	default:
		return r.cfg.ServiceAccountRequeueDuration
	}
}

// logWrite records a write; copies change rarely, so every write is worth a line.
func logWrite(ctx context.Context, verb string, obj client.Object) {
	log.FromContext(ctx).Info("copy "+verb, "kind", kindOf(obj), "namespace", obj.GetNamespace(), "name", obj.GetName())
}
