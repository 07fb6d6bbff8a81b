package ociimage

import (
	"fmt"
	"io"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// ReadAll reads every part of img as a node pulling it does: its config
// and each layer's bytes. With a remote image, an error means the registry
// could not serve some part.
func ReadAll(img v1.Image) error {
	if _, err := img.RawConfigFile(); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	for _, l := range layers {
		rc, err := l.Compressed()
		if err != nil {
			return err
		}
		_, err = io.Copy(io.Discard, rc)
		if cerr := rc.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			d, _ := l.Digest()
			return fmt.Errorf("layer %s: %w", d, err)
		}
	}
	return nil
}
