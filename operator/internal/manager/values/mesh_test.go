package values

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
)

// spec.scaleToZero.mesh reaches the chart as activator.mesh and the status
// as scaleToZeroMesh; unset, the values carry no activator key at all, so
// the chart's defaults render as before.
func TestBuildScaleToZeroMesh(t *testing.T) {
	tests := []struct {
		name        string
		scaleToZero *v1alpha1.ScaleToZero
		want        string
	}{
		{name: "unset", scaleToZero: nil, want: ""},
		{name: "empty", scaleToZero: &v1alpha1.ScaleToZero{}, want: ""},
		{name: "istio", scaleToZero: &v1alpha1.ScaleToZero{Mesh: v1alpha1.MeshIstio}, want: "istio"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := Build(v1alpha1.ServerlessSpec{ScaleToZero: tt.scaleToZero}, Facts{Namespace: "kyma-system", Nodes: 3, NewSecret: counter()})
			require.NoError(t, err)
			assert.Equal(t, tt.want, res.Effective.ScaleToZeroMesh)
			m, err := res.Values.Map()
			require.NoError(t, err)
			if tt.want == "" {
				assert.Nil(t, res.Values.Activator)
				assert.NotContains(t, m, "activator", "no key: the chart's activator defaults stay whole")
				return
			}
			assert.Equal(t, map[string]any{"mesh": tt.want}, m["activator"])
		})
	}
}

// A mesh the module does not know is a configuration error that names the
// field (the CRD's enum rejects it at admission; a CR stored otherwise
// still reaches the manager).
func TestBuildRejectsUnknownMesh(t *testing.T) {
	_, err := Build(v1alpha1.ServerlessSpec{ScaleToZero: &v1alpha1.ScaleToZero{Mesh: "linkerd"}}, Facts{Namespace: "kyma-system", NewSecret: counter()})
	var ce *ConfigError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, v1alpha1.ReasonConfigurationInvalid, ce.Reason)
	assert.Contains(t, ce.Message, `spec.scaleToZero.mesh is "linkerd"`)
	assert.Contains(t, ce.Message, "[istio]")
}
