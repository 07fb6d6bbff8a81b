package apply

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kyma-project/serverless-manager/tests/support/testenv"
)

// CountInstances against a real API server: the objects are listed at the
// CRD's own version, and a missing CRD means no objects.
func TestCountInstances(t *testing.T) {
	env := testenv.Start(t, "operator/internal/manager/app/testdata/functions-crd")
	ctx := t.Context()
	c := env.Client
	const name = "functions.serverless.kyma-project.io"

	inst, err := CountInstances(ctx, c, name)
	require.NoError(t, err)
	assert.NotNil(t, inst.CRD)
	assert.Zero(t, inst.Count)

	for _, n := range []string{"a", "b"} {
		fn := &unstructured.Unstructured{}
		fn.SetAPIVersion("serverless.kyma-project.io/v1alpha2")
		fn.SetKind("Function")
		fn.SetNamespace("default")
		fn.SetName(n)
		require.NoError(t, c.Create(ctx, fn))
	}
	inst, err = CountInstances(ctx, c, name)
	require.NoError(t, err)
	assert.Equal(t, 2, inst.Count)
	assert.Equal(t, []string{"default/a", "default/b"}, inst.Names)

	inst, err = CountInstances(ctx, c, "widgets.example.com")
	require.NoError(t, err)
	assert.Nil(t, inst.CRD, "no CRD, no objects")
	assert.Zero(t, inst.Count)

}
