// Package manifests builds the manager's install manifests from config/
// with the kustomize API.
package manifests

import (
	"fmt"
	"strings"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/kustomize/kyaml/kio"
	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// ManagerImage is the image name config/manager uses; Build can replace it.
const ManagerImage = "europe-docker.pkg.dev/kyma-project/prod/serverless-manager"

// Build runs kustomize on dir and returns the YAML. A non-empty image
// replaces the manager's image reference; env (NAME=VALUE) is added to the
// manager's environment (e.g. the chart's image keys, IMAGE_<KEY>).
func Build(dir, image string, env ...string) ([]byte, error) {
	fs := filesys.MakeFsOnDisk()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	res, err := k.Run(fs, dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	if image != "" || len(env) > 0 {
		for _, r := range res.Resources() {
			if r.GetKind() != "Deployment" || r.GetName() != "serverless-manager" {
				continue
			}
			if err := r.ApplyFilter(editManager(image, env)); err != nil {
				return nil, fmt.Errorf("editing the manager's container: %w", err)
			}
		}
	}
	return res.AsYaml()
}

// editManager sets the image of the manager container and adds env.
func editManager(image string, env []string) kio.Filter {
	return kio.FilterFunc(func(nodes []*yaml.RNode) ([]*yaml.RNode, error) {
		for _, n := range nodes {
			c, err := n.Pipe(yaml.Lookup("spec", "template", "spec", "containers", "[name=manager]"))
			if err != nil {
				return nil, err
			}
			if c == nil {
				return nil, fmt.Errorf("no manager container in %s", n.GetName())
			}
			if image != "" {
				if err := c.PipeE(yaml.SetField("image", yaml.NewScalarRNode(image))); err != nil {
					return nil, err
				}
			}
			for _, kv := range env {
				name, value, ok := strings.Cut(kv, "=")
				if !ok || name == "" {
					return nil, fmt.Errorf("env %q is not NAME=VALUE", kv)
				}
				list, err := c.Pipe(yaml.LookupCreate(yaml.SequenceNode, "env"))
				if err != nil {
					return nil, err
				}
				// Values are strings: "true" stays the string Kubernetes wants.
				entry := yaml.NewMapRNode(&map[string]string{"name": name})
				if err := entry.PipeE(yaml.SetField("value", yaml.NewStringRNode(value))); err != nil {
					return nil, err
				}
				if err := list.PipeE(yaml.Append(entry.YNode())); err != nil {
					return nil, err
				}
			}
		}
		return nodes, nil
	})
}
