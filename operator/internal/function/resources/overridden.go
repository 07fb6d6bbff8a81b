package resources

import (
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
)

// Overridden names what a Function sets in spec.env, spec.annotations and
// spec.labels that its Pods do not get, because the module sets the same
// name after it. The releases before admitted all of it, so it stays
// admitted; the controller and the chart's admission policy warn instead.
type Overridden struct {
	// Env are spec.env names the container's env defines again after
	// spec.env (Kubernetes takes the last), in spec.env's order.
	Env []string
	// Annotations and Labels are spec.annotations and spec.labels keys
	// whose value on the Pod template is the module's, sorted.
	Annotations, Labels []string
}

// OverriddenInBuild is what build mode's Deployment (Deployment) overrides.
func OverriddenInBuild(in Inputs) Overridden {
	return overridden(in.Function, injectedEnv(in), podAnnotations(in.Function))
}

// OverriddenInBuildless is what the buildless Deployment (BuildlessDeployment)
// overrides.
func OverriddenInBuildless(fn *v1alpha2.Function) Overridden {
	return overridden(fn, buildlessSourceEnv(fn, familyOf(fn.Spec.Runtime)), buildlessAnnotations(fn, nil))
}

func overridden(fn *v1alpha2.Function, after []corev1.EnvVar, annotations map[string]string) Overridden {
	var out Overridden
	later := make(map[string]bool, len(after))
	for _, e := range after {
		later[e.Name] = true
	}
	for _, e := range fn.Spec.Env {
		if later[e.Name] && !slices.Contains(out.Env, e.Name) {
			out.Env = append(out.Env, e.Name)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(fn.Spec.Annotations)) {
		if annotations[k] != fn.Spec.Annotations[k] {
			out.Annotations = append(out.Annotations, k)
		}
	}
	labels := podLabels(fn)
	for _, k := range slices.Sorted(maps.Keys(fn.Spec.Labels)) {
		if labels[k] != fn.Spec.Labels[k] {
			out.Labels = append(out.Labels, k)
		}
	}
	return out
}
