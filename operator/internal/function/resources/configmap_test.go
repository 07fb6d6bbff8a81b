package resources

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
)

func TestSourceConfigMap(t *testing.T) {
	withDeps := func(deps string) func(*v1alpha2.Function) {
		return func(fn *v1alpha2.Function) { fn.Spec.Source.Inline.Dependencies = deps }
	}
	tests := []struct {
		name string
		fn   *v1alpha2.Function
		want map[string]string
	}{
		{"node, empty dependencies become {}", newFunction(v1alpha2.RuntimeNodejs20), map[string]string{"source": testSrc, "dependencies": "{}"}},
		{"node, blank dependencies become {}", newFunction(v1alpha2.RuntimeNodejs22, withDeps(" \n")), map[string]string{"source": testSrc, "dependencies": "{}"}},
		{"node, dependencies verbatim", newFunction(v1alpha2.RuntimeNodejs20, withDeps(` {"dependencies":{}} `)), map[string]string{"source": testSrc, "dependencies": ` {"dependencies":{}} `}},
		{"python, empty stays empty", newFunction(v1alpha2.RuntimePython312), map[string]string{"source": testSrc, "dependencies": ""}},
		{"python, verbatim", newFunction(v1alpha2.RuntimePython312, withDeps("requests\n")), map[string]string{"source": testSrc, "dependencies": "requests\n"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cm := SourceConfigMap(inputs(tt.fn))
			require.NotNil(t, cm)
			assert.Equal(t, tt.want, cm.Data)
			assert.Equal(t, "hello-", cm.GenerateName)
			assert.Empty(t, cm.Name)
			assert.Equal(t, "fn-test-1", cm.Namespace)
			assert.Equal(t, FunctionLabels(tt.fn), cm.Labels)
			require.Len(t, cm.OwnerReferences, 1)
			ref := cm.OwnerReferences[0]
			assert.Equal(t, "serverless.kyma-project.io/v1alpha2", ref.APIVersion)
			assert.Equal(t, "Function", ref.Kind)
			assert.Equal(t, "hello", ref.Name)
			assert.EqualValues(t, testUID, ref.UID)
			assert.True(t, *ref.Controller)
			assert.True(t, *ref.BlockOwnerDeletion)
		})
	}
	t.Run("git Function has none", func(t *testing.T) {
		assert.Nil(t, SourceConfigMap(inputs(gitFunction())))
	})
}
