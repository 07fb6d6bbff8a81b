package reconciler

import (
	"context"
	"fmt"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/internal/steps"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
)

// stepServed lets exactly one Serverless CR of the cluster drive the module,
// whatever its namespace (upstream's rule): the module is installed into
// the served CR's namespace. The served one is the one already marked
// served (it keeps that role until it is gone, uninstall included); when
// none is, the oldest CR, ties broken by namespace and name. The choice
// depends only on the set of CRs, so two CRs created at the same instant
// never both become served, even when the cache has not seen one of them
// yet.
func (r *Reconciler) stepServed(ctx context.Context, s *state) (steps.Outcome, error) {
	list := &v1alpha1.ServerlessList{}
	if err := r.client.List(ctx, list); err != nil {
		return r.fail(s, v1alpha1.ConditionConfigured, v1alpha1.ReasonClusterReadFailed, fmt.Errorf("listing Serverless CRs: %w", err), true)
	}
	served := pickServed(list.Items)
	if served != nil && served.UID == s.cr.UID {
		s.cr.Status.Served = metav1.ConditionTrue
		return steps.Next(), nil
	}

	// Not served: say why, and never block the CR's deletion.
	s.cr.Status.Served = metav1.ConditionFalse
	s.cr.Status.State = v1alpha1.StateWarning
	msg := "this Serverless CR was never served and is being deleted"
	if served != nil {
		msg = fmt.Sprintf("only one Serverless CR is served per cluster; %s/%s is served", served.Namespace, served.Name)
	}
	s.setCondition(v1alpha1.ConditionConfigured, metav1.ConditionFalse, v1alpha1.ReasonServerlessDuplicated, msg)
	s.cr.Status.ObservedGeneration = s.cr.Generation
	if s.cr.DeletionTimestamp != nil && controllerutil.ContainsFinalizer(s.cr, module.Finalizer) {
		if err := r.removeFinalizer(ctx, s); err != nil {
			return steps.Stop(), err
		}
	}
	return steps.Stop(), nil
}

// pickServed returns the CR that is served among items, nil when none can be.
func pickServed(items []v1alpha1.Serverless) *v1alpha1.Serverless {
	var marked, candidates []*v1alpha1.Serverless
	for i := range items {
		cr := &items[i]
		if cr.Status.Served == metav1.ConditionTrue {
			marked = append(marked, cr)
		}
		if cr.DeletionTimestamp == nil {
			candidates = append(candidates, cr)
		}
	}
	pool := marked
	if len(pool) == 0 {
		pool = candidates
	}
	if len(pool) == 0 {
		return nil
	}
	sort.Slice(pool, func(i, j int) bool { return older(pool[i], pool[j]) })
	return pool[0]
}

func older(a, b *v1alpha1.Serverless) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	if a.Namespace != b.Namespace {
		return a.Namespace < b.Namespace
	}
	return a.Name < b.Name
}
