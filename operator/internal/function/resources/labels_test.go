package resources

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
)

func TestLabels(t *testing.T) {
	fn := newFunction(v1alpha2.RuntimeNodejs20, func(fn *v1alpha2.Function) {
		// A Function label may not override an internal one.
		fn.Labels[v1alpha2.LabelManagedBy] = "user"
		fn.Spec.Labels = map[string]string{"tier": "backend", LabelAppName: "other"}
	})
	internal := map[string]string{
		"serverless.kyma-project.io/function-name": "hello",
		"serverless.kyma-project.io/managed-by":    "function-controller",
		"serverless.kyma-project.io/uuid":          testUID,
	}
	selector := map[string]string{
		"serverless.kyma-project.io/function-name": "hello",
		"serverless.kyma-project.io/managed-by":    "function-controller",
		"serverless.kyma-project.io/uuid":          testUID,
		"serverless.kyma-project.io/resource":      "deployment",
	}
	tests := []struct {
		name string
		got  map[string]string
		want map[string]string
	}{
		{"internal", InternalLabels(fn), internal},
		{"function labels: own labels, internal win", FunctionLabels(fn), map[string]string{
			"app": "hello",
			"serverless.kyma-project.io/function-name": "hello",
			"serverless.kyma-project.io/managed-by":    "function-controller",
			"serverless.kyma-project.io/uuid":          testUID,
		}},
		{"selector", SelectorLabels(fn), selector},
		{"pod labels: spec.labels, selector, app name", podLabels(fn), map[string]string{
			"tier":                   "backend",
			"app.kubernetes.io/name": "hello",
			"serverless.kyma-project.io/function-name": "hello",
			"serverless.kyma-project.io/managed-by":    "function-controller",
			"serverless.kyma-project.io/uuid":          testUID,
			"serverless.kyma-project.io/resource":      "deployment",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { assert.Equal(t, tt.want, tt.got) })
	}
	t.Run("function labels do not alias the Function's map", func(t *testing.T) {
		FunctionLabels(fn)["app"] = "changed"
		assert.Equal(t, "hello", fn.Labels["app"])
	})
}

func TestPodSelector(t *testing.T) {
	fn := newFunction(v1alpha2.RuntimeNodejs20)
	assert.Equal(t,
		"serverless.kyma-project.io/function-name=hello,"+
			"serverless.kyma-project.io/managed-by=function-controller,"+
			"serverless.kyma-project.io/resource=deployment,"+
			"serverless.kyma-project.io/uuid="+testUID,
		PodSelector(fn))
}
