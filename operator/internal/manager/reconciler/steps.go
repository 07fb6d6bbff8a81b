package reconciler

import (
	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/internal/steps"
)

// step is one named action of a reconcile: it updates the run's state (the
// status among it) and says with its outcome how the run goes on
// (steps.Run runs, times and logs the list).
type step = steps.Step[*state]

// steps is the order of a reconcile, the only place it is written down (the
// names are the metrics' step label). Which list runs depends on the CR
// alone: a CR being deleted is uninstalled, served first so that a CR that
// is not served is let go without touching the module.
func (r *Reconciler) steps(cr *v1alpha1.Serverless) []step {
	if cr.DeletionTimestamp != nil {
		return []step{
			{Name: "confirm", Run: r.stepConfirm},
			{Name: "served", Run: r.stepServed},
			{Name: "scope", Run: r.stepScope},
			{Name: "inventory", Run: r.stepInventory},
			{Name: "functions-guard", Run: r.stepFunctionsGuard},
			{Name: "delete-inventory", Run: r.stepDeleteInventory},
			{Name: "delete-api-leftovers", Run: r.stepDeleteAPILeftovers},
			{Name: "delete-copies", Run: r.stepDeleteCopies},
			{Name: "delete-leases", Run: r.stepDeleteLeases},
			{Name: "leave-scope", Run: r.stepLeaveScope},
			{Name: "remove-finalizer", Run: r.stepRemoveFinalizer},
		}
	}
	return []step{
		{Name: "served", Run: r.stepServed},
		{Name: "scope", Run: r.stepScope},
		{Name: "paused", Run: r.stepPaused},
		{Name: "inventory", Run: r.stepInventory},
		{Name: "finalizer", Run: r.stepFinalizer},
		{Name: "upstream", Run: r.stepUpstream},
		{Name: "configure", Run: r.stepConfigure},
		{Name: "render", Run: r.stepRender},
		{Name: "takeover", Run: r.stepTakeover},
		{Name: "apply", Run: r.stepApply},
		{Name: "takeover-cleanup", Run: r.stepTakeoverCleanup},
		{Name: "registry-usage", Run: r.stepRegistryUsage},
		{Name: "verify", Run: r.stepVerify},
	}
}
