package reconciler

import (
	"context"
	"fmt"

	"github.com/kyma-project/serverless-manager/operator/internal/steps"
)

// removeLeftovers: once the Function's Deployment runs the buildless
// template, what build mode left of it goes (its build Jobs, source
// ConfigMaps and HPA; its namespace's copies once every Function there
// runs buildless). Functions with nothing left cost no request.
func (r *Reconciler) removeLeftovers(ctx context.Context, p *pass) (steps.Outcome, error) {
	if r.leftovers == nil || p.deployment == nil {
		return steps.Next(), nil
	}
	if err := r.leftovers.Converted(ctx, p.fn); err != nil {
		return steps.Outcome{}, fmt.Errorf("removing what build mode left: %w", err)
	}
	return steps.Next(), nil
}
