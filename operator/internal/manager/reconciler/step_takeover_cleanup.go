package reconciler

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/internal/steps"
)

// ReasonTakenOver is the Normal event that reports a finished takeover.
const ReasonTakenOver = "TakenOver"

// crdKind: deleting a CRD deletes every object of its API.
var crdKind = schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}

// stepTakeoverCleanup ends the takeover of serverless-operator 1.x once the
// chart is applied: the objects only upstream's chart rendered are deleted,
// the manifest cache Secret goes, and upstream's finalizer leaves the CR
// last (the manager's is on it): while it is there, a takeover cut short is
// found and finished again. An object is deleted only when all of these
// hold: upstream's manifest names it, the chart does not render it, its kind
// is one the module owns, it lives in the module namespace (or is
// cluster-scoped) and the API server shows it labelled by upstream and
// applied by it. A CRD is
// never deleted here. Whatever a user made (their Functions, a copy of an
// object, their Secrets) fails one of these and stays.
func (r *Reconciler) stepTakeoverCleanup(ctx context.Context, s *state) (steps.Outcome, error) {
	// What the takeover step found before the apply: read once per reconcile.
	up := s.upstream
	if up == nil {
		return steps.Next(), nil
	}
	rendered := map[string]bool{}
	for _, o := range s.objs {
		if ref, ok := managedRef(o, s.cr.Namespace); ok {
			rendered[ref.key()] = true
		}
	}
	var pruned []string
	for _, ref := range up.objects {
		if rendered[ref.key()] || ref.gvk.GroupKind() == crdKind {
			continue
		}
		gone, err := r.deleteUpstreamOnly(ctx, ref)
		if err != nil {
			return r.fail(s, v1alpha1.ConditionInstalled, v1alpha1.ReasonTakeoverFailed,
				fmt.Errorf("pruning serverless-operator's %s: %w", ref, err), true)
		}
		if gone {
			pruned = append(pruned, ref.String())
		}
	}
	if up.cache != nil {
		err := r.client.Delete(ctx, up.cache, client.Preconditions{UID: &up.cache.UID})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return r.fail(s, v1alpha1.ConditionInstalled, v1alpha1.ReasonTakeoverFailed,
				fmt.Errorf("deleting serverless-operator's manifest cache Secret: %w", err), true)
		}
	}
	patch := client.MergeFromWithOptions(s.cr.DeepCopy(), client.MergeFromWithOptimisticLock{})
	status := s.cr.Status.DeepCopy()
	controllerutil.RemoveFinalizer(s.cr, UpstreamFinalizer)
	err := r.client.Patch(ctx, s.cr, patch)
	s.cr.Status = *status
	if apierrors.IsConflict(err) {
		return steps.Requeue(), nil
	}
	if err != nil {
		return r.fail(s, v1alpha1.ConditionInstalled, v1alpha1.ReasonFinalizerFailed,
			fmt.Errorf("removing serverless-operator's finalizer: %w", err), true)
	}
	msg := "took over the installation of serverless-operator: its objects are applied by " +
		"the manager, its finalizer and its manifest cache Secret are removed"
	if len(pruned) > 0 {
		msg += "; deleted what only its chart rendered: " + strings.Join(pruned, ", ")
	}
	s.log.Info("took over serverless-operator's installation", "pruned", pruned)
	r.events.Eventf(s.cr, nil, corev1.EventTypeNormal, ReasonTakenOver, "Reconcile", "%s", msg)
	return steps.Next(), nil
}

// deleteUpstreamOnly deletes one object only upstream's chart rendered,
// after the API server confirmed it is upstream's; gone reports whether it
// no longer exists (or never was upstream's to delete).
func (r *Reconciler) deleteUpstreamOnly(ctx context.Context, ref objectRef) (bool, error) {
	live, err := r.upstreamObject(ctx, ref)
	if live == nil || err != nil {
		return false, err
	}
	if !appliedByUpstream(live) || live.GetDeletionTimestamp() != nil {
		return false, nil
	}
	err = r.client.Delete(ctx, live, client.Preconditions{UID: &live.UID},
		client.PropagationPolicy(metav1.DeletePropagationBackground))
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	return err == nil, err
}
