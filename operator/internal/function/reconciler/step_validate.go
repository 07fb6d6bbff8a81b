package reconciler

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/internal/function/config"
	"github.com/kyma-project/serverless-manager/operator/internal/function/git"
	"github.com/kyma-project/serverless-manager/operator/internal/steps"
)

// validate checks what the CRD cannot: a failure sets ConfigurationReady
// False InvalidFunctionSpec and ends the pass without a requeue (the next
// spec change triggers a pass).
func (r *Reconciler) validate(_ context.Context, p *pass) (steps.Outcome, error) {
	if msgs := validateFunction(p.fn, &r.cfg); len(msgs) > 0 {
		setCondition(&p.status, v1alpha2.ConditionConfigurationReady, corev1.ConditionFalse, v1alpha2.ReasonInvalidFunctionSpec,
			strings.Join(msgs, ". "), p.now)
		return steps.Fail(v1alpha2.ReasonInvalidFunctionSpec), nil
	}
	return steps.Next(), nil
}

// validateFunction returns every problem of an inline Function's spec, in a
// fixed order.
func validateFunction(fn *v1alpha2.Function, cfg *config.Config) []string {
	var msgs []string
	add := func(format string, args ...any) { msgs = append(msgs, fmt.Sprintf(format, args...)) }

	if !slices.Contains(v1alpha2.Runtimes(), fn.Spec.Runtime) {
		add("spec.runtime %q is not one of %v", fn.Spec.Runtime, v1alpha2.Runtimes())
	}
	// The Service is named after the Function (1.8.4 failed the Service forever).
	for _, e := range validation.IsDNS1035Label(fn.Name) {
		add("metadata.name %q cannot name the Function's Service: %s", fn.Name, e)
	}
	if err := cfg.Resources.Function.CheckCustom(functionResources(fn)); err != nil {
		add("spec.resourceConfiguration.function: %v", err)
	}
	// Buildless mode builds nothing: the build block is ignored, as in 1.13.
	if err := cfg.Resources.BuildJob.CheckCustom(buildResources(fn)); err != nil && cfg.Mode != config.ModeBuildless {
		add("spec.resourceConfiguration.build: %v", err)
	}
	for i, e := range fn.Spec.Env {
		for _, m := range validation.IsEnvVarName(e.Name) {
			add("spec.env[%d].name %q: %s", i, e.Name, m)
		}
	}
	secrets, paths := map[string]bool{}, map[string]bool{}
	for i, m := range fn.Spec.SecretMounts {
		for _, e := range validation.IsDNS1123Subdomain(m.SecretName) {
			add("spec.secretMounts[%d].secretName %q: %s", i, m.SecretName, e)
		}
		if secrets[m.SecretName] {
			add("spec.secretMounts[%d].secretName %q is mounted twice", i, m.SecretName)
		}
		if paths[m.MountPath] || m.MountPath == "/tmp" {
			add("spec.secretMounts[%d].mountPath %q is already in use", i, m.MountPath)
		}
		secrets[m.SecretName], paths[m.MountPath] = true, true
	}
	if cfg.FIPSMode {
		// As release 1.13 in FIPS mode: its images for these runtimes are
		// not FIPS builds, and Go's SSH (known_hosts' HMAC-SHA1) is not an
		// approved algorithm (docs/contributor/fips.md).
		if fn.Spec.Runtime == v1alpha2.RuntimeNodejs20 || fn.Spec.Runtime == v1alpha2.RuntimePython312 {
			add("spec.runtime %s cannot run in FIPS mode: choose nodejs22 or nodejs24", fn.Spec.Runtime)
		}
		if g := fn.Spec.Source.GitRepository; g != nil && git.IsSSH(g.URL) {
			add("spec.source.gitRepository.url %q is reached over SSH, which FIPS mode does not allow: use its https:// URL", g.URL)
		}
	}
	if isNode(fn.Spec.Runtime) && fn.Spec.Source.Inline != nil {
		deps := strings.TrimSpace(fn.Spec.Source.Inline.Dependencies)
		if deps != "" && (!strings.HasPrefix(deps, "{") || !strings.HasSuffix(deps, "}")) {
			add("spec.source.inline.dependencies must be a package.json object (start with { and end with })")
		}
	}
	for _, k := range slices.Sorted(maps.Keys(fn.Spec.Labels)) {
		for _, e := range validation.IsQualifiedName(k) {
			add("spec.labels key %q: %s", k, e)
		}
		for _, e := range validation.IsValidLabelValue(fn.Spec.Labels[k]) {
			add("spec.labels[%q] value: %s", k, e)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(fn.Spec.Annotations)) {
		for _, e := range validation.IsQualifiedName(k) {
			add("spec.annotations key %q: %s", k, e)
		}
	}
	return msgs
}

func isNode(rt v1alpha2.Runtime) bool { return strings.HasPrefix(string(rt), "nodejs") }
