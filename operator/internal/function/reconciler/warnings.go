package reconciler

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/utils/ptr"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/internal/function/config"
	"github.com/kyma-project/serverless-manager/operator/internal/function/resources"
	"github.com/kyma-project/serverless-manager/operator/pkg/scaletozero"
)

// Spec warnings: the deprecated runtime a Function runs on, and what it
// asks for that the module admits (the releases before admitted it) and
// then does not do. Each leads ConfigurationReady's message while that is
// True, as "Warning: <text>. ", release 1.13's form for the deprecated
// runtime. The chart's ValidatingAdmissionPolicy
// (charts/serverless/templates/function-warnings.yaml) gives the same texts
// at admission, all but the runtime's; a test compares both on a real API
// server.

// warningPrefix starts each warning in a condition message; a message
// starting with it makes a Warning event (statusEvents).
const warningPrefix = "Warning: "

// fixedReplicas ends the warnings about a scaleConfig that starts no autoscaler.
const fixedReplicas = "the replica count is fixed at spec.replicas (%d), no autoscaler runs"

// specWarnings are fn's warnings in cfg's mode, in a fixed order. No text
// holds ". ", which ends a warning in a message (withoutWarnings).
func specWarnings(fn *v1alpha2.Function, cfg *config.Config) []string {
	var out []string
	add := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	if fn.Spec.Runtime.Deprecated() {
		add("runtime %s is deprecated and will be removed in the future", fn.Spec.Runtime)
	}
	replicas := ptr.Deref(fn.Spec.Replicas, 1)
	sc := fn.Spec.ScaleConfig
	var over resources.Overridden
	stz := scaletozero.Enabled(fn)
	if stz {
		if _, err := scaletozero.IdleWindow(fn.Annotations); err != nil {
			// The Function is not scaled to zero (the activator reads the
			// same annotation); ". " would end the warning early.
			add("%s: the Function is not scaled to zero", strings.ReplaceAll(err.Error(), ". ", "."))
		}
		if _, err := scaletozero.HoldTimeout(fn, scaletozero.DefaultHoldTimeout); err != nil {
			// The activator holds for its own timeout instead.
			add("%s: requests at zero are held for the activator's hold timeout", strings.ReplaceAll(err.Error(), ". ", "."))
		}
	}
	if cfg.Mode == config.ModeBuildless {
		// minReplicas 0 scales to zero in buildless mode too.
		if sc != nil && !stz {
			add("spec.scaleConfig (minReplicas %d, maxReplicas %d) has no effect in buildless mode: "+fixedReplicas,
				ptr.Deref(sc.MinReplicas, 1), ptr.Deref(sc.MaxReplicas, 1), replicas)
		}
		if buildResources(fn) != nil {
			add("spec.resourceConfiguration.build has no effect in buildless mode: nothing is built")
		}
		over = resources.OverriddenInBuildless(fn)
	} else {
		in := resources.Inputs{Function: fn, Config: cfg}
		// minReplicas 0 with maxReplicas 1: the Function runs 1 replica
		// while it is not at zero, as asked.
		if sc != nil && !stz && resources.HPA(in) == nil {
			// No autoscaler: maxReplicas is not above minReplicas.
			lowest, highest := ptr.Deref(sc.MinReplicas, 1), ptr.Deref(sc.MaxReplicas, 1)
			switch {
			case lowest > highest:
				add("spec.scaleConfig.minReplicas (%d) is above maxReplicas (%d): "+fixedReplicas, lowest, highest, replicas)
			case lowest != replicas:
				add("spec.scaleConfig.minReplicas and maxReplicas are both %d: "+fixedReplicas, lowest, replicas)
			}
		}
		over = resources.OverriddenInBuild(in)
	}
	for _, name := range over.Env {
		add("spec.env %s has no effect: the module sets this variable after spec.env", name)
	}
	for _, key := range over.Annotations {
		add("spec.annotations %s has no effect: the module sets this annotation on the Pods", key)
	}
	for _, key := range over.Labels {
		add("spec.labels %s has no effect: the module sets this label on the Pods to the Function's name", key)
	}
	return out
}

// withWarnings is msg led by warnings, each as "Warning: <text>. ", after
// the warnings an earlier pass put there are dropped: a message never
// accumulates them.
func withWarnings(msg string, warnings []string) string {
	var b strings.Builder
	for _, w := range warnings {
		b.WriteString(warningPrefix + w + ". ")
	}
	return b.String() + withoutWarnings(msg)
}

// withoutWarnings is msg without its leading warnings.
func withoutWarnings(msg string) string {
	_, rest := splitWarnings(msg)
	return rest
}

// splitWarnings returns the texts of msg's leading warnings and the rest.
func splitWarnings(msg string) ([]string, string) {
	var warnings []string
	for strings.HasPrefix(msg, warningPrefix) {
		end := strings.Index(msg, ". ")
		if end < 0 {
			break
		}
		warnings = append(warnings, msg[len(warningPrefix):end])
		msg = msg[end+2:]
	}
	return warnings, msg
}

// newWarning reports whether cur leads with a warning that old does not.
func newWarning(old, cur string) bool {
	before, _ := splitWarnings(old)
	now, _ := splitWarnings(cur)
	for _, w := range now {
		if !slices.Contains(before, w) {
			return true
		}
	}
	return false
}
