// Package manifests builds the manager's install manifests from config/
// with the kustomize API.
package manifests

import (
	"fmt"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/kustomize/kyaml/kio"
	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// ManagerImage is the image name config/manager uses; Build can replace it.
const ManagerImage = "europe-docker.pkg.dev/kyma-project/prod/serverless-manager"

// Build runs kustomize on dir and returns the YAML. A non-empty image
// replaces the manager's image reference.
func Build(dir, image string) ([]byte, error) {
	fs := filesys.MakeFsOnDisk()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	res, err := k.Run(fs, dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	if image != "" {
		for _, r := range res.Resources() {
			if r.GetKind() != "Deployment" || r.GetName() != "serverless-manager" {
				continue
			}
			if err := r.ApplyFilter(setManagerImage(image)); err != nil {
				return nil, fmt.Errorf("setting the manager image: %w", err)
			}
		}
	}
	return res.AsYaml()
}

// setManagerImage sets the image of the manager container.
func setManagerImage(image string) kio.Filter {
	return kio.FilterFunc(func(nodes []*yaml.RNode) ([]*yaml.RNode, error) {
		for _, n := range nodes {
			c, err := n.Pipe(yaml.Lookup("spec", "template", "spec", "containers", "[name=manager]"))
			if err != nil {
				return nil, err
			}
			if c == nil {
				return nil, fmt.Errorf("no manager container in %s", n.GetName())
			}
			if err := c.PipeE(yaml.SetField("image", yaml.NewScalarRNode(image))); err != nil {
				return nil, err
			}
		}
		return nodes, nil
	})
}
