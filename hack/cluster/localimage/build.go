package localimage

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/kyma-project/serverless-manager/operator/pkg/ociimage"
)

// Builder builds the local images.
type Builder struct {
	// Root is the repository (the Go module, hack/image/runtimes).
	Root string
	// Assets holds the tools hack/tools.sh builds (bin/assets): the
	// registry's binary.
	Assets string
	// Cache keeps downloads (Node.js and npm from the npm registry)
	// between builds.
	Cache string
	// CACerts is this machine's CA bundle: the package registries are
	// reached through TLS it signs (npm, pip in the runtime images).
	CACerts []byte
	// Created is every timestamp in the images (zero: the Unix epoch).
	Created time.Time
}

// NodeImages are the images the node needs for itself, before any image
// of the module.
func NodeImages() []string { return []string{Pause, Busybox} }

// Names are every local image.
func Names() []string { return append(NodeImages(), ChartImages()...) }

// ChartImages are the local images that stand in for the chart's: the
// runtimes, the registry and the init containers.
func ChartImages() []string {
	names := []string{Registry, RegistryInit, BuildlessInit}
	for _, rt := range Runtimes() {
		names = append(names, RuntimeImage(rt.Name))
	}
	return names
}

// Build builds the local image name.
func (b Builder) Build(ctx context.Context, name string) (v1.Image, error) {
	img, err := b.build(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("local image %s: %w", name, err)
	}
	return img, nil
}

func (b Builder) build(ctx context.Context, name string) (v1.Image, error) {
	switch name {
	case Pause:
		return b.goImage(ctx, "./hack/image/pause", "pause", nil, "65535")
	case RegistryInit:
		// runs as root with CHOWN only (the chart's init container)
		return b.goImage(ctx, "./hack/image/registry-init", "registry-init", nil, "")
	case Busybox:
		base, err := b.busybox()
		if err != nil {
			return nil, err
		}
		return b.image(name, config{Cmd: []string{"sh"}, Env: []string{pathEnv}}, base)
	case Registry:
		return b.registry()
	case BuildlessInit:
		return b.buildlessInit(ctx)
	}
	for _, rt := range Runtimes() {
		if name == RuntimeImage(rt.Name) {
			return b.runtime(ctx, rt)
		}
	}
	return nil, fmt.Errorf("no local image %q; they are %s", name, strings.Join(Names(), ", "))
}

const pathEnv = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// config is the part of an image's configuration the local images set.
type config struct {
	Entrypoint, Cmd, Env []string
	WorkingDir, User     string
	Labels               map[string]string
}

// image stacks the layers of trees and sets the configuration.
func (b Builder) image(title string, c config, trees ...tree) (v1.Image, error) {
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	created := b.created()
	for _, t := range trees {
		l, err := t.layer(created)
		if err != nil {
			return nil, err
		}
		if img, err = mutate.Append(img, mutate.Addendum{Layer: l, History: v1.History{Created: v1.Time{Time: created}, CreatedBy: "localimage: " + title}}); err != nil {
			return nil, err
		}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Created = v1.Time{Time: created}
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	labels := map[string]string{
		ociimage.LabelTitle:  title,
		ociimage.LabelSource: ociimage.Source,
		// what no published image is: built here for the local cluster only
		"io.kyma-project.serverless.local": "true",
	}
	for k, v := range c.Labels {
		labels[k] = v
	}
	cf.Config = v1.Config{Entrypoint: c.Entrypoint, Cmd: c.Cmd, Env: c.Env, WorkingDir: c.WorkingDir, User: c.User, Labels: labels}
	return mutate.ConfigFile(img, cf)
}

func (b Builder) created() time.Time {
	if b.Created.IsZero() {
		return time.Unix(0, 0).UTC()
	}
	return b.Created.UTC()
}

// goImage is a static Go program of this repository as the entrypoint of
// an image with nothing else but CA certificates and /tmp.
func (b Builder) goImage(ctx context.Context, pkg, binary string, cmd []string, user string) (v1.Image, error) {
	dir, err := os.MkdirTemp("", "localimage-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	out := filepath.Join(dir, binary)
	if err := ociimage.GoBuild(ctx, b.Root, pkg, "linux", runtime.GOARCH, out); err != nil {
		return nil, err
	}
	t := b.baseFiles()
	if err := t.hostFile(out, binary); err != nil {
		return nil, err
	}
	return b.image(binary, config{Entrypoint: []string{"/" + binary}, Cmd: cmd, User: user}, t)
}

// baseFiles are what every local image holds: users, CA certificates, a
// writable /tmp mount point. uid 1000 is the runtimes' and builds' user;
// its home is /tmp, the only place it may write.
func (b Builder) baseFiles() tree {
	t := tree{}
	t.file("etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/bin/sh\n"+
		"app:x:1000:1000:app:/tmp:/bin/sh\n"+
		"nobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"))
	t.file("etc/group", 0o644, []byte("root:x:0:\napp:x:1000:\nnogroup:x:65534:\n"))
	t.file(strings.TrimPrefix(ociimage.CACertsPath, "/"), 0o644, b.CACerts)
	t.add(ociimage.File{Path: "tmp", Mode: fs.ModeDir | fs.ModeSticky | 0o777})
	t.dir("root", 0o700)
	return t
}

// busybox is the base of the images that need a shell: Debian's static
// busybox with a link for every applet.
func (b Builder) busybox() (tree, error) {
	const bin = "/bin/busybox"
	t := b.baseFiles()
	if err := t.hostFile(bin, bin); err != nil {
		return nil, fmt.Errorf("%w (apt-get install busybox-static)", err)
	}
	out, err := exec.Command(bin, "--list-full").Output()
	if err != nil {
		return nil, fmt.Errorf("%s --list-full: %w", bin, err)
	}
	for _, applet := range strings.Fields(string(out)) {
		if "/"+applet != bin {
			t.symlink(applet, bin)
		}
	}
	return t, nil
}

// registry is distribution as its published image runs it: `registry`
// as entrypoint, `serve <config>` the default arguments.
func (b Builder) registry() (v1.Image, error) {
	t := b.baseFiles()
	if err := t.hostFile(filepath.Join(b.Assets, "registry"), "bin/registry"); err != nil {
		return nil, fmt.Errorf("%w (hack/tools.sh builds it)", err)
	}
	t.file("etc/distribution/config.yml", 0o644, []byte("version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: /var/lib/registry\nhttp:\n  addr: :5000\n"))
	t.dir("var/lib/registry", 0o755)
	return b.image(Registry, config{
		Entrypoint: []string{"/bin/registry"},
		Cmd:        []string{"serve", "/etc/distribution/config.yml"},
		User:       "1000",
	}, t)
}

// buildlessInit stands in for release 1.13's init container of Git
// Functions: a shell and /app/gitcloner, which is our Function
// controller's `fetch` under the environment 1.13's cloner reads.
func (b Builder) buildlessInit(ctx context.Context) (v1.Image, error) {
	base, err := b.busybox()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "localimage-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	out := filepath.Join(dir, "function-controller")
	if err := ociimage.GoBuild(ctx, b.Root, "./operator/cmd/function-controller", "linux", runtime.GOARCH, out); err != nil {
		return nil, err
	}
	app := tree{}
	if err := app.hostFile(out, "app/function-controller"); err != nil {
		return nil, err
	}
	app.file("app/gitcloner", 0o755, []byte("#!/bin/sh\n"+
		"# release 1.13's cloner writes APP_REPOSITORY_COMMIT into APP_DESTINATION_PATH\n"+
		"APP_MOUNT_PATH=\"$APP_DESTINATION_PATH\" exec /app/function-controller fetch\n"))
	return b.image(BuildlessInit, config{Cmd: []string{"sh"}, Env: []string{pathEnv}, User: "1000"}, base, app)
}
