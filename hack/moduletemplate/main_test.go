package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// The committed module-template/ is what `make module-template` generates
// now: bumping VERSION or editing the default CR without regenerating fails
// here.
func TestCommittedModuleTemplateIsCurrent(t *testing.T) {
	root := filepath.Join("..", "..")
	files, err := Files(root)
	require.NoError(t, err)
	require.Len(t, files, 3)
	for path, want := range files {
		got, err := os.ReadFile(filepath.Join(root, path))
		require.NoError(t, err, "run make module-template")
		assert.Equal(t, string(want), string(got), "%s is stale: run make module-template", path)
	}
}

// The ModuleTemplate and the ModuleReleaseMeta agree with each other and
// with VERSION the way the lifecycle manager looks them up: the channel's
// version names a ModuleTemplate <moduleName>-<version> of that module.
func TestTemplateAndReleaseMetaAgree(t *testing.T) {
	root := filepath.Join("..", "..")
	files, err := Files(root)
	require.NoError(t, err)
	raw, err := os.ReadFile(filepath.Join(root, "VERSION"))
	require.NoError(t, err)
	version := strings.TrimSpace(string(raw))

	var tmpl struct {
		Metadata struct{ Name, Namespace string } `json:"metadata"`
		Spec     struct {
			ModuleName string         `json:"moduleName"`
			Version    string         `json:"version"`
			Data       map[string]any `json:"data"`
			Descriptor struct {
				Component struct{ Name, Version string } `json:"component"`
			} `json:"descriptor"`
		} `json:"spec"`
	}
	require.NoError(t, yaml.Unmarshal(files[filepath.Join("module-template", "template.yaml")], &tmpl))
	var meta struct {
		Metadata struct{ Name, Namespace string } `json:"metadata"`
		Spec     struct {
			ModuleName       string `json:"moduleName"`
			OCMComponentName string `json:"ocmComponentName"`
			Channels         []struct{ Channel, Version string }
		} `json:"spec"`
	}
	require.NoError(t, yaml.Unmarshal(files[filepath.Join("module-template", "module-release-meta.yaml")], &meta))

	assert.Equal(t, version, tmpl.Spec.Version)
	assert.Equal(t, "Serverless", tmpl.Spec.Data["kind"])
	assert.Equal(t, tmpl.Spec.ModuleName+"-"+tmpl.Spec.Version, tmpl.Metadata.Name)
	assert.Equal(t, tmpl.Metadata.Namespace, meta.Metadata.Namespace)
	assert.Equal(t, tmpl.Spec.ModuleName, meta.Spec.ModuleName)
	assert.Equal(t, meta.Spec.ModuleName, meta.Metadata.Name)
	assert.Equal(t, tmpl.Spec.Descriptor.Component.Name, meta.Spec.OCMComponentName)
	assert.Equal(t, version, tmpl.Spec.Descriptor.Component.Version)
	require.Len(t, meta.Spec.Channels, 1)
	assert.Equal(t, "regular", meta.Spec.Channels[0].Channel)
	assert.Equal(t, version, meta.Spec.Channels[0].Version)
}
