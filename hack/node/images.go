package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/kyma-project/serverless-manager/hack/cluster/localimage"
	"github.com/kyma-project/serverless-manager/operator/pkg/ociimage"
	"github.com/kyma-project/serverless-manager/tests/support/repo"
)

// pushNodeImages builds and pushes what the node needs before anything
// else: the sandbox image and busybox (the shell the cluster tests run).
func (ac *actionContext) pushNodeImages(ctx context.Context) error {
	root, err := repo.Root()
	if err != nil {
		return err
	}
	caCerts, err := ociimage.ReadCACerts(ociimage.CACertsPath)
	if err != nil {
		return err
	}
	b := localimage.Builder{Root: root, Assets: ac.assets, Cache: filepath.Join(root, "bin", "cache"), CACerts: caCerts}
	for _, image := range localimage.NodeImages() {
		img, err := b.Build(ctx, image)
		if err != nil {
			return err
		}
		if _, err := ac.push(ctx, img, localimage.Ref(ac.registry(), image)); err != nil {
			return err
		}
	}
	return nil
}

// load pushes every OCI layout below the images directory (`make image`:
// the module's images under their published names, the local ones below
// local/) into the node's registry. An image whose tag now names other
// content is removed from the node's cache, so the next Pod pulls it.
func (ac *actionContext) load(ctx context.Context) error {
	var layouts []string
	err := filepath.WalkDir(ac.images, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && d.Name() == "index.json" {
			layouts = append(layouts, filepath.Dir(p))
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("images built by make image: %w", err)
	}
	if len(layouts) == 0 {
		return fmt.Errorf("no image in %s: run make image first", ac.images)
	}
	var errs []error
	for _, dir := range layouts {
		img, ref, err := ociimage.ReadLayout(dir)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		target, local, err := localimage.NodeRef(ac.registry(), ref)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", dir, err))
			continue
		}
		changed, err := ac.push(ctx, img, target)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		pulledAs := ref
		if local {
			pulledAs = target
		}
		if changed {
			if err := ac.forget(pulledAs); err != nil {
				errs = append(errs, err)
			}
		}
		if changed || pulledAs != target {
			ac.log.Printf("%s → %s", pulledAs, target)
		}
	}
	return errors.Join(errs...)
}

// push writes img to target; changed says the tag named other content before.
func (ac *actionContext) push(ctx context.Context, img v1.Image, target string) (changed bool, err error) {
	ref, err := name.ParseReference(target, name.Insecure)
	if err != nil {
		return false, err
	}
	digest, err := img.Digest()
	if err != nil {
		return false, err
	}
	if desc, err := remote.Head(ref, remote.WithContext(ctx)); err == nil {
		if desc.Digest == digest {
			return false, nil
		}
		changed = true
	}
	if err := remote.Write(ref, img, remote.WithContext(ctx)); err != nil {
		return false, fmt.Errorf("pushing %s: %w", target, err)
	}
	return changed, nil
}

// forget removes an image from containerd's cache (when containerd runs).
func (ac *actionContext) forget(image string) error {
	if _, ok := ac.daemonPID("containerd"); !ok {
		return nil
	}
	out, err := output("ctr", "--address", ac.containerdSocket(), "--namespace", "k8s.io", "images", "rm", image)
	if err != nil {
		return fmt.Errorf("%w: %s", err, out)
	}
	return nil
}
