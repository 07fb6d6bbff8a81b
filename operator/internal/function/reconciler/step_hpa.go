package reconciler

import (
	"context"
	"fmt"

	"github.com/kyma-project/serverless-manager/operator/internal/function/resources"
	"github.com/kyma-project/serverless-manager/operator/internal/steps"
)

// hpa keeps one HorizontalPodAutoscaler while scaleConfig asks for
// autoscaling (min ≠ max) and none otherwise; extra ones are deleted.
func (r *Reconciler) hpa(ctx context.Context, p *pass) (steps.Outcome, error) {
	desired := resources.HPA(p.in)
	from := 0
	if desired != nil && len(p.hpas) > 0 {
		from = 1
	}
	for i := from; i < len(p.hpas); i++ {
		if err := r.remove(ctx, &p.hpas[i]); err != nil {
			return steps.Outcome{}, err
		}
	}
	if desired == nil {
		return steps.Next(), nil
	}
	if len(p.hpas) == 0 {
		if err := r.create(ctx, desired); err != nil {
			return steps.Outcome{}, fmt.Errorf("creating the HorizontalPodAutoscaler: %w", err)
		}
		return steps.Next(), nil
	}
	if updated, changed := resources.UpdateHPA(&p.hpas[0], desired); changed {
		if err := r.update(ctx, updated); err != nil {
			return steps.Outcome{}, fmt.Errorf("updating HorizontalPodAutoscaler %s: %w", p.hpas[0].Name, err)
		}
	}
	return steps.Next(), nil
}
