package build

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/kyma-project/serverless-manager/operator/pkg/ociimage"
)

// Options are one build's inputs, the same for both of our steps.
type Options struct {
	// Runtime names the Function's runtime (its Runtime layout).
	Runtime string
	// BaseImage is the runtime image the Function's layers go on.
	BaseImage string
	// Destination is the image to push.
	Destination string
	// CacheRepository keeps the dependency layers, one image per key.
	CacheRepository string
	// SourceDir holds the Function's sources, DependenciesDir what the
	// dependency step installed, StateDir what prepare tells the others.
	SourceDir, DependenciesDir, StateDir string
	// PackageConfigDigest identifies the package registry configuration
	// (the controller hashes the Secret; the config never reaches us).
	PackageConfigDigest string
	// Insecure talks plain HTTP to the registries, SkipTLSVerify does not
	// verify their certificates; Cache off installs and pushes anew.
	Insecure, SkipTLSVerify, Cache bool
	// Keychain gives the registry credentials (DOCKER_CONFIG's).
	Keychain authn.Keychain
	// Created is the time every layer and the config carry (zero: the
	// Unix epoch), so the same inputs give the same image.
	Created time.Time

	// transport carries every registry request of one step, so its
	// requests reuse connections (withTransport sets it).
	transport http.RoundTripper
}

// State files prepare writes into StateDir.
const (
	// StateKey holds the dependency key.
	StateKey = "key"
	// StateCached exists when the dependency layer of the key is kept:
	// the dependency step has nothing to install.
	StateCached = "cached"
)

// DependencyKey is what determines a dependency layer: the base image (by
// digest), the dependency list and the package registry configuration.
func DependencyKey(baseDigest v1.Hash, dependencies []byte, packageConfigDigest string) string {
	h := sha256.New()
	for _, part := range [][]byte{[]byte(baseDigest.String()), dependencies, []byte(packageConfigDigest)} {
		fmt.Fprintf(h, "%d:", len(part))
		h.Write(part)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Prepare writes the dependency key into the state directory and marks it
// cached when the Function registry keeps its layer.
func Prepare(ctx context.Context, o Options) (key string, cached bool, err error) {
	o = o.withTransport()
	rt, err := RuntimeOf(o.Runtime)
	if err != nil {
		return "", false, err
	}
	deps, err := os.ReadFile(filepath.Join(o.SourceDir, rt.DependencyFile))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", false, fmt.Errorf("reading the dependency list: %w", err)
	}
	base, err := o.reference(o.BaseImage)
	if err != nil {
		return "", false, fmt.Errorf("base image: %w", err)
	}
	desc, err := remote.Head(base, o.remote(ctx)...)
	if err != nil {
		return "", false, describe("base image", base, err)
	}
	key = DependencyKey(desc.Digest, deps, o.PackageConfigDigest)
	if err := os.WriteFile(filepath.Join(o.StateDir, StateKey), []byte(key), 0o644); err != nil {
		return "", false, err
	}
	if !o.Cache {
		return key, false, nil
	}
	cache, err := o.cacheRef(key)
	if err != nil {
		return "", false, err
	}
	if _, err := remote.Head(cache, o.remote(ctx)...); err != nil {
		if isNotFound(err) {
			return key, false, nil
		}
		return "", false, describe("dependency cache", cache, err)
	}
	return key, true, os.WriteFile(filepath.Join(o.StateDir, StateCached), nil, 0o644)
}

// Image builds the Function's image on the base image and pushes it to the
// destination: the dependency layer (the kept one of the key, or one made
// of what the dependency step installed, which is then kept), the source
// layer and the runtime's configuration. It returns the pushed digest.
func Image(ctx context.Context, o Options) (v1.Hash, error) {
	o = o.withTransport()
	rt, err := RuntimeOf(o.Runtime)
	if err != nil {
		return v1.Hash{}, err
	}
	key, err := os.ReadFile(filepath.Join(o.StateDir, StateKey))
	if err != nil {
		return v1.Hash{}, fmt.Errorf("the dependency key of the prepare step: %w", err)
	}
	_, statErr := os.Stat(filepath.Join(o.StateDir, StateCached))
	cached := statErr == nil

	baseRef, err := o.reference(o.BaseImage)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("base image: %w", err)
	}
	base, err := o.baseImage(ctx, baseRef)
	if err != nil {
		return v1.Hash{}, err
	}
	deps, err := o.dependencyLayer(ctx, rt, string(key), cached)
	if err != nil {
		return v1.Hash{}, err
	}
	src, err := ociimage.DirLayer(o.SourceDir, rt.SourceDir, o.Created)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("source layer: %w", err)
	}
	img, err := mutate.Append(base,
		mutate.Addendum{Layer: deps, History: o.history("dependencies of " + rt.DependencyFile + " in " + rt.DependencyDir)},
		mutate.Addendum{Layer: src, History: o.history("Function sources in " + rt.SourceDir)},
	)
	if err != nil {
		return v1.Hash{}, err
	}
	if img, err = configure(img, rt, o.Created); err != nil {
		return v1.Hash{}, err
	}
	dest, err := o.reference(o.Destination)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("destination: %w", err)
	}
	if err := remote.Write(dest, img, o.remote(ctx)...); err != nil {
		return v1.Hash{}, describe("destination", dest, err)
	}
	return img.Digest()
}

// baseImage is the runtime base as the destination registry keeps it: a
// copy in the dependency cache repository, tagged with the base's digest,
// which the first build on that base pushes. Each new Function's
// repository then mounts the base's layers from there instead of receiving
// them, through this Pod, from the base's own registry. With the cache off
// the base is read where it is.
func (o Options) baseImage(ctx context.Context, ref name.Reference) (v1.Image, error) {
	base, err := remote.Image(ref, o.remote(ctx)...)
	if err != nil {
		return nil, describe("base image", ref, err)
	}
	if !o.Cache {
		return base, nil
	}
	digest, err := base.Digest()
	if err != nil {
		return nil, describe("base image", ref, err)
	}
	kept, err := o.reference(o.CacheRepository + ":" + BaseTagPrefix + digest.Hex)
	if err != nil {
		return nil, fmt.Errorf("base image copy: %w", err)
	}
	img, err := remote.Image(kept, o.remote(ctx)...)
	if err == nil {
		return img, nil
	}
	if !isNotFound(err) {
		return nil, describe("base image copy", kept, err)
	}
	if err := remote.Write(kept, base, o.remote(ctx)...); err != nil {
		return nil, describe("base image copy", kept, err)
	}
	if img, err = remote.Image(kept, o.remote(ctx)...); err != nil {
		return nil, describe("base image copy", kept, err)
	}
	return img, nil
}

// BaseTagPrefix starts the tags of base image copies in the dependency
// cache repository (the other tags there are dependency keys, hex only).
const BaseTagPrefix = "base-"

// dependencyLayer is the kept layer of key, or one made of the dependency
// step's output and kept under key for the next build.
func (o Options) dependencyLayer(ctx context.Context, rt Runtime, key string, cached bool) (v1.Layer, error) {
	cache, err := o.cacheRef(key)
	if err != nil {
		return nil, err
	}
	if cached {
		return o.keptLayer(ctx, cache)
	}
	dir := filepath.Join(o.DependenciesDir, rt.DependencySubdir)
	var layer v1.Layer
	if _, statErr := os.Stat(dir); errors.Is(statErr, os.ErrNotExist) {
		// Nothing installed (no dependencies); the volume is read-only here.
		layer, err = ociimage.EmptyLayer(o.Created)
	} else {
		layer, err = ociimage.DirLayer(dir, rt.DependencyDir, o.Created)
	}
	if err != nil {
		return nil, fmt.Errorf("dependency layer: %w", err)
	}
	if o.Cache {
		img, err := mutate.Append(empty.Image, mutate.Addendum{Layer: layer, History: o.history("dependencies, key " + key)})
		if err != nil {
			return nil, err
		}
		if err := remote.Write(cache, img, o.remote(ctx)...); err != nil {
			return nil, describe("dependency cache", cache, err)
		}
		// The kept layer, as the registry has it: pushing the Function's
		// image then mounts it instead of uploading it a second time.
		return o.keptLayer(ctx, cache)
	}
	return layer, nil
}

// keptLayer is the one layer of the dependency cache image cache, as a
// layer of that repository (mountable into the Function's).
func (o Options) keptLayer(ctx context.Context, cache name.Reference) (v1.Layer, error) {
	img, err := remote.Image(cache, o.remote(ctx)...)
	if err != nil {
		return nil, describe("dependency cache", cache, err)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		return nil, fmt.Errorf("dependency cache %s: want one layer, got %d: %v", cache, len(layers), err)
	}
	return layers[0], nil
}

// configure sets what the Dockerfiles set: the user, the working directory
// and the runtime's environment; the entrypoint stays the base image's.
func configure(img v1.Image, rt Runtime, created time.Time) (v1.Image, error) {
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Config.User = User
	if rt.WorkingDir != "" {
		cf.Config.WorkingDir = rt.WorkingDir
	}
	cf.Config.Env = append(cf.Config.Env, rt.Env...)
	cf.Created = v1.Time{Time: epoch(created)}
	return mutate.ConfigFile(img, cf)
}

func (o Options) history(what string) v1.History {
	return v1.History{Created: v1.Time{Time: epoch(o.Created)}, CreatedBy: "function-controller build: " + what}
}

func epoch(t time.Time) time.Time {
	if t.IsZero() {
		return time.Unix(0, 0).UTC()
	}
	return t.UTC()
}

func (o Options) reference(s string) (name.Reference, error) {
	var opts []name.Option
	if o.Insecure {
		opts = append(opts, name.Insecure)
	}
	return name.ParseReference(s, opts...)
}

func (o Options) cacheRef(key string) (name.Reference, error) {
	ref, err := o.reference(o.CacheRepository + ":" + key[:min(len(key), 64)])
	if err != nil {
		return nil, fmt.Errorf("dependency cache: %w", err)
	}
	return ref, nil
}

func (o Options) remote(ctx context.Context) []remote.Option {
	kc := o.Keychain
	if kc == nil {
		kc = authn.DefaultKeychain
	}
	if o.transport == nil {
		o = o.withTransport()
	}
	return []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(kc), remote.WithTransport(o.transport)}
}

// withTransport is o with the transport of its registry requests: a
// bounded connection time, and no certificate check when asked.
func (o Options) withTransport() Options {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = (&net.Dialer{Timeout: connectTimeout, KeepAlive: 30 * time.Second}).DialContext
	if o.SkipTLSVerify {
		tr.TLSClientConfig = &tls.Config{InsecureSkipVerify: true} //nolint:gosec // asked for with --skip-tls-verify
	}
	o.transport = tr
	return o
}

// connectTimeout bounds each connection attempt to a registry (Go's default
// is 30 s). A registry's Service answers within milliseconds, a public one
// within seconds; a connection sent to a registry Pod that was just deleted
// (the Service still pointed at it) gets no answer at all, and each such
// attempt, HTTPS then plain HTTP, held the build for the full 30 s.
const connectTimeout = 10 * time.Second
