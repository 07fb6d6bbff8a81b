package copies

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
)

// apply makes one write. Conflicts and objects gone meanwhile are no
// errors: the change that caused them reaches the cache, and its event
// brings another pass.
func (r *Reconciler) apply(ctx context.Context, a Action) error {
	k := keyOf(a.Object)
	switch a.Op {
	case OpCreate:
		return r.create(ctx, a.Object)
	case OpUpdate:
		if err := r.client.Update(ctx, a.Object); err != nil {
			return ignoreRace(err)
		}
		r.mem.wrote(k, a.Live.GetResourceVersion())
		logWrite(ctx, "updated", a.Object)
		return nil
	case OpRecreate:
		if err := r.delete(ctx, a.Live); err != nil {
			return err
		}
		return r.create(ctx, a.Object)
	case OpDelete:
		return r.delete(ctx, a.Live)
	}
	return fmt.Errorf("unknown operation %q", a.Op)
}

func (r *Reconciler) create(ctx context.Context, obj client.Object) error {
	err := r.client.Create(ctx, obj)
	switch {
	case err == nil:
		r.mem.wrote(keyOf(obj), "")
		logWrite(ctx, "created", obj)
		return nil
	case apierrors.IsAlreadyExists(err):
		return r.adopt(ctx, obj)
	case namespaceGone(err):
		return nil
	}
	return err
}

// adopt handles a copy that exists but is not in the cache: one 1.8.4 made
// (no managed-by label) gets the desired content and label, a user's
// (managed-by=user) is left alone and remembered, so that later passes do
// not try again for a while.
func (r *Reconciler) adopt(ctx context.Context, desired client.Object) error {
	k := keyOf(desired)
	live := newOfKind(desired)
	if err := r.api.Get(ctx, client.ObjectKeyFromObject(desired), live); err != nil {
		if apierrors.IsNotFound(err) {
			// Deleted between the create and the read: not cached, so no
			// event would bring another pass.
			return fmt.Errorf("copy vanished while adopting it, trying again: %w", err)
		}
		return fmt.Errorf("reading the existing copy: %w", err)
	}
	if live.GetLabels()[v1alpha2.LabelManagedBy] == v1alpha2.ManagedByUser {
		r.mem.optOut(k, r.optOutTTL(k.Kind))
		return nil
	}
	// Errors below are returned, races included: the object is not cached,
	// so no event would bring another pass; the retry does.
	if live.GetDeletionTimestamp() != nil {
		return fmt.Errorf("the existing copy is being deleted, waiting for it to go")
	}
	if mustRecreate(live, desired) {
		uid, rv := live.GetUID(), live.GetResourceVersion()
		if err := r.client.Delete(ctx, live, client.Preconditions{UID: &uid, ResourceVersion: &rv}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting the existing copy of another type: %w", err)
		}
		// Once more through create: a copy held by a finalizer ends in the
		// deletion check above, so this does not loop.
		return r.create(ctx, desired)
	}
	u, changed := update(live, desired)
	if !changed {
		// Ours already, the cache had not shown it yet.
		return nil
	}
	if err := r.client.Update(ctx, u); err != nil {
		return fmt.Errorf("adopting the existing copy: %w", err)
	}
	// The cache showed nothing: it gets the adopted copy as a new object.
	r.mem.wrote(k, "")
	logWrite(ctx, "adopted", u)
	return nil
}

// delete removes a copy unless it changed since it was read (the change's
// event brings another pass).
func (r *Reconciler) delete(ctx context.Context, live client.Object) error {
	deleted, err := Delete(ctx, r.client, live)
	if err != nil || !deleted {
		return err
	}
	r.mem.wrote(keyOf(live), live.GetResourceVersion())
	logWrite(ctx, "deleted", live)
	return nil
}

// Delete removes a copy unless it changed or went since live was read;
// deleted tells whether this call removed it.
func Delete(ctx context.Context, w client.Writer, live client.Object) (deleted bool, err error) {
	obj := newOfKind(live)
	obj.SetNamespace(live.GetNamespace())
	obj.SetName(live.GetName())
	uid, rv := live.GetUID(), live.GetResourceVersion()
	if err := w.Delete(ctx, obj, client.Preconditions{UID: &uid, ResourceVersion: &rv}); err != nil {
		return false, ignoreRace(err)
	}
	return true, nil
}

func newOfKind(obj client.Object) client.Object {
	switch obj.(type) {
	case *corev1.ConfigMap:
		return &corev1.ConfigMap{}
	case *corev1.Secret:
		return &corev1.Secret{}
	default:
		return &corev1.ServiceAccount{}
	}
}

// ignoreRace drops the errors of writes that lost a race the cache will
// report: a conflict (the object changed), not found (it is gone), or a
// namespace being deleted.
func ignoreRace(err error) error {
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) || namespaceGone(err) {
		return nil
	}
	return err
}

// namespaceGone reports a write refused because the namespace is gone or
// being deleted.
func namespaceGone(err error) bool {
	return apierrors.IsNotFound(err) || apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause)
}
