package ociimage

import (
	"fmt"
	"os"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// RefNameAnnotation names an image in an OCI layout's index.
const RefNameAnnotation = "org.opencontainers.image.ref.name"

// WriteLayout replaces dir with an OCI image layout that holds img only,
// named ref (e.g. "europe-docker.pkg.dev/kyma-project/prod/serverless-manager:1.0.0"),
// for `skopeo copy oci:<dir> docker://...` or `crane push <dir> ...`.
func WriteLayout(dir string, img v1.Image, ref string) error {
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("replacing %s: %w", dir, err)
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("OCI layout %s: %w", dir, err)
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{RefNameAnnotation: ref})); err != nil {
		return fmt.Errorf("OCI layout %s: %w", dir, err)
	}
	return nil
}

// ReadLayout returns the one image of the OCI layout in dir and its name.
func ReadLayout(dir string) (v1.Image, string, error) {
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, "", fmt.Errorf("OCI layout %s: %w", dir, err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, "", fmt.Errorf("OCI layout %s: %w", dir, err)
	}
	if len(m.Manifests) != 1 {
		return nil, "", fmt.Errorf("OCI layout %s: %d manifests, want 1", dir, len(m.Manifests))
	}
	img, err := idx.Image(m.Manifests[0].Digest)
	if err != nil {
		return nil, "", fmt.Errorf("OCI layout %s: %w", dir, err)
	}
	return img, m.Manifests[0].Annotations[RefNameAnnotation], nil
}
