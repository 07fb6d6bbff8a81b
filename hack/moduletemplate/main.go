// Command moduletemplate writes module-template/ from the VERSION file and
// the default CR, so the module always announces the version the binary is
// built from (`make module-template`):
//
//   - module-config.yaml: the input of Kyma's modulectl, which publishes the
//     module's OCM component;
//   - template.yaml: the ModuleTemplate (operator.kyma-project.io/v1beta2)
//     of this version, named <module>-<version> as the lifecycle manager
//     expects; its descriptor (required by the CRD, no longer read at run
//     time: the lifecycle manager fetches the published component) names the
//     component and the manager image;
//   - module-release-meta.yaml: the ModuleReleaseMeta that assigns this
//     version to the channel, how current lifecycle managers find a module.
package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"
)

// Module facts shared by the three files.
const (
	moduleName   = "serverless"
	component    = "kyma-project.io/module/serverless"
	provider     = "kyma-project.io"
	channel      = "regular"
	kcpNamespace = "kcp-system"
	imageRepo    = "europe-docker.pkg.dev/kyma-project/prod/serverless-manager"
	repository   = "https://github.com/kyma-project/serverless-manager"
	docs         = "https://kyma-project.io/#/serverless-manager/user/README"
	icon         = "https://raw.githubusercontent.com/kyma-project/kyma/refs/heads/main/docs/assets/logo_icon.svg"
	manifestName = "serverless-manager.yaml"
)

// Files returns the generated files by path, relative to root.
func Files(root string) (map[string][]byte, error) {
	version, err := os.ReadFile(filepath.Join(root, "VERSION"))
	if err != nil {
		return nil, err
	}
	v := strings.TrimSpace(string(version))
	crYAML, err := os.ReadFile(filepath.Join(root, "config", "samples", "default-serverless-cr.yaml"))
	if err != nil {
		return nil, err
	}
	var cr map[string]any
	if err := yaml.Unmarshal(crYAML, &cr); err != nil {
		return nil, err
	}
	image := imageRepo + ":" + v
	manager := map[string]any{"name": "serverless-manager", "namespace": "kyma-system", "group": "apps", "version": "v1", "kind": "Deployment"}
	associated := []any{map[string]any{"group": "serverless.kyma-project.io", "version": "v1alpha2", "kind": "Function"}}
	rawManifest := repository + "/releases/download/" + v + "/" + manifestName

	icons := []any{map[string]any{"name": "module-icon", "link": icon}}
	// The raw manifest under the name modulectl and the lifecycle manager use.
	resources := []any{map[string]any{"name": "raw-manifest", "link": rawManifest}}
	// modulectl's config: the manifest is the file `make render` writes.
	config := map[string]any{
		"name":                component,
		"version":             v,
		"manifest":            manifestName,
		"defaultCR":           "../config/samples/default-serverless-cr.yaml",
		"repository":          repository,
		"documentation":       docs,
		"icons":               icons,
		"annotations":         map[string]any{"operator.kyma-project.io/doc-url": docs},
		"manager":             manager,
		"associatedResources": associated,
		"resources":           resources,
	}
	template := map[string]any{
		"apiVersion": "operator.kyma-project.io/v1beta2",
		"kind":       "ModuleTemplate",
		"metadata": map[string]any{
			"name":      moduleName + "-" + v,
			"namespace": kcpNamespace,
			"labels":    map[string]any{"operator.kyma-project.io/module-name": moduleName},
			// The module's CR is namespaced.
			"annotations": map[string]any{"operator.kyma-project.io/is-cluster-scoped": "false"},
		},
		"spec": map[string]any{
			"moduleName":          moduleName,
			"version":             v,
			"mandatory":           false,
			"data":                cr,
			"manager":             manager,
			"associatedResources": associated,
			"resources":           resources,
			"info": map[string]any{
				"repository":    repository,
				"documentation": docs,
				"icons":         icons,
			},
			// An OCM component descriptor (schema v2).
			"descriptor": map[string]any{
				"meta": map[string]any{"schemaVersion": "v2"},
				"component": map[string]any{
					"name":                component,
					"version":             v,
					"provider":            provider,
					"repositoryContexts":  []any{},
					"sources":             []any{},
					"componentReferences": []any{},
					"resources": []any{map[string]any{
						"name":     "module-image",
						"type":     "ociArtifact",
						"relation": "external",
						"version":  v,
						"access":   map[string]any{"type": "ociArtifact", "imageReference": image},
					}},
				},
			},
		},
	}
	releaseMeta := map[string]any{
		"apiVersion": "operator.kyma-project.io/v1beta2",
		"kind":       "ModuleReleaseMeta",
		"metadata":   map[string]any{"name": moduleName, "namespace": kcpNamespace},
		"spec": map[string]any{
			"moduleName":       moduleName,
			"ocmComponentName": component,
			"channels":         []any{map[string]any{"channel": channel, "version": v}},
		},
	}
	out := map[string][]byte{}
	for name, obj := range map[string]any{"module-config.yaml": config, "template.yaml": template, "module-release-meta.yaml": releaseMeta} {
		data, err := yaml.Marshal(obj)
		if err != nil {
			return nil, err
		}
		header := "# Generated by `make module-template` from VERSION and config/samples; do not edit.\n"
		if name == "module-config.yaml" {
			header += "# modulectl create -c module-template/module-config.yaml, with " + manifestName + " from `make render IMG=" + image + "` next to it.\n"
		}
		out[filepath.Join("module-template", name)] = append([]byte(header), data...)
	}
	return out, nil
}

func main() {
	files, err := Files(".")
	if err != nil {
		fmt.Fprintln(os.Stderr, "moduletemplate:", err)
		os.Exit(1)
	}
	for path, data := range files {
		if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) {
			continue
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "moduletemplate:", err)
			os.Exit(1)
		}
		fmt.Println("wrote", path)
	}
}
