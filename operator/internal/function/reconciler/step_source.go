package reconciler

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/internal/function/resources"
	"github.com/kyma-project/serverless-manager/operator/internal/steps"
)

// source keeps exactly one source ConfigMap with the inline code: creates
// it, updates it when its data or labels differ, deletes extra ones (the
// oldest stays; 1.8.4 deleted all and started over). Git Functions: gitSource.
func (r *Reconciler) source(ctx context.Context, p *pass) (steps.Outcome, error) {
	if p.fn.Spec.Source.Inline == nil {
		return r.gitSource(ctx, p)
	}
	// A Function switched from Git to inline shows no Git state.
	p.status.Commit, p.status.Repository = "", v1alpha2.Repository{}
	desired := resources.SourceConfigMap(p.in)
	for i := 1; i < len(p.configMaps); i++ {
		if err := r.remove(ctx, &p.configMaps[i]); err != nil {
			return steps.Outcome{}, err
		}
	}
	if len(p.configMaps) == 0 {
		if err := r.create(ctx, desired); err != nil {
			return steps.Outcome{}, fmt.Errorf("creating the source ConfigMap: %w", err)
		}
		p.sourceConfigMap = desired.Name
		setCondition(&p.status, v1alpha2.ConditionConfigurationReady, corev1.ConditionTrue, v1alpha2.ReasonConfigMapCreated,
			fmt.Sprintf("ConfigMap %s created", desired.Name), p.now)
		return steps.Next(), nil
	}
	live := &p.configMaps[0]
	p.sourceConfigMap = live.Name
	if updated, changed := resources.UpdateConfigMap(live, desired); changed {
		if err := r.update(ctx, updated); err != nil {
			return steps.Outcome{}, fmt.Errorf("updating ConfigMap %s: %w", live.Name, err)
		}
		setCondition(&p.status, v1alpha2.ConditionConfigurationReady, corev1.ConditionTrue, v1alpha2.ReasonConfigMapUpdated,
			fmt.Sprintf("ConfigMap %s updated", live.Name), p.now)
		return steps.Next(), nil
	}
	if !isTrue(&p.status, v1alpha2.ConditionConfigurationReady) {
		setCondition(&p.status, v1alpha2.ConditionConfigurationReady, corev1.ConditionTrue, v1alpha2.ReasonFunctionConfigured,
			fmt.Sprintf("Function configured, source in ConfigMap %s", live.Name), p.now)
	}
	return steps.Next(), nil
}
