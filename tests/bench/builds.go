package main

// The build bench (-builds): real builds on the local cluster, as
// tests/e2e's TestRealBuildsWithNpmDependencies runs them (the chart's
// registry software as a process with htpasswd, build Pods' containers run
// as processes by tests/framework/buildrun, npm against the npm registry),
// for a Node Function with a few real dependencies:
//
//   - a cold build: its steps' times, against the physical limit here, the
//     same `npm install` run alone plus a push of the same layers;
//   - a source-only rebuild and a second Function with the same
//     dependencies: the build step's time, and no install;
//   - the registry's bytes on disk for benchBuildFunctions Functions with the
//     same dependencies against one dependency layer + N × (source layer +
//     manifest + config).

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/tests/framework"
	"github.com/kyma-project/serverless-manager/tests/framework/buildrun"
)

// benchBuildFunctions share one dependency list in the bytes figure.
const benchBuildFunctions = 20

// benchColdSamples is how many cold builds the ratio's median takes.
const benchColdSamples = 5

// benchDependencies are a few real npm packages (lodash is the bulk).
const benchDependencies = `{"name": "bench", "version": "1.0.0", "dependencies": {"lodash": "4.17.21", "uuid": "9.0.1", "debug": "4.3.4"}}`

type buildBench struct {
	*fnBench
	reg    *framework.Registry
	runner *buildrun.Runner
	base   string
	ns     string
	fc     *framework.PodProcess
	tmp    string
}

func runBuilds() error {
	ctx := context.Background()
	b, release, err := startFnBench(ctx)
	if err != nil {
		return err
	}
	defer release()
	tmp, err := os.MkdirTemp("", "bench-builds-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	bb := &buildBench{fnBench: b, tmp: tmp}

	password := make([]byte, 16)
	if _, err := rand.Read(password); err != nil {
		return err
	}
	b.log("starting the registry (distribution, htpasswd) and pushing a runtime stand-in")
	reg, err := framework.StartRegistry(ctx, "bench-registry", filepath.Join(b.cluster.Root(), "bin", "assets"), filepath.Join(tmp, "registry"), "functions", hex.EncodeToString(password))
	if err != nil {
		return err
	}
	defer func() { _ = reg.Stop() }()
	bb.reg = reg
	if bb.base, err = reg.PushStandIn("function-runtime-nodejs22"); err != nil {
		return err
	}

	const secretName = "bench-registry"
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: framework.ManagerNamespace, Name: secretName},
		StringData: map[string]string{"username": reg.Username, "password": reg.Password, "serverAddress": reg.Address, "registryAddress": reg.Address}}
	if err := b.c.Create(ctx, secret); err != nil {
		return fmt.Errorf("the registry Secret (left from an earlier run?): %w", err)
	}
	defer func() { _ = b.c.Delete(context.Background(), secret) }()
	cr := &v1alpha1.Serverless{ObjectMeta: metav1.ObjectMeta{Namespace: framework.ManagerNamespace, Name: "default"},
		Spec: v1alpha1.ServerlessSpec{DockerRegistry: &v1alpha1.DockerRegistry{EnableInternal: ptr.To(false), SecretName: ptr.To(secretName)}}}
	if err := b.c.Create(ctx, cr); err != nil {
		return fmt.Errorf("creating the Serverless CR (is one left from an earlier run?): %w", err)
	}
	defer b.uninstall(cr)
	if err := b.waitReady(ctx, 1, 3*time.Minute); err != nil {
		return err
	}
	if bb.fc, err = b.cluster.StartFunctionController(ctx, "bench-function-controller-builds"); err != nil {
		return err
	}
	defer func() { _ = bb.fc.Stop() }()
	if err := waitHTTP(ctx, "http://"+bb.fc.Plan.Addresses["health"]+"/readyz", bb.fc.Process); err != nil {
		return err
	}
	bb.runner = &buildrun.Runner{Client: b.c, BinDir: filepath.Join(b.cluster.Root(), "bin"), Dir: filepath.Join(tmp, "pods"), PATH: os.Getenv("PATH")}
	bb.ns = "bench-builds"
	return b.withBuildPods(ctx, bb.runner, bb.ns, bb.measure)
}

// withBuildPods runs measure with a namespace ns of its own (deleted after)
// while runner runs the build Pods handed to it, and each of also, until
// measure ends; the runner's errors join measure's.
func (b *fnBench) withBuildPods(ctx context.Context, runner *buildrun.Runner, ns string, measure func(context.Context) error, also ...func(context.Context)) error {
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var runErrs []error
	var mu sync.Mutex
	for _, f := range also {
		wg.Add(1)
		go func() { defer wg.Done(); f(runCtx) }()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		runner.Run(runCtx, func(err error) { mu.Lock(); runErrs = append(runErrs, err); mu.Unlock() })
	}()
	defer func() { stop(); wg.Wait() }()

	if err := b.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return fmt.Errorf("namespace %s (left from an earlier run?): %w", ns, err)
	}
	defer b.deleteNamespaces([]string{ns})
	err := measure(ctx)
	mu.Lock()
	defer mu.Unlock()
	return errors.Join(append([]error{err}, runErrs...)...)
}

func (bb *buildBench) measure(ctx context.Context) error {
	baseDisk, err := bb.reg.DiskBytes()
	if err != nil {
		return err
	}
	baseBlobs, err := bb.reg.BlobBytes()
	if err != nil {
		return err
	}
	bb.log("npm install alone, before any build")
	npmBefore, err := bb.npmAlone(ctx, "before")
	if err != nil {
		return err
	}
	bb.log("cold build of a Function with " + benchDependencies)
	cold, err := bb.build(ctx, "fn-00", "hello")
	if err != nil {
		return err
	}
	first, err := bb.builtImage(ctx, "fn-00")
	if err != nil {
		return err
	}

	bb.log("source-only rebuild")
	if err := bb.edit(ctx, "fn-00", "hello again"); err != nil {
		return err
	}
	rebuild, err := bb.waitBuilt(ctx, "fn-00", 2)
	if err != nil {
		return err
	}

	bb.log("a second Function with the same dependencies")
	second, err := bb.build(ctx, "fn-01", "hello fn-01")
	if err != nil {
		return err
	}

	bb.log(fmt.Sprintf("%d more Functions with the same dependencies, at once", benchBuildFunctions-2))
	images := []string{first}
	names := []string{"fn-00", "fn-01"}
	for i := 2; i < benchBuildFunctions; i++ {
		names = append(names, fmt.Sprintf("fn-%02d", i))
	}
	for _, n := range names[2:] {
		if err := bb.fcs.Create(ctx, bb.function(n, "hello "+n)); err != nil {
			return err
		}
	}
	var same []buildrun.Result
	for _, n := range names[2:] {
		r, err := bb.waitBuilt(ctx, n, 1)
		if err != nil {
			return err
		}
		same = append(same, r)
	}
	for _, n := range names {
		ref, err := bb.builtImage(ctx, n)
		if err != nil {
			return err
		}
		images = append(images, ref)
	}

	disk, err := bb.reg.DiskBytes()
	if err != nil {
		return err
	}
	disk -= baseDisk
	blobs, err := bb.reg.BlobBytes()
	if err != nil {
		return err
	}
	blobs -= baseBlobs
	bound, depLayer, parts, err := bb.bytesBound(ctx, images)
	if err != nil {
		return err
	}
	kept, err := remote.List(bb.reg.Context(dependencyRepository), bb.reg.Auth(), remote.WithContext(ctx))
	if err != nil {
		return fmt.Errorf("listing the kept dependency layers: %w", err)
	}

	bb.log("npm install alone, and a push of the same layers")
	npmAlone, pushAlone, pushedBytes, err := bb.physicalLimit(ctx)
	if err != nil {
		return err
	}
	// npm's time varies with the network by 2× from one minute to the
	// next: more cold builds (each with a dependency list of its own, so
	// nothing is kept), each right after the same npm install alone.
	coldTimes := []time.Duration{stepTime(cold, "prepare") + stepTime(cold, "dependencies") + stepTime(cold, "build")}
	npmTimes := []time.Duration{npmBefore, npmAlone}
	for i := 1; i < benchColdSamples; i++ {
		bb.log(fmt.Sprintf("cold sample %d of %d: npm install alone, then a cold build", i+1, benchColdSamples))
		n, err := bb.npmAlone(ctx, fmt.Sprintf("sample-%d", i))
		if err != nil {
			return err
		}
		fn := bb.function(fmt.Sprintf("cold-%d", i), "cold")
		fn.Spec.Source.Inline.Dependencies = strings.Replace(benchDependencies, `"name": "bench"`, fmt.Sprintf(`"name": "bench-cold-%d"`, i), 1)
		if err := bb.fcs.Create(ctx, fn); err != nil {
			return err
		}
		r, err := bb.waitBuilt(ctx, fn.Name, 1)
		if err != nil {
			return err
		}
		if installed(r) == "kept" {
			return fmt.Errorf("cold sample %s installed nothing", fn.Name)
		}
		npmTimes = append(npmTimes, n)
		coldTimes = append(coldTimes, stepTime(r, "prepare")+stepTime(r, "dependencies")+stepTime(r, "build"))
	}

	coldTotal := stepTime(cold, "prepare") + stepTime(cold, "dependencies") + stepTime(cold, "build")
	// npm's time varies with the network: the limit takes the mean of a run
	// before the build and one after.
	npmMean := (npmBefore + npmAlone) / 2
	limit := npmMean + pushAlone
	fmt.Printf("\nReal builds (%s; a Node Function, dependencies %s)\n", bb.reg.Address, benchDependencies)
	fmt.Printf("  cold build: prepare %.2fs, dependencies (npm install) %.2fs, build (layers + push) %.2fs = %.2fs\n",
		stepTime(cold, "prepare").Seconds(), stepTime(cold, "dependencies").Seconds(), stepTime(cold, "build").Seconds(), coldTotal.Seconds())
	fmt.Printf("  physical limit: the same npm install alone %.2fs (%.2fs before the build, %.2fs after) + push of the same %s %.2fs = %.2fs → %.2f× (target ≤ 1.2×)\n",
		npmMean.Seconds(), npmBefore.Seconds(), npmAlone.Seconds(), mibs(pushedBytes), pushAlone.Seconds(), limit.Seconds(), coldTotal.Seconds()/limit.Seconds())
	coldMedian, npmMedian := median(coldTimes), median(npmTimes)
	fmt.Printf("  cold builds, median of %d: %.2fs; npm install alone, median of %d: %.2fs; + push %.2fs → %.2f× (target ≤ 1.2×)\n",
		len(coldTimes), coldMedian.Seconds(), len(npmTimes), npmMedian.Seconds(), pushAlone.Seconds(), coldMedian.Seconds()/(npmMedian+pushAlone).Seconds())
	fmt.Printf("    samples: cold %s; npm alone %s\n", seconds(coldTimes), seconds(npmTimes))
	fmt.Printf("  source-only rebuild: build step %.2fs (target ≤ 1 s), dependencies: %s\n", stepTime(rebuild, "build").Seconds(), installed(rebuild))
	fmt.Printf("  a second Function, same dependencies: build step %.2fs (target ≤ 1 s), dependencies: %s\n", stepTime(second, "build").Seconds(), installed(second))
	times := make([]time.Duration, 0, len(same))
	installs := 0
	for _, r := range same {
		times = append(times, stepTime(r, "build"))
		if installed(r) != "kept" {
			installs++
		}
	}
	slices.Sort(times)
	fmt.Printf("  %d more Functions, same dependencies, created at once (5 builds at a time on this machine): build step median %.2fs, slowest %.2fs (target ≤ 1 s each), installs: %d\n",
		len(same), times[len(times)/2].Seconds(), times[len(times)-1].Seconds(), installs)
	copies, err := bb.blobsOfSize(depLayer)
	if err != nil {
		return err
	}
	fmt.Printf("  registry bytes on disk for %d Functions (%d images, the source change's included): %s; bound %s = %s (%.2f×)\n",
		benchBuildFunctions, len(images), mibs(disk), parts, mibs(bound), float64(disk)/float64(bound))
	fmt.Printf("    of which blobs %d bytes against the bound's %d bytes (%.3f×); the rest is distribution's link files\n",
		blobs, bound, float64(blobs)/float64(bound))
	fmt.Printf("  dependency layers kept: %d (%s), blobs of that layer's size stored: %d\n", len(kept), dependencyRepository, copies)
	return nil
}

// blobsOfSize counts the registry's stored blobs of exactly size bytes.
func (bb *buildBench) blobsOfSize(size int64) (int, error) {
	n := 0
	err := filepath.WalkDir(bb.reg.Root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "data" || !strings.Contains(path, string(filepath.Separator)+"blobs"+string(filepath.Separator)) {
			return err
		}
		info, err := d.Info()
		if err == nil && info.Size() == size {
			n++
		}
		return err
	})
	return n, err
}

func (bb *buildBench) function(name, greeting string) *v1alpha2.Function {
	return builtHere(bb.ns, name, bb.base, fmt.Sprintf("const _ = require('lodash');\nmodule.exports = { main: () => _.upperFirst(%q) };\n", greeting), benchDependencies)
}

// builtHere is a Node Function on base whose build Pods run here
// (buildrun.Label).
func builtHere(ns, name, base, source, dependencies string) *v1alpha2.Function {
	return &v1alpha2.Function{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{buildrun.Label: buildrun.Value}},
		Spec: v1alpha2.FunctionSpec{Runtime: v1alpha2.RuntimeNodejs22, RuntimeImageOverride: base,
			Source: v1alpha2.Source{Inline: &v1alpha2.InlineSource{Source: source, Dependencies: dependencies}}},
	}
}

func (bb *buildBench) build(ctx context.Context, name, greeting string) (buildrun.Result, error) {
	if err := bb.fcs.Create(ctx, bb.function(name, greeting)); err != nil {
		return buildrun.Result{}, err
	}
	return bb.waitBuilt(ctx, name, 1)
}

func (bb *buildBench) edit(ctx context.Context, name, greeting string) error {
	fn := &v1alpha2.Function{}
	if err := bb.fcs.Get(ctx, client.ObjectKey{Namespace: bb.ns, Name: name}, fn); err != nil {
		return err
	}
	fn.Spec.Source.Inline.Source = bb.function(name, greeting).Spec.Source.Inline.Source
	return bb.fcs.Update(ctx, fn)
}

// waitBuilt waits for the Function's nth build Pod to be run and the
// Function to be Running on its digest; it returns that Pod's result.
func (bb *buildBench) waitBuilt(ctx context.Context, name string, nth int) (buildrun.Result, error) {
	var res buildrun.Result
	err := framework.Poll(ctx, 5*time.Minute, fmt.Sprintf("build %d of Function %s to run", nth, name), func(ctx context.Context) (bool, string, error) {
		var pods corev1.PodList
		if err := bb.c.List(ctx, &pods, client.InNamespace(bb.ns), client.MatchingLabels{v1alpha2.LabelFunctionName: name}, client.HasLabels{batchv1.JobNameLabel}); err != nil {
			return false, "", err
		}
		fn := &v1alpha2.Function{}
		if err := bb.fcs.Get(ctx, client.ObjectKey{Namespace: bb.ns, Name: name}, fn); err != nil {
			return false, "", err
		}
		results := bb.runner.Results()
		ran := 0
		for _, p := range pods.Items {
			if r, ok := results[p.Name]; ok {
				ran++
				if r.Phase == corev1.PodFailed {
					return false, "", framework.StopWaiting(fmt.Errorf("build Pod %s failed: %+v", p.Name, r.Steps))
				}
			}
		}
		res = newestResult(pods.Items, results)
		return ran >= nth && isRunning(fn) && strings.Contains(fn.Status.BuiltImage, "@sha256:"),
			fmt.Sprintf("%d of %d build Pods run; %s", ran, nth, waitingOn(fn)), nil
	})
	return res, err
}

func newestResult(pods []corev1.Pod, results map[string]buildrun.Result) buildrun.Result {
	var newest *corev1.Pod
	for i := range pods {
		if _, ok := results[pods[i].Name]; ok && (newest == nil || newest.CreationTimestamp.Before(&pods[i].CreationTimestamp)) {
			newest = &pods[i]
		}
	}
	if newest == nil {
		return buildrun.Result{}
	}
	return results[newest.Name]
}

// npmAlone times the dependency step's npm install of benchDependencies
// run directly, with an empty cache as the step has.
func (bb *buildBench) npmAlone(ctx context.Context, label string) (time.Duration, error) {
	dir := filepath.Join(bb.tmp, "npm-alone-"+label)
	if err := os.MkdirAll(filepath.Join(dir, "home"), 0o755); err != nil {
		return 0, err
	}
	if err := os.WriteFile(filepath.Join(dir, "package.json"), []byte(benchDependencies), 0o644); err != nil {
		return 0, err
	}
	cmd := exec.CommandContext(ctx, "npm", "install", "--omit=dev", "--no-audit", "--no-fund", "--no-update-notifier")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "HOME="+filepath.Join(dir, "home"), "npm_config_cache="+filepath.Join(dir, "home", ".npm"))
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		return 0, fmt.Errorf("npm install alone: %w\n%s", err, out)
	}
	return time.Since(start), nil
}

// physicalLimit times the cold build's work done directly: npm install of
// the same package.json with an empty cache, and a push of the same image
// layers (the built image copied to a new repository, so every blob goes).
func (bb *buildBench) physicalLimit(ctx context.Context) (npm, push time.Duration, pushed int64, err error) {
	if npm, err = bb.npmAlone(ctx, "after"); err != nil {
		return 0, 0, 0, err
	}
	fn := &v1alpha2.Function{}
	if err := bb.fcs.Get(ctx, client.ObjectKey{Namespace: bb.ns, Name: "fn-00"}, fn); err != nil {
		return 0, 0, 0, err
	}
	src, err := bb.reg.Reference(fn.Status.BuiltImage)
	if err != nil {
		return 0, 0, 0, err
	}
	img, err := remote.Image(src, bb.reg.Auth(), remote.WithContext(ctx))
	if err != nil {
		return 0, 0, 0, err
	}
	// Fresh layers with the same bytes: the registry must take every blob.
	layers, err := img.Layers()
	if err != nil {
		return 0, 0, 0, err
	}
	dst, err := bb.reg.Reference(bb.reg.Address + "/bench-push-alone:latest")
	if err != nil {
		return 0, 0, 0, err
	}
	copied, err := mutate.AppendLayers(empty.Image, layers...)
	if err != nil {
		return 0, 0, 0, err
	}
	for _, l := range layers {
		size, err := l.Size()
		if err != nil {
			return 0, 0, 0, err
		}
		pushed += size
	}
	start := time.Now()
	if err := remote.Write(dst, copied, bb.reg.Auth(), remote.WithContext(ctx)); err != nil {
		return 0, 0, 0, err
	}
	return npm, time.Since(start), pushed, nil
}

// bytesBound is one dependency layer + the kept layer's image (manifest
// and config) + Σ (source layer + manifest + config) over images, as the
// registry serves them.
func (bb *buildBench) bytesBound(ctx context.Context, images []string) (bound, depLayer int64, parts string, err error) {
	var perImage int64
	for _, ref := range images {
		img, err := bb.pull(ctx, ref)
		if err != nil {
			return 0, 0, "", err
		}
		layers, err := img.Layers()
		if err != nil || len(layers) < 2 {
			return 0, 0, "", fmt.Errorf("image %s: %d layers, %v", ref, len(layers), err)
		}
		if depLayer, err = layers[len(layers)-2].Size(); err != nil {
			return 0, 0, "", err
		}
		source, err := layers[len(layers)-1].Size()
		if err != nil {
			return 0, 0, "", err
		}
		meta, err := metaBytes(img)
		if err != nil {
			return 0, 0, "", err
		}
		perImage += source + meta
	}
	tags, err := remote.List(bb.reg.Context(dependencyRepository), bb.reg.Auth(), remote.WithContext(ctx))
	if err != nil || len(tags) == 0 {
		return 0, 0, "", fmt.Errorf("the kept dependency layers: %v %v", tags, err)
	}
	keptImg, err := bb.pull(ctx, bb.reg.Address+"/"+dependencyRepository+":"+tags[0])
	if err != nil {
		return 0, 0, "", err
	}
	keptMeta, err := metaBytes(keptImg)
	if err != nil {
		return 0, 0, "", err
	}
	return depLayer + keptMeta + perImage, depLayer, fmt.Sprintf("dependency layer %s + its kept image %s + %d × (source + manifest + config) %s",
		mibs(depLayer), mibs(keptMeta), len(images), mibs(perImage)), nil
}

// dependencyRepository is where the Function registry keeps dependency
// layers (resources.DependencyCacheRepository).
const dependencyRepository = "serverless-dependencies"

func (bb *buildBench) pull(ctx context.Context, ref string) (v1.Image, error) {
	r, err := bb.reg.Reference(ref)
	if err != nil {
		return nil, err
	}
	return remote.Image(r, bb.reg.Auth(), remote.WithContext(ctx))
}

// metaBytes is the size of an image's manifest and config.
func metaBytes(img v1.Image) (int64, error) {
	manifest, err := img.RawManifest()
	if err != nil {
		return 0, err
	}
	config, err := img.RawConfigFile()
	if err != nil {
		return 0, err
	}
	return int64(len(manifest) + len(config)), nil
}

func (bb *buildBench) builtImage(ctx context.Context, name string) (string, error) {
	fn := &v1alpha2.Function{}
	if err := bb.fcs.Get(ctx, client.ObjectKey{Namespace: bb.ns, Name: name}, fn); err != nil {
		return "", err
	}
	return fn.Status.BuiltImage, nil
}

func stepTime(r buildrun.Result, name string) time.Duration {
	s, _ := r.Step(name)
	return s.Duration
}

func installed(r buildrun.Result) string {
	s, _ := r.Step("dependencies")
	if strings.Contains(s.Output, "dependencies kept") {
		return "kept"
	}
	return "installed"
}

func mibs(n int64) string { return fmt.Sprintf("%.2f MiB", mib(n)) }

func median(ds []time.Duration) time.Duration {
	sorted := append([]time.Duration{}, ds...)
	slices.Sort(sorted)
	if len(sorted)%2 == 1 {
		return sorted[len(sorted)/2]
	}
	return (sorted[len(sorted)/2-1] + sorted[len(sorted)/2]) / 2
}

func seconds(ds []time.Duration) string {
	parts := make([]string, len(ds))
	for i, d := range ds {
		parts[i] = fmt.Sprintf("%.2fs", d.Seconds())
	}
	return strings.Join(parts, " ")
}
