package main

import (
	"context"
	"fmt"
	"path/filepath"
	"time"
)

// imageRegistry runs the registry the node pulls every image from
// (distribution, as the chart's internal registry), on the node's address:
// Pods reach it too, which build steps do to read the runtime images. It
// starts with the images the node needs for itself (localimage.NodeImages).
type imageRegistry struct{}

func (imageRegistry) Name() string { return "image registry" }

func (imageRegistry) daemon(ac *actionContext) daemon {
	config := ac.path("registry.yaml")
	return daemon{name: "image-registry", path: filepath.Join(ac.assets, "registry"), args: []string{"serve", config}, config: config, grace: 5 * time.Second}
}

// Up writes its configuration, starts it, waits for its port and pushes
// the node's own images.
func (r imageRegistry) Up(ctx context.Context, ac *actionContext) error {
	config := `version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: ` + ac.path("registry") + `
  delete:
    enabled: true
http:
  addr: ` + ac.registry() + `
`
	if err := ac.startConfigured(r.daemon(ac), config); err != nil {
		return err
	}
	if err := ac.waitListening(ctx, "image-registry", "the image registry", ac.registry()); err != nil {
		return err
	}
	if err := ac.pushNodeImages(ctx); err != nil {
		return fmt.Errorf("the node's own images: %w", err)
	}
	return nil
}

func (r imageRegistry) Down(_ context.Context, ac *actionContext) error { return ac.stop(r.daemon(ac)) }
