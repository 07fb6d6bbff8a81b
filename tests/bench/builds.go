package main

// The build bench (-builds): real builds on the local cluster's real node,
// as tests/e2e's TestRealBuildsWithNpmDependencies runs them: the chart's
// registry software as a process on the node's address with htpasswd
// (framework's StartRegistry) configured as the module's external
// registry, the Function controller as its Deployment's Pod, build Jobs'
// Pods with our steps (prepare, build) and the dependency step in the
// local Node.js runtime image with npm against the npm registry, and the
// Functions' Pods pulling what their build pushed. For a Node Function
// with a few real dependencies:
//
//   - a cold build: its steps' times (each container's start to end, as
//     containerd records them), against the physical limit here: the same
//     `npm install` run alone in a Pod of the same image, limits and
//     security context as the dependency step, plus a push of the same
//     layers from this machine;
//   - a source-only rebuild and a second Function with the same
//     dependencies: the build step's time, and no install;
//   - the registry's bytes on disk for benchBuildFunctions Functions with the
//     same dependencies against the runtime base's layers (once) + one
//     dependency layer + N × (source layer + manifest + config).

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/hack/cluster/localimage"
	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/pkg/build"
	"github.com/kyma-project/serverless-manager/tests/framework"
)

// benchBuildFunctions share one dependency list in the bytes figure.
const benchBuildFunctions = 20

// benchColdSamples is how many cold builds the ratio's median takes.
const benchColdSamples = 5

// benchDependencies are a few real npm packages (lodash is the bulk).
const benchDependencies = `{"name": "bench", "version": "1.0.0", "dependencies": {"lodash": "4.17.21", "uuid": "9.0.1", "debug": "4.3.4"}}`

// The presets of the real-build benches: what fits on the real node's 2
// CPUs (builds ask 200m, as in config/samples/small-cluster-serverless-cr.yaml,
// here with local-dev's lower limit, the figures' reference; Functions XS,
// as the e2e tests of real builds, so 24 of them leave room for 5 builds).
const (
	realBuildPreset    = "local-dev"
	realFunctionPreset = "XS"
)

// The build Pod's steps (operator/internal/function/resources).
const (
	stepPrepare      = "prepare"
	stepDependencies = "dependencies"
	stepBuild        = "build"
)

// direct reaches the node's address and cluster IPs straight, never
// through a proxy the environment may name.
var direct = &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 8}

type buildBench struct {
	*fnBench
	reg *framework.Registry
	// base is the runtime image builds run on: the local Node.js 22 image
	// in the node's registry (the chart's key, pointed there by the
	// manager's LocalImageEnv).
	base string
	ns   string
	// depStep is the first build Pod's dependency container and its Pod's
	// security context: the npm-alone Pods run the same.
	depStep *corev1.Container
	podSec  *corev1.PodSecurityContext
	// runs are the finished build Pods' container runs, read as soon as a
	// wait sees them succeed (kubelet may remove a finished Pod's
	// containers, and containerd's record with them).
	runs map[string]map[string]containerRun
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
	bb := &buildBench{fnBench: b, ns: "bench-builds", runs: map[string]map[string]containerRun{},
		base: localimage.Ref(b.cluster.NodeRegistry(), localimage.RuntimeImage(string(v1alpha2.RuntimeNodejs22)))}

	password := make([]byte, 16)
	if _, err := rand.Read(password); err != nil {
		return err
	}
	b.log("starting the registry (distribution, htpasswd) on the real node's address")
	reg, err := b.cluster.StartRegistry(ctx, framework.RegistrySpec{Name: "bench-registry", Dir: filepath.Join(tmp, "registry"),
		Username: "functions", Password: hex.EncodeToString(password)})
	if err != nil {
		return err
	}
	defer func() { _ = reg.Stop() }()
	bb.reg = reg

	const secretName = "bench-registry"
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: framework.ManagerNamespace, Name: secretName},
		StringData: map[string]string{"username": reg.Username, "password": reg.Password, "serverAddress": reg.Address, "registryAddress": reg.Address}}
	if err := b.c.Create(ctx, secret); err != nil {
		return fmt.Errorf("the registry Secret (left from an earlier run?): %w", err)
	}
	defer func() { _ = b.c.Delete(context.Background(), secret) }()
	cr := &v1alpha1.Serverless{ObjectMeta: metav1.ObjectMeta{Namespace: framework.ManagerNamespace, Name: "default"},
		Spec: v1alpha1.ServerlessSpec{DockerRegistry: &v1alpha1.DockerRegistry{EnableInternal: ptr.To(false), SecretName: ptr.To(secretName)},
			DefaultBuildJobPreset: realBuildPreset, DefaultRuntimePodPreset: realFunctionPreset}}
	if err := b.c.Create(ctx, cr); err != nil {
		return fmt.Errorf("creating the Serverless CR (is one left from an earlier run?): %w", err)
	}
	defer b.uninstall(cr)
	if err := b.waitReady(ctx, 1, 3*time.Minute); err != nil {
		return err
	}
	if _, err := b.controllerPod(ctx, "", nil); err != nil {
		return err
	}
	if err := b.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: bb.ns}}); err != nil {
		return fmt.Errorf("namespace %s (left from an earlier run?): %w", bb.ns, err)
	}
	defer b.deleteNamespaces([]string{bb.ns})
	return bb.measure(ctx)
}

func (bb *buildBench) measure(ctx context.Context) error {
	baseDisk, err := orNone(bb.reg.DiskBytes())
	if err != nil {
		return err
	}
	baseBlobs, err := orNone(bb.reg.BlobBytes())
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
	bb.log("npm install alone (a Pod like the dependency step)")
	npmFirst, err := bb.npmAlone(ctx, "first")
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
	machine := bb.snapshotCPU(nil)
	for _, n := range names[2:] {
		if err := bb.fcs.Create(ctx, bb.function(n, "hello "+n)); err != nil {
			return err
		}
	}
	var same []buildResult
	for _, n := range names[2:] {
		r, err := bb.waitBuilt(ctx, n, 1)
		if err != nil {
			return err
		}
		same = append(same, r)
	}
	atOnce := bb.snapshotCPU(nil).since(machine)
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
	bound, err := bb.bytesBound(ctx, images)
	if err != nil {
		return err
	}
	kept, err := remote.List(bb.reg.Context(dependencyRepository), bb.reg.Auth(), remote.WithTransport(direct), remote.WithContext(ctx))
	if err != nil {
		return fmt.Errorf("listing the kept dependency layers: %w", err)
	}

	bb.log("npm install alone again, and a push of the same layers from here")
	npmAfter, pushAlone, pushedBytes, err := bb.physicalLimit(ctx)
	if err != nil {
		return err
	}
	// npm's time varies with the network by 2× from one minute to the
	// next: more cold builds (each with a dependency list of its own, so
	// nothing is kept), each right after the same npm install alone.
	coldTimes := []time.Duration{cold.steps()}
	npmTimes := []time.Duration{npmFirst, npmAfter}
	var coldPods []time.Duration
	coldPods = append(coldPods, cold.podTime())
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
		if r.installed() == "kept" {
			return fmt.Errorf("cold sample %s installed nothing", fn.Name)
		}
		npmTimes = append(npmTimes, n)
		coldTimes = append(coldTimes, r.steps())
		coldPods = append(coldPods, r.podTime())
	}

	coldTotal := cold.steps()
	npmMean := (npmFirst + npmAfter) / 2
	limit := npmMean + pushAlone
	dep := bb.depStep.Resources
	fmt.Printf("\nReal builds (registry %s, a process here; a Node Function, dependencies %s)\n", bb.reg.Address, benchDependencies)
	fmt.Printf("  build Pods on the real node (2 CPUs shared with the control plane), preset %s: the dependency and build steps limited to %s CPU, %s memory;\n"+
		"  Functions' Pods preset %s on the same node; runtime base %s (the local image)\n",
		realBuildPreset, dep.Limits.Cpu(), dep.Limits.Memory(), realFunctionPreset, bb.base)
	fmt.Printf("  step times: each container's start to end as containerd records it%s; npm alone: the same in a Pod of the dependency step's image, limits and security context\n",
		precision(append([]buildResult{cold, rebuild, second}, same...)...))
	fmt.Printf("  cold build: prepare %.2fs, dependencies (npm install) %.2fs, build (layers + push) %.2fs = %.2fs; the Pod from its creation to the end of build %.2fs\n",
		cold.step(stepPrepare).Seconds(), cold.step(stepDependencies).Seconds(), cold.step(stepBuild).Seconds(), coldTotal.Seconds(), cold.podTime().Seconds())
	fmt.Printf("  physical limit: the same npm install alone %.2fs (%.2fs after the first build, %.2fs after the 20) + push of the same %s from here %.2fs = %.2fs → %.2f× (target ≤ 1.2×)\n",
		npmMean.Seconds(), npmFirst.Seconds(), npmAfter.Seconds(), mibs(pushedBytes), pushAlone.Seconds(), limit.Seconds(), coldTotal.Seconds()/limit.Seconds())
	coldMedian, npmMedian := median(coldTimes), median(npmTimes)
	fmt.Printf("  cold builds, median of %d: %.2fs (the Pod: %.2fs); npm install alone, median of %d: %.2fs; + push %.2fs → %.2f× (target ≤ 1.2×)\n",
		len(coldTimes), coldMedian.Seconds(), median(coldPods).Seconds(), len(npmTimes), npmMedian.Seconds(), pushAlone.Seconds(), coldMedian.Seconds()/(npmMedian+pushAlone).Seconds())
	fmt.Printf("    samples: cold %s; npm alone %s\n", seconds(coldTimes), seconds(npmTimes))
	fmt.Printf("  source-only rebuild: build step %.2fs (target ≤ 1 s), dependencies: %s; the Pod %.2fs\n", rebuild.step(stepBuild).Seconds(), rebuild.installed(), rebuild.podTime().Seconds())
	fmt.Printf("  a second Function, same dependencies: build step %.2fs (target ≤ 1 s), dependencies: %s; the Pod %.2fs\n", second.step(stepBuild).Seconds(), second.installed(), second.podTime().Seconds())
	times := make([]time.Duration, 0, len(same))
	pods := make([]time.Duration, 0, len(same))
	installs := 0
	for _, r := range same {
		times = append(times, r.step(stepBuild))
		pods = append(pods, r.podTime())
		if r.installed() != "kept" {
			installs++
		}
	}
	slices.Sort(times)
	slices.Sort(pods)
	fmt.Printf("  %d more Functions, same dependencies, created at once (5 builds at a time): build step median %.2fs, slowest %.2fs (target ≤ 1 s each), installs: %d; the Pods median %.2fs, slowest %.2fs\n",
		len(same), times[len(times)/2].Seconds(), times[len(times)-1].Seconds(), installs, pods[len(pods)/2].Seconds(), pods[len(pods)-1].Seconds())
	fmt.Printf("    this machine meanwhile: %s\n", atOnce)
	fmt.Printf("    every build copies the runtime base's layers (%s) into its Function's repository: the base is in another registry (the node's), so they cannot be mounted\n", mibs(bound.base))
	copies, err := bb.blobsOfSize(bound.depLayer)
	if err != nil {
		return err
	}
	fmt.Printf("  registry bytes on disk for %d Functions (%d images, the source change's included): %s; bound %s = %s (%.2f×)\n",
		benchBuildFunctions, len(images), mibs(disk), bound.parts, mibs(bound.total()), float64(disk)/float64(bound.total()))
	fmt.Printf("    of which blobs %d bytes against the bound's %d bytes (%.3f×); the rest is distribution's link files\n",
		blobs, bound.total(), float64(blobs)/float64(bound.total()))
	fmt.Printf("    without the runtime base's layers (in the registry since the base is a real image in another registry): blobs %d against %d bytes (%.3f×)\n",
		blobs-bound.base, bound.total()-bound.base, float64(blobs-bound.base)/float64(bound.total()-bound.base))
	fmt.Printf("  dependency layers kept: %d (%s), blobs of that layer's size stored: %d\n", len(kept), dependencyRepository, copies)
	return nil
}

// orNone is 0 bytes for a registry directory that does not exist yet
// (distribution makes it at the first push).
func orNone(n int64, err error) (int64, error) {
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	return n, err
}

// precision says where a step time's precision is only whole seconds.
func precision(rs ...buildResult) string {
	var coarse []string
	for _, r := range rs {
		for name, run := range r.runs {
			if !run.precise {
				coarse = append(coarse, r.pod+"/"+name)
			}
		}
	}
	if len(coarse) == 0 {
		return " (nanoseconds)"
	}
	slices.Sort(coarse)
	return fmt.Sprintf(" (%d steps only from the Pod status, in whole seconds: containerd had no record of them: %s)", len(coarse), strings.Join(coarse, ", "))
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
	return nodeFunction(bb.ns, name, fmt.Sprintf("const _ = require('lodash');\nmodule.exports = { main: () => _.upperFirst(%q) };\n", greeting), benchDependencies)
}

// nodeFunction is a Node.js 22 Function built on the module's runtime
// base image.
func nodeFunction(ns, name, source, dependencies string) *v1alpha2.Function {
	return &v1alpha2.Function{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha2.FunctionSpec{Runtime: v1alpha2.RuntimeNodejs22,
			Source: v1alpha2.Source{Inline: &v1alpha2.InlineSource{Source: source, Dependencies: dependencies}}},
	}
}

func (bb *buildBench) build(ctx context.Context, name, greeting string) (buildResult, error) {
	if err := bb.fcs.Create(ctx, bb.function(name, greeting)); err != nil {
		return buildResult{}, err
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

// buildResult is what a finished build Pod says of its steps.
type buildResult struct {
	pod     string
	created time.Time
	runs    map[string]containerRun
	// depsLog is the dependency step's log.
	depsLog string
}

func (r buildResult) step(name string) time.Duration { return r.runs[name].duration() }

// steps is prepare + dependencies + build, the steps' own time.
func (r buildResult) steps() time.Duration {
	return r.step(stepPrepare) + r.step(stepDependencies) + r.step(stepBuild)
}

// podTime is the Pod's creation to the end of its build step: the steps
// and what the node spends between them (scheduling, sandbox, starting
// each container).
func (r buildResult) podTime() time.Duration {
	if r.created.IsZero() || r.runs[stepBuild].end.IsZero() {
		return 0
	}
	return r.runs[stepBuild].end.Sub(r.created)
}

func (r buildResult) installed() string {
	if strings.Contains(r.depsLog, "dependencies kept") {
		return "kept"
	}
	return "installed"
}

// buildPods are a Function's build Pods in ns ("" fn: every Function's),
// oldest first.
func (b *bench) buildPods(ctx context.Context, ns, fn string) ([]corev1.Pod, error) {
	var pods corev1.PodList
	opts := []client.ListOption{client.InNamespace(ns), client.HasLabels{batchv1.JobNameLabel}}
	if fn != "" {
		opts = append(opts, client.MatchingLabels{v1alpha2.LabelFunctionName: fn})
	}
	if err := b.c.List(ctx, &pods, opts...); err != nil {
		return nil, err
	}
	slices.SortFunc(pods.Items, func(a, b corev1.Pod) int { return a.CreationTimestamp.Compare(b.CreationTimestamp.Time) })
	return pods.Items, nil
}

// failedSteps names a failed build Pod's failed steps and their messages.
func failedSteps(p *corev1.Pod) string {
	var parts []string
	for _, s := range append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		if t := s.State.Terminated; t != nil && t.ExitCode != 0 {
			parts = append(parts, fmt.Sprintf("%s exit %d: %s", s.Name, t.ExitCode, strings.TrimSpace(t.Message)))
		}
	}
	return strings.Join(parts, "; ")
}

// waitBuilt waits for the Function's nth build Pod to succeed and the
// Function to be Running on its digest; it returns that Pod's result.
func (bb *buildBench) waitBuilt(ctx context.Context, name string, nth int) (buildResult, error) {
	var done *corev1.Pod
	err := framework.Poll(ctx, 5*time.Minute, fmt.Sprintf("build %d of Function %s to run", nth, name), func(ctx context.Context) (bool, string, error) {
		all, err := bb.buildPods(ctx, bb.ns, "")
		if err != nil {
			return false, "", err
		}
		var pods []corev1.Pod
		for i := range all {
			if all[i].Status.Phase == corev1.PodSucceeded && bb.runs[all[i].Name] == nil {
				bb.runs[all[i].Name] = bb.containerRuns(&all[i])
			}
			if all[i].Labels[v1alpha2.LabelFunctionName] == name {
				pods = append(pods, all[i])
			}
		}
		fn := &v1alpha2.Function{}
		if err := bb.fcs.Get(ctx, client.ObjectKey{Namespace: bb.ns, Name: name}, fn); err != nil {
			return false, "", err
		}
		succeeded := 0
		for i := range pods {
			switch pods[i].Status.Phase {
			case corev1.PodFailed:
				return false, "", framework.StopWaiting(fmt.Errorf("build Pod %s failed: %s", pods[i].Name, failedSteps(&pods[i])))
			case corev1.PodSucceeded:
				succeeded++
				done = &pods[i]
			}
		}
		return succeeded >= nth && isRunning(fn) && strings.Contains(fn.Status.BuiltImage, "@sha256:"),
			fmt.Sprintf("%d of %d build Pods succeeded; %s", succeeded, nth, waitingOn(fn)), nil
	}, framework.DumpPods(bb.c, bb.ns), bb.cluster.DumpPodLogs(bb.ns, map[string]string{v1alpha2.LabelFunctionName: name}, 20))
	if err != nil {
		return buildResult{}, err
	}
	r := buildResult{pod: done.Name, created: done.CreationTimestamp.Time, runs: bb.runs[done.Name]}
	if r.depsLog, err = bb.cluster.PodLog(ctx, bb.ns, done.Name, stepDependencies); err != nil {
		return r, err
	}
	if bb.depStep == nil {
		for i := range done.Spec.InitContainers {
			if done.Spec.InitContainers[i].Name == stepDependencies {
				bb.depStep = done.Spec.InitContainers[i].DeepCopy()
				bb.podSec = done.Spec.SecurityContext.DeepCopy()
			}
		}
	}
	return r, nil
}

// npmAlone times the dependency step's npm install of benchDependencies
// run alone: a Pod of the step's image, resources, security context and
// environment, with an empty cache as the step has, whose container runs
// only the install (containerd's start and end of it).
func (bb *buildBench) npmAlone(ctx context.Context, label string) (time.Duration, error) {
	if bb.depStep == nil {
		return 0, fmt.Errorf("no build Pod's dependency step to copy yet")
	}
	rt, err := build.RuntimeOf(string(v1alpha2.RuntimeNodejs22))
	if err != nil {
		return 0, err
	}
	c := bb.depStep.DeepCopy()
	c.Name = "npm"
	const sources = "/tmp/sources"
	c.Command = []string{"/bin/sh", "-c", `mkdir -p "$SOURCES" && printf '%s' "$PACKAGE_JSON" > "$SOURCES/package.json" && cd "$` +
		build.EnvDependenciesDir + `" && ` + rt.Install}
	var env []corev1.EnvVar
	for _, e := range c.Env {
		if e.Name != "SOURCES" {
			env = append(env, e)
		}
	}
	c.Env = append(env, corev1.EnvVar{Name: "SOURCES", Value: sources}, corev1.EnvVar{Name: "PACKAGE_JSON", Value: benchDependencies})
	var mounts []corev1.VolumeMount
	var volumes []corev1.Volume
	for _, m := range c.VolumeMounts {
		// The writable volumes and the (absent) package registry
		// configuration; the sources come from the environment instead.
		if m.Name == "sources" || m.Name == "state" {
			continue
		}
		mounts = append(mounts, m)
		volumes = append(volumes, corev1.Volume{Name: m.Name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	}
	c.VolumeMounts = mounts
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: bb.ns, Name: "npm-alone-" + label, Labels: npmAloneLabels},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, AutomountServiceAccountToken: ptr.To(false),
			SecurityContext: bb.podSec, Volumes: volumes, Containers: []corev1.Container{*c}},
	}
	if err := bb.c.Create(ctx, pod); err != nil {
		return 0, err
	}
	defer func() { _ = bb.c.Delete(context.Background(), pod) }()
	var got *corev1.Pod
	if err := framework.Poll(ctx, 5*time.Minute, "npm install alone in Pod "+pod.Name, func(ctx context.Context) (bool, string, error) {
		p, err := bb.podOf(ctx, bb.ns, pod.Name)
		if err != nil {
			return false, "", err
		}
		got = p
		if p.Status.Phase == corev1.PodFailed {
			return false, "", framework.StopWaiting(fmt.Errorf("npm alone failed: %s", failedSteps(p)))
		}
		return p.Status.Phase == corev1.PodSucceeded, string(p.Status.Phase), nil
	}, bb.cluster.DumpPodLogs(bb.ns, npmAloneLabels, 20)); err != nil {
		return 0, err
	}
	run, ok := bb.containerRuns(got)["npm"]
	if !ok || !run.precise {
		return 0, fmt.Errorf("no containerd record of Pod %s's run", pod.Name)
	}
	return run.duration(), nil
}

var npmAloneLabels = map[string]string{"bench.serverless.kyma-project.io/npm-alone": "true"}

// physicalLimit times the cold build's work done directly: the npm install
// alone again, and a push from this machine of the same image layers (the
// built image's layers read into memory and pushed to a new repository as
// layers of no registry, so every blob goes over the wire as the build
// step sends it).
func (bb *buildBench) physicalLimit(ctx context.Context) (npm, push time.Duration, pushed int64, err error) {
	if npm, err = bb.npmAlone(ctx, "after"); err != nil {
		return 0, 0, 0, err
	}
	img, err := bb.pull(ctx, bb.firstImage(ctx))
	if err != nil {
		return 0, 0, 0, err
	}
	layers, err := img.Layers()
	if err != nil {
		return 0, 0, 0, err
	}
	var fresh []v1.Layer
	for _, l := range layers {
		mt, err := l.MediaType()
		if err != nil {
			return 0, 0, 0, err
		}
		rc, err := l.Compressed()
		if err != nil {
			return 0, 0, 0, err
		}
		data, err := io.ReadAll(rc)
		_ = rc.Close()
		if err != nil {
			return 0, 0, 0, err
		}
		pushed += int64(len(data))
		fresh = append(fresh, static.NewLayer(bytes.Clone(data), mt))
	}
	copied, err := mutate.AppendLayers(empty.Image, fresh...)
	if err != nil {
		return 0, 0, 0, err
	}
	dst, err := bb.reg.Reference(bb.reg.Address + "/bench-push-alone:latest")
	if err != nil {
		return 0, 0, 0, err
	}
	start := time.Now()
	if err := remote.Write(dst, copied, bb.reg.Auth(), remote.WithTransport(direct), remote.WithContext(ctx)); err != nil {
		return 0, 0, 0, err
	}
	return npm, time.Since(start), pushed, nil
}

func (bb *buildBench) firstImage(ctx context.Context) string {
	ref, _ := bb.builtImage(ctx, "fn-00")
	return ref
}

// bytesBound is what the registry must hold for images: the runtime base's
// layers (once), one dependency layer and its kept image (manifest and
// config), and Σ (source layer + manifest + config) over images, as the
// registry serves them.
type bytesBound struct {
	base, depLayer, keptMeta, perImage int64
	parts                              string
}

func (b bytesBound) total() int64 { return b.base + b.depLayer + b.keptMeta + b.perImage }

func (bb *buildBench) bytesBound(ctx context.Context, images []string) (bytesBound, error) {
	var bound bytesBound
	for i, ref := range images {
		img, err := bb.pull(ctx, ref)
		if err != nil {
			return bound, err
		}
		layers, err := img.Layers()
		if err != nil || len(layers) < 2 {
			return bound, fmt.Errorf("image %s: %d layers, %v", ref, len(layers), err)
		}
		if i == 0 {
			for _, l := range layers[:len(layers)-2] {
				size, err := l.Size()
				if err != nil {
					return bound, err
				}
				bound.base += size
			}
		}
		if bound.depLayer, err = layers[len(layers)-2].Size(); err != nil {
			return bound, err
		}
		source, err := layers[len(layers)-1].Size()
		if err != nil {
			return bound, err
		}
		meta, err := metaBytes(img)
		if err != nil {
			return bound, err
		}
		bound.perImage += source + meta
	}
	tags, err := remote.List(bb.reg.Context(dependencyRepository), bb.reg.Auth(), remote.WithTransport(direct), remote.WithContext(ctx))
	if err != nil || len(tags) == 0 {
		return bound, fmt.Errorf("the kept dependency layers: %v %v", tags, err)
	}
	keptImg, err := bb.pull(ctx, bb.reg.Address+"/"+dependencyRepository+":"+tags[0])
	if err != nil {
		return bound, err
	}
	if bound.keptMeta, err = metaBytes(keptImg); err != nil {
		return bound, err
	}
	bound.parts = fmt.Sprintf("runtime base layers %s (once) + dependency layer %s + its kept image %s + %d × (source + manifest + config) %s",
		mibs(bound.base), mibs(bound.depLayer), mibs(bound.keptMeta), len(images), mibs(bound.perImage))
	return bound, nil
}

// dependencyRepository is where the Function registry keeps dependency
// layers (resources.DependencyCacheRepository).
const dependencyRepository = "serverless-dependencies"

func (bb *buildBench) pull(ctx context.Context, ref string) (v1.Image, error) {
	r, err := bb.reg.Reference(ref)
	if err != nil {
		return nil, err
	}
	return remote.Image(r, bb.reg.Auth(), remote.WithTransport(direct), remote.WithContext(ctx))
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
