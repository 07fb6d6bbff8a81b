package reconciler

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/apply"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/inventory"
	"github.com/kyma-project/serverless-manager/operator/internal/steps"
)

// stepInventory drops the inventory entries that cannot be the module's:
// anyone who may write serverlesses/status can add entries, and an entry
// for a kind the manager may not read would fail every prune and the
// uninstall, one for an object outside the module namespace would have it
// deleted. Such entries are removed from the status with one Warning event
// (the status write makes it the only one) and never acted on.
func (r *Reconciler) stepInventory(_ context.Context, s *state) (steps.Outcome, error) {
	owned := apply.ManagedKinds()
	check := func() (kept []v1alpha1.InventoryEntry, ignored []string) {
		for _, e := range s.cr.Status.Inventory {
			if why := checkEntry(owned, e.ID, s.cr.Namespace); why != nil {
				ignored = append(ignored, why.Error())
				continue
			}
			kept = append(kept, e)
		}
		return kept, ignored
	}
	kept, ignored := check()
	if len(ignored) == 0 {
		return steps.Next(), nil
	}
	// Objects of the chart's own CRDs are the module's too; the render
	// that names those kinds is only needed when the table does not do.
	own, err := r.ownership(s)
	if err != nil {
		s.log.Error(err, "rendering the chart for the kinds of its CRDs")
	}
	owned = own.kinds
	if kept, ignored = check(); len(ignored) == 0 {
		return steps.Next(), nil
	}
	s.cr.Status.Inventory = kept
	s.log.Info("ignoring inventory entries", "entries", ignored)
	r.events.Eventf(s.cr, nil, corev1.EventTypeWarning, v1alpha1.ReasonInventoryEntryIgnored, "Reconcile",
		"ignored %d status.inventory entries that cannot be the module's: %s", len(ignored), strings.Join(ignored, "; "))
	return steps.Next(), nil
}

// checkEntry tells why id cannot name an object of the module.
func checkEntry(owned apply.Kinds, id, namespace string) error {
	ref, ok := inventory.ParseID(id)
	if !ok {
		return fmt.Errorf("%q is not <group>/<kind>/<namespace>/<name>", id)
	}
	return owned.Check(ref, namespace)
}
