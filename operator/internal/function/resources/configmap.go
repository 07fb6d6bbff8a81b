package resources

import (
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
)

// Keys of the source ConfigMap.
const (
	SourceKey       = "source"
	DependenciesKey = "dependencies"
)

// SourceConfigMap is the inline Function's source ConfigMap
// (docs/contributor/upstream-contract.md#source-configmap); nil for a Git
// Function.
func SourceConfigMap(in Inputs) *corev1.ConfigMap {
	fn := in.Function
	if fn.Spec.Source.Inline == nil {
		return nil
	}
	return &corev1.ConfigMap{
		ObjectMeta: childMeta(fn, "-"),
		Data:       SourceData(fn),
	}
}

// SourceData is the source ConfigMap's data: the source, and the
// dependencies — for Node "{}" when blank (npm needs a package.json), else
// verbatim. Note the image tag hashes the raw dependencies, as 1.8.4's does.
func SourceData(fn *v1alpha2.Function) map[string]string {
	inline := fn.Spec.Source.Inline
	if inline == nil {
		return nil
	}
	deps := inline.Dependencies
	if !isPython(fn.Spec.Runtime) && strings.TrimSpace(deps) == "" {
		deps = "{}"
	}
	return map[string]string{SourceKey: inline.Source, DependenciesKey: deps}
}
