package v1alpha2_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/tests/support/repo"
)

// quoted finds the names a CEL expression lists as string literals.
var quoted = regexp.MustCompile(`'([A-Z][A-Z0-9_]*)'`)

// The chart's CRD rejects exactly ReservedEnv (docs and tests use the
// list), and its rule, message expression and fallback message agree.
func TestReservedEnvMatchesCRD(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repo.MustRoot(), "charts", "serverless", "crds", "serverless.kyma-project.io_functions.yaml"))
	require.NoError(t, err)
	crd := &apiextensionsv1.CustomResourceDefinition{}
	require.NoError(t, yaml.Unmarshal(data, crd))
	require.Len(t, crd.Spec.Versions, 1)
	env := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["env"]
	require.Len(t, env.XValidations, 1, "one rule on spec.env")
	rule := env.XValidations[0]

	names := func(s string) []string {
		var out []string
		for _, m := range quoted.FindAllStringSubmatch(s, -1) {
			out = append(out, m[1])
		}
		return out
	}
	want := v1alpha2.ReservedEnv()
	assert.Equal(t, want, names(rule.Rule), "the rule")
	assert.Equal(t, want, names(rule.MessageExpression), "the message expression's filter")
	_, listed, ok := strings.Cut(rule.MessageExpression, "may not be set")
	require.True(t, ok, "the message expression says what is wrong: %s", rule.MessageExpression)
	for _, n := range want {
		assert.Contains(t, listed, n, "the message expression lists the reserved names")
		assert.Contains(t, rule.Message, n, "the fallback message lists the reserved names")
	}
}
