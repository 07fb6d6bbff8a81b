package reconciler

import (
	"context"
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/internal/steps"
)

// stepUpstream looks for serverless-operator's installation, whose mode the
// configuration keeps and which the takeover steps adopt.
func (r *Reconciler) stepUpstream(ctx context.Context, s *state) (steps.Outcome, error) {
	up, err := r.upstream(ctx, s.cr)
	if err != nil {
		return r.fail(s, v1alpha1.ConditionConfigured, v1alpha1.ReasonClusterReadFailed, err, true)
	}
	s.upstream = up
	return steps.Next(), nil
}

// stepTakeover prepares the takeover of an installation of
// serverless-operator 1.x (README: Taking over serverless-operator): every
// object the chart renders that upstream applied is handed to the manager
// in its managedFields, so the apply that follows owns all of it and
// removes what only upstream's chart set. Nothing is deleted or created
// again: the chart renders upstream's names and immutable fields
// (Deployment selectors), so Deployments, the registry's volume and its
// credentials stay. Without upstream's traces it costs nothing.
func (r *Reconciler) stepTakeover(ctx context.Context, s *state) (steps.Outcome, error) {
	if s.upstream == nil {
		return steps.Next(), nil
	}
	for _, o := range s.objs {
		ref, ok := managedRef(o, s.cr.Namespace)
		if !ok {
			continue
		}
		moved, err := r.transferOwnership(ctx, ref)
		if apierrors.IsConflict(err) {
			// Changed meanwhile: its event brings the next reconcile.
			return steps.Requeue(), nil
		}
		if err != nil {
			return r.fail(s, v1alpha1.ConditionInstalled, v1alpha1.ReasonTakeoverFailed,
				fmt.Errorf("taking over serverless-operator's %s: %w", ref, err), true)
		}
		if moved {
			s.log.Info("took over the fields serverless-operator applied", "object", ref.String())
		}
	}
	return steps.Next(), nil
}

// transferOwnership rewrites the managedFields of one live object (read
// from the API server, which the cache does not ask: upstream's objects
// lack the module's labels) so the manager owns what upstream applied. A
// JSON patch that tests the resourceVersion: a concurrent change fails it
// with a conflict instead of being overwritten.
func (r *Reconciler) transferOwnership(ctx context.Context, ref objectRef) (bool, error) {
	live, err := r.upstreamObject(ctx, ref)
	if live == nil || err != nil {
		return false, err
	}
	fields, changed, err := transferredFields(live.GetManagedFields())
	if err != nil || !changed {
		return false, err
	}
	patch, err := json.Marshal([]map[string]any{
		{"op": "test", "path": "/metadata/resourceVersion", "value": live.GetResourceVersion()},
		{"op": "replace", "path": "/metadata/managedFields", "value": fields},
	})
	if err != nil {
		return false, err
	}
	err = r.client.Patch(ctx, live, client.RawPatch(types.JSONPatchType, patch))
	if apierrors.IsInvalid(err) {
		// A failed test operation: the object changed since it was read.
		return false, apierrors.NewConflict(ref.gvk.GroupVersion().WithResource(ref.gvk.Kind).GroupResource(), ref.name, err)
	}
	return err == nil, err
}
