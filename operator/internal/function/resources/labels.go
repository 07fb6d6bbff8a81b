package resources

import (
	"maps"
	"slices"
	"strings"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
)

// InternalLabels are the three labels by which a Function's children are
// found (never by name: 1.8.4 children have random names).
func InternalLabels(fn *v1alpha2.Function) map[string]string {
	return map[string]string{
		v1alpha2.LabelFunctionName: fn.Name,
		v1alpha2.LabelManagedBy:    v1alpha2.ManagedByController,
		v1alpha2.LabelUUID:         string(fn.UID),
	}
}

// FunctionLabels are the labels of every child: the Function's own labels
// overlaid by the internal ones (internal keys win).
func FunctionLabels(fn *v1alpha2.Function) map[string]string {
	out := make(map[string]string, len(fn.Labels)+3)
	maps.Copy(out, fn.Labels)
	maps.Copy(out, InternalLabels(fn))
	return out
}

// SelectorLabels select the Function's Pods: internal labels plus
// resource=deployment. The Deployment selector is immutable, so these must
// stay exactly as 1.8.4 set them.
func SelectorLabels(fn *v1alpha2.Function) map[string]string {
	out := InternalLabels(fn)
	out[v1alpha2.LabelResource] = v1alpha2.ResourceDeployment
	return out
}

// PodSelector is status.podSelector for the scale subresource: the selector
// labels as sorted k=v pairs joined by commas, as 1.8.4 writes it.
func PodSelector(fn *v1alpha2.Function) string {
	sel := SelectorLabels(fn)
	keys := slices.Sorted(maps.Keys(sel))
	pairs := make([]string, 0, len(keys))
	for _, k := range keys {
		pairs = append(pairs, k+"="+sel[k])
	}
	return strings.Join(pairs, ",")
}

// podLabels are the Deployment's Pod template labels: spec.labels, overlaid
// by the selector labels, overlaid by app.kubernetes.io/name.
func podLabels(fn *v1alpha2.Function) map[string]string {
	out := make(map[string]string, len(fn.Spec.Labels)+5)
	maps.Copy(out, fn.Spec.Labels)
	maps.Copy(out, SelectorLabels(fn))
	out[LabelAppName] = fn.Name
	return out
}
