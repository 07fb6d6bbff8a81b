package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// The committed module-template/ is what `make module-template` generates
// now: bumping VERSION without regenerating fails here.
func TestCommittedModuleTemplateIsCurrent(t *testing.T) {
	root := filepath.Join("..", "..")
	files, err := Files(root)
	require.NoError(t, err)
	require.Len(t, files, 2)
	for path, want := range files {
		got, err := os.ReadFile(filepath.Join(root, path))
		require.NoError(t, err, "run make module-template")
		assert.Equal(t, string(want), string(got), "%s is stale: run make module-template", path)
	}
	version, err := os.ReadFile(filepath.Join(root, "VERSION"))
	require.NoError(t, err)
	var tmpl struct {
		Spec struct {
			Version string         `json:"version"`
			Data    map[string]any `json:"data"`
		} `json:"spec"`
	}
	require.NoError(t, yaml.Unmarshal(files[filepath.Join("module-template", "template.yaml")], &tmpl))
	assert.Equal(t, string(version[:len(version)-1]), tmpl.Spec.Version)
	assert.Equal(t, "Serverless", tmpl.Spec.Data["kind"])
}
