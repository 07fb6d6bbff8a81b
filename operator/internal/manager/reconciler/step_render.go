package reconciler

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/internal/steps"
)

// stepRender renders the chart with the values, reusing the last render
// when namespace and values are unchanged.
func (r *Reconciler) stepRender(_ context.Context, s *state) (steps.Outcome, error) {
	key, err := json.Marshal(map[string]any{"ns": s.cr.Namespace, "values": s.values})
	if err != nil {
		return r.fail(s, v1alpha1.ConditionInstalled, v1alpha1.ReasonRenderFailed, fmt.Errorf("keying the render: %w", err), false)
	}
	r.renderMu.Lock()
	memo := r.lastRender
	r.renderMu.Unlock()
	if memo.key == string(key) {
		s.objs = memo.objs
	} else {
		start := time.Now()
		objs, err := r.renderer.Render(s.cr.Namespace, s.values)
		if r.metrics != nil {
			r.metrics.ObserveRender(time.Since(start))
		}
		if err != nil {
			return r.fail(s, v1alpha1.ConditionInstalled, v1alpha1.ReasonRenderFailed, fmt.Errorf("rendering the Serverless chart: %w", err), false)
		}
		s.objs = objs
		r.renderMu.Lock()
		r.lastRender = renderMemo{key: string(key), objs: objs}
		r.renderMu.Unlock()
	}
	s.cr.Status.ChartVersion = r.renderer.ChartVersion()
	return steps.Next(), nil
}
