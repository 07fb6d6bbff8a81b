package reconciler

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/internal/steps"
)

// forgetBuild drops what only build mode records in the status, as release
// 1.13's schema has none of it: the BuildReady condition, the built image
// (whose image the registry clean-up may delete meanwhile: a switch back to
// build mode then builds again instead of running a deleted image) and the
// build profile.
func forgetBuild(_ context.Context, p *pass) (steps.Outcome, error) {
	st := &p.status
	st.BuiltImage, st.BuildResourceProfile = "", ""
	conditions := st.Conditions[:0:0]
	for _, c := range st.Conditions {
		if c.Type != v1alpha2.ConditionBuildReady {
			conditions = append(conditions, c)
		}
	}
	st.Conditions = conditions
	return steps.Next(), nil
}

// buildlessGit resolves a Git Function's reference to a commit as in build
// mode (checkGit); the Pod's init container clones that commit. Inline
// Functions show no Git state.
func (r *Reconciler) buildlessGit(ctx context.Context, p *pass) (steps.Outcome, error) {
	if p.fn.Spec.Source.Inline != nil {
		p.status.Commit, p.status.Repository = "", v1alpha2.Repository{}
		return steps.Next(), nil
	}
	if p.fn.Spec.Source.GitRepository == nil {
		return r.noSource(p)
	}
	return r.checkGit(ctx, p, nil)
}

// configured is release 1.13's ConfigurationReady True once the Function is
// valid and its sources resolved.
func configured(_ context.Context, p *pass) (steps.Outcome, error) {
	setCondition(&p.status, v1alpha2.ConditionConfigurationReady, corev1.ConditionTrue, v1alpha2.ReasonFunctionSpecValidated,
		"Function configured", p.now)
	return steps.Next(), nil
}
