// Command image builds the OCI image of each binary of the module without
// a container engine: `make image` writes bin/image/<binary>/, an OCI image
// layout (push it with `skopeo copy oci:bin/image/manager docker://...`).
// The Dockerfile builds the same image where a container engine exists.
// It also writes the local cluster's own images (hack/cluster/localimage:
// runtimes, registry, init containers) to bin/image/local/<name>/, which
// `hack/cluster.sh load` pushes to the real node with the module's.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/kyma-project/serverless-manager/hack/cluster/localimage"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
	"github.com/kyma-project/serverless-manager/operator/pkg/ociimage"
	"github.com/kyma-project/serverless-manager/tests/support/repo"
)

// defaultRepository is where the module's images are published (the chart's
// global.imageRegistry).
const defaultRepository = "europe-docker.pkg.dev/kyma-project/prod"

// options of one run; binaries empty means every binary of the module.
type options struct {
	root       string
	out        string
	repository string
	arch       string
	caCerts    string
	created    time.Time
	binaries   []string
	// local are the local images to build.
	local []string
}

// result is one image written.
type result struct {
	identity module.Identity
	dir      string
	ref      string
	digest   v1.Hash
	size     int64
}

func main() {
	root, err := repo.Root()
	if err != nil {
		fail(err)
	}
	o := options{root: root}
	flag.StringVar(&o.out, "out", filepath.Join(root, "bin", "image"), "directory that gets one OCI layout per binary")
	flag.StringVar(&o.repository, "repository", defaultRepository, "image repository prefix of the reference names")
	flag.StringVar(&o.arch, "arch", runtime.GOARCH, "target architecture (GOARCH)")
	flag.StringVar(&o.caCerts, "ca-certs", ociimage.CACertsPath, "CA bundle of the build machine copied into the images")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: image [flags] [image ...]\n\nbinaries: %s\nlocal images: %s\n(default: the binaries and %s)\n\n",
			strings.Join(binaryNames(), ", "), strings.Join(localimage.Names(), ", "), strings.Join(localimage.ChartImages(), ", "))
		flag.PrintDefaults()
	}
	flag.Parse()
	if o.binaries, o.local, err = splitNames(flag.Args()); err != nil {
		fail(err)
	}
	if o.created, err = sourceDateEpoch(os.Getenv("SOURCE_DATE_EPOCH")); err != nil {
		fail(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	results, err := run(ctx, o)
	for _, r := range results {
		rel, _ := filepath.Rel(root, r.dir)
		fmt.Printf("%s: %s %s %.1f MB\n", rel, r.ref, r.digest, float64(r.size)/1e6)
	}
	if err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "image:", err)
	os.Exit(1)
}

// splitNames sorts the names asked for into binaries and local images;
// none means every binary and the local images that stand in for the
// chart's (the node builds its own, pause and busybox).
func splitNames(names []string) (binaries, local []string, err error) {
	if len(names) == 0 {
		return binaryNames(), localimage.ChartImages(), nil
	}
	for _, n := range names {
		switch {
		case slices.Contains(binaryNames(), n):
			binaries = append(binaries, n)
		case slices.Contains(localimage.Names(), n):
			local = append(local, n)
		default:
			return nil, nil, fmt.Errorf("no image %q; binaries: %s; local images: %s", n,
				strings.Join(binaryNames(), ", "), strings.Join(localimage.Names(), ", "))
		}
	}
	return binaries, local, nil
}

func binaryNames() []string {
	var names []string
	for _, id := range module.Binaries() {
		names = append(names, id.Binary)
	}
	return names
}

// sourceDateEpoch is the reproducible-builds convention for the one
// timestamp of a build; unset means the Unix epoch.
func sourceDateEpoch(v string) (time.Time, error) {
	if v == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	sec, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH %q: %w", v, err)
	}
	return time.Unix(sec, 0).UTC(), nil
}

// run builds the images of the selected binaries and local images. An
// image that fails does not stop the others; every failure is in the
// returned error.
func run(ctx context.Context, o options) ([]result, error) {
	ids, err := selectBinaries(o.binaries)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(filepath.Join(o.root, "VERSION"))
	if err != nil {
		return nil, fmt.Errorf("version: %w", err)
	}
	version := strings.TrimSpace(string(data))
	caCerts, err := ociimage.ReadCACerts(o.caCerts)
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "image-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(tmp) }()

	revision := gitRevision(ctx, o.root)
	// Two lanes side by side, about equally long: the binaries (go build,
	// then their images) and the local images (one after another: they
	// share the Builder's download cache).
	var bins, locals lane
	var lanes sync.WaitGroup
	lanes.Go(func() {
		for _, id := range ids {
			spec := ociimage.Spec{
				Title:      imageName(id),
				Binary:     id.Binary,
				BinaryPath: filepath.Join(tmp, id.Binary),
				CACerts:    caCerts,
				Version:    version,
				Revision:   revision,
				Created:    o.created,
				OS:         "linux",
				Arch:       o.arch,
			}
			r, err := buildOne(ctx, o, id, spec)
			bins.add(r, wrapErr(id.Binary, err))
		}
	})
	lanes.Go(func() {
		b := localimage.Builder{Root: o.root, Assets: filepath.Join(o.root, "bin", "assets"),
			Cache: filepath.Join(o.root, "bin", "cache"), CACerts: caCerts, Created: o.created}
		for _, name := range o.local {
			r, err := buildLocal(ctx, o, b, name)
			locals.add(r, err)
		}
	})
	lanes.Wait()
	return append(bins.results, locals.results...), errors.Join(append(bins.errs, locals.errs...)...)
}

// lane is what one lane of run built, in its order, and its failures.
type lane struct {
	results []result
	errs    []error
}

func (l *lane) add(r result, err error) {
	if err != nil {
		l.errs = append(l.errs, err)
		return
	}
	l.results = append(l.results, r)
}

func wrapErr(binary string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", binary, err)
}

func buildLocal(ctx context.Context, o options, b localimage.Builder, name string) (result, error) {
	img, err := b.Build(ctx, name)
	if err != nil {
		return result{}, err
	}
	return result{dir: filepath.Join(o.out, "local", name), ref: localimage.LayoutRef(name)}.write(img)
}

// write puts img as an OCI layout into r.dir, tagged r.ref, and returns r
// with the image's digest and compressed size.
func (r result) write(img v1.Image) (result, error) {
	if err := ociimage.WriteLayout(r.dir, img, r.ref); err != nil {
		return result{}, err
	}
	var err error
	if r.digest, err = img.Digest(); err != nil {
		return result{}, err
	}
	r.size, err = compressedSize(img)
	return r, err
}

func selectBinaries(names []string) ([]module.Identity, error) {
	var ids []module.Identity
	for _, n := range names {
		found := false
		for _, id := range module.Binaries() {
			if id.Binary == n {
				ids, found = append(ids, id), true
			}
		}
		if !found {
			return nil, fmt.Errorf("no binary %q; the module's binaries are %s", n, strings.Join(binaryNames(), ", "))
		}
	}
	return ids, nil
}

func buildOne(ctx context.Context, o options, id module.Identity, spec ociimage.Spec) (result, error) {
	if err := ociimage.GoBuild(ctx, o.root, id.Package, spec.OS, spec.Arch, spec.BinaryPath); err != nil {
		return result{}, err
	}
	img, err := ociimage.Build(spec)
	if err != nil {
		return result{}, err
	}
	return result{
		identity: id,
		dir:      filepath.Join(o.out, id.Binary),
		ref:      o.repository + "/" + imageName(id) + ":" + spec.Version,
	}.write(img)
}

// compressedSize is what a registry stores and a node pulls: the layers,
// the config and the manifest.
func compressedSize(img v1.Image) (int64, error) {
	m, err := img.Manifest()
	if err != nil {
		return 0, err
	}
	raw, err := img.RawManifest()
	if err != nil {
		return 0, err
	}
	size := m.Config.Size + int64(len(raw))
	for _, l := range m.Layers {
		size += l.Size
	}
	return size, nil
}

// imageName is the repository name of a binary's image under the module's
// registry path, as config/manager and the chart's values refer to them:
// serverless-manager, serverless-function-controller, serverless-registry-agent.
func imageName(id module.Identity) string { return module.Name + "-" + id.Binary }

// gitRevision is HEAD's commit, or "" outside a git checkout.
func gitRevision(ctx context.Context, dir string) string {
	cmd := exec.CommandContext(ctx, "git", "rev-parse", "HEAD")
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}
