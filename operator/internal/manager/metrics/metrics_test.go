package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
)

// stateSeries gathers the state gauge's series as "namespace/name/state" → value.
func stateSeries(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != "serverless_manager_state" {
			continue
		}
		for _, m := range f.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			out[l["namespace"]+"/"+l["name"]+"/"+l["state"]] = m.GetGauge().GetValue()
		}
	}
	return out
}

func TestDeleteStateDropsTheSeriesOfOneCR(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := New(reg)
	require.NoError(t, err)
	m.SetState("kyma-system", "default", v1alpha1.StateReady)
	m.SetState("kyma-system", "other", v1alpha1.StateWarning)
	require.Len(t, stateSeries(t, reg), 2*len(states))

	m.DeleteState("kyma-system", "default")
	got := stateSeries(t, reg)
	assert.Len(t, got, len(states), "only the other CR's series are left")
	assert.Equal(t, 1.0, got["kyma-system/other/Warning"])
	assert.NotContains(t, got, "kyma-system/default/Ready")

	m.DeleteState("kyma-system", "gone-already")
	assert.Len(t, stateSeries(t, reg), len(states), "deleting an unknown CR changes nothing")
}
