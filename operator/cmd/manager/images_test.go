package main

import (
	"io/fs"
	"maps"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/kyma-project/serverless-manager/charts"
)

// Every image of the chart can be overridden with IMAGE_<KEY> (mirrors),
// and no key names an image the chart does not have.
func TestImageKeysAreTheChartsImages(t *testing.T) {
	data, err := fs.ReadFile(charts.Serverless(), "values.yaml")
	require.NoError(t, err)
	var values struct {
		Global struct {
			Images map[string]any `json:"images"`
		} `json:"global"`
	}
	require.NoError(t, yaml.Unmarshal(data, &values))
	assert.ElementsMatch(t, slices.Collect(maps.Keys(values.Global.Images)), imageKeys)
}

func TestImageOverrides(t *testing.T) {
	env := map[string]string{
		"IMAGE_REGISTRY_AGENT":                     "mirror.example/agent:1",
		"IMAGE_FUNCTION_CONTROLLER":                "",
		"IMAGE_FUNCTION_RUNTIME_NODEJS24":          "mirror.example/node24:1",
		"IMAGE_FUNCTION_RUNTIME_NODEJS24_FIPS":     "mirror.example/node24-fips:1",
		"IMAGE_FUNCTION_RUNTIME_NODEJS22_FIPS":     "mirror.example/node22-fips:1",
		"IMAGE_FUNCTION_RUNTIME_PYTHON312_FIPS":    "",
		"IMAGE_FUNCTION_RUNTIME_PYTHON312":         "mirror.example/py312:1",
		"IMAGE_FUNCTION_BUILDLESS_CONTROLLER_FIPS": "not a key of ours",
	}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	for _, tc := range []struct {
		name string
		fips bool
		want map[string]string
	}{
		{name: "not FIPS mode: the _FIPS variables count for nothing", want: map[string]string{
			"registry_agent": "mirror.example/agent:1", "function_runtime_nodejs24": "mirror.example/node24:1",
			"function_runtime_python312": "mirror.example/py312:1"}},
		{name: "FIPS mode: _FIPS wins, else the plain one", fips: true, want: map[string]string{
			"registry_agent": "mirror.example/agent:1", "function_runtime_nodejs24": "mirror.example/node24-fips:1",
			"function_runtime_nodejs22": "mirror.example/node22-fips:1", "function_runtime_python312": "mirror.example/py312:1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, imageOverrides(lookup, tc.fips))
		})
	}
}
