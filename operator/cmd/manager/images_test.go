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
	t.Setenv("IMAGE_REGISTRY_AGENT", "mirror.example/agent:1")
	t.Setenv("IMAGE_FUNCTION_CONTROLLER", "")
	assert.Equal(t, map[string]string{"registry_agent": "mirror.example/agent:1"}, imageOverrides())
}
