package main

// The real-Pod bench (-pods): what a user of each Function mode waits for,
// on the local cluster's real node, the module installed as `make run` does
// (internal registry, the Function controller as its Deployment's Pod).
// The same Node.js Function in build mode and in buildless mode, its npm
// dependencies served by a registry the bench controls on the node's
// address (framework.NPMRegistry), so that no public registry's latency
// enters a figure:
//
//   - create → first HTTP answer through the Function's Service: build mode
//     with a dependency (cold: a dependency list no build saw before) and a
//     source-only rebuild (dependencies from the cached layer); buildless
//     mode with and without the dependency;
//   - scale-out 1 → 5 replicas until each of the 5 Pods answers (called on
//     its own address), with the small dependency and with a dependency
//     set of about 50 MB installed;
//   - drift: a dependency declared "^1.0.0", 2 replicas running, then 1.1.0
//     released and 2 more replicas: which version each replica runs;
//   - the resident memory of the node's parts (kubelet, containerd, the
//     containerd shims) with the Functions running.
//
// Each time figure is the median of -repeats runs with its minimum and
// maximum.

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/tests/framework"
)

// The packages the bench's npm registry serves.
const (
	podsDep  = "bench-dep"  // a small module
	podsBulk = "bench-bulk" // about podsBulkMiB of files
	// podsDrift + "-" + mode: released as 1.0.0, then as 1.1.0 mid-run.
	podsDrift = "bench-drift"
)

// podsBulkMiB is the size of the bulk dependency's files (random, so the
// tarball is as large).
const podsBulkMiB = 50

// podsScaleTo is the replica count of the scale-out figure.
const podsScaleTo = 5

// podsPackageRegistrySecret is the Secret a Function namespace's npm
// reads its .npmrc from, in both modes.
const podsPackageRegistrySecret = "serverless-package-registry-config"

type podsBench struct {
	*fnBench
	ns  string
	npm *framework.NPMRegistry
	// per mode, per figure, one sample per repeat
	samples map[string]map[string][]time.Duration
	drift   map[string][]string // mode → the versions the 4 replicas run
	memory  map[string]nodeMemory
	mode    string // the module's now
}

// The figures, in the order they print.
const (
	figCold      = "create → first answer, with the dependency (build mode: a cold build)"
	figRebuild   = "source change → new answer (build: dependencies cached)"
	figNoDep     = "create → first answer, no dependency"
	figBulk      = "create → first answer, with the ~50 MB dependency set"
	figScale     = "scale-out 1 → 5, all 5 answer, with the dependency"
	figScaleBulk = "scale-out 1 → 5, all 5 answer, with the ~50 MB dependency set"
)

func runPods(repeats int, fnPreset, buildPreset string) error {
	ctx := context.Background()
	b, release, err := startFnBench(ctx)
	if err != nil {
		return err
	}
	defer release()
	p := &podsBench{fnBench: b, ns: "bench-pods", samples: map[string]map[string][]time.Duration{}, drift: map[string][]string{}, memory: map[string]nodeMemory{}}

	npm, err := b.cluster.StartNPMRegistry(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = npm.Close() }()
	p.npm = npm
	if err := p.publish(); err != nil {
		return err
	}

	cr, cleanup, err := p.install(ctx, buildPreset, fnPreset)
	if err != nil {
		return err
	}
	defer cleanup()

	for _, mode := range []string{v1alpha1.FunctionModeBuild, v1alpha1.FunctionModeBuildless} {
		if err := b.useMode(ctx, cr, mode); err != nil {
			return err
		}
		if _, err := b.controllerPod(ctx, "in "+mode+" mode", nil); err != nil {
			return err
		}
		p.mode = mode
		p.samples[mode] = map[string][]time.Duration{}
		for r := 1; r <= repeats; r++ {
			if err := p.round(ctx, mode, r); err != nil {
				return fmt.Errorf("%s mode, run %d: %w", mode, r, err)
			}
		}
		if err := p.measureDrift(ctx, mode); err != nil {
			return fmt.Errorf("%s mode, drift: %w", mode, err)
		}
	}
	p.print(repeats, fnPreset, buildPreset)
	return nil
}

// install creates the Serverless CR as make run does (internal registry)
// with the presets, waits until it is Ready, and makes the bench's
// namespace with the package registry configuration of p.npm; cleanup
// deletes both.
func (p *podsBench) install(ctx context.Context, buildPreset, fnPreset string) (cr *v1alpha1.Serverless, cleanup func(), err error) {
	b := p.fnBench
	b.log(fmt.Sprintf("installing the module (internal registry, builds %s, Functions %s)", buildPreset, fnPreset))
	cr = &v1alpha1.Serverless{ObjectMeta: metav1.ObjectMeta{Namespace: framework.ManagerNamespace, Name: "default"},
		Spec: v1alpha1.ServerlessSpec{DockerRegistry: &v1alpha1.DockerRegistry{EnableInternal: ptr.To(true)},
			DefaultBuildJobPreset: buildPreset, DefaultRuntimePodPreset: fnPreset}}
	if err := b.c.Create(ctx, cr); err != nil {
		return nil, nil, fmt.Errorf("creating the Serverless CR (is one left from an earlier run?): %w", err)
	}
	var undo []func()
	cleanup = func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}
	undo = append(undo, func() { b.uninstall(cr) })
	defer func() {
		if err != nil {
			cleanup()
		}
	}()
	if err := b.waitReady(ctx, 1, 3*time.Minute); err != nil {
		return nil, nil, err
	}
	if err := b.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: p.ns}}); err != nil {
		return nil, nil, fmt.Errorf("namespace %s (left from an earlier run?): %w", p.ns, err)
	}
	undo = append(undo, func() { b.deleteNamespaces([]string{p.ns}) })
	if err := b.c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: p.ns, Name: podsPackageRegistrySecret},
		StringData: map[string]string{".npmrc": p.npm.NPMRC()}}); err != nil {
		return nil, nil, err
	}
	return cr, cleanup, nil
}

// publish serves the dependencies: the small one, the bulk one and each
// mode's drift package at 1.0.0.
func (p *podsBench) publish() error {
	p.log(fmt.Sprintf("publishing %s, %s (%d MiB of files) and the drift packages to the bench's npm registry", podsDep, podsBulk, podsBulkMiB))
	if err := p.npm.Publish(framework.NPMPackage{Name: podsDep, Version: "1.0.0", Main: "index.js",
		Files: map[string][]byte{"index.js": []byte("module.exports = (s) => s + ' (with " + podsDep + ")';\n")}}); err != nil {
		return err
	}
	bulk := map[string][]byte{"index.js": []byte("module.exports = 'bulk';\n")}
	for i := range podsBulkMiB / 5 {
		data := make([]byte, 5<<20)
		if _, err := rand.Read(data); err != nil {
			return err
		}
		bulk[fmt.Sprintf("data/%02d.bin", i)] = data
	}
	if err := p.npm.Publish(framework.NPMPackage{Name: podsBulk, Version: "1.0.0", Main: "index.js", Files: bulk}); err != nil {
		return err
	}
	for _, mode := range []string{v1alpha1.FunctionModeBuild, v1alpha1.FunctionModeBuildless} {
		if err := p.publishDrift(mode, "1.0.0"); err != nil {
			return err
		}
	}
	return nil
}

func (p *podsBench) publishDrift(mode, version string) error {
	return p.npm.Publish(framework.NPMPackage{Name: podsDrift + "-" + mode, Version: version, Main: "index.js",
		Files: map[string][]byte{"index.js": []byte("module.exports = require('./package.json').version;\n")}})
}

// podsFunction is a Node.js 22 Function answering answer (passed through
// the small dependency when deps has it); deps are the package names it
// declares (at 1.0.0), name is package.json's name (a new one makes the
// dependency list new to the build cache).
func (p *podsBench) podsFunction(name, pkgName, answer string, deps ...string) *v1alpha2.Function {
	src := fmt.Sprintf("module.exports = { main: function (event, context) { return %q; } };\n", answer)
	if slices.Contains(deps, podsDep) {
		src = fmt.Sprintf("const dep = require(%q);\n", podsDep)
		if slices.Contains(deps, podsBulk) {
			src += fmt.Sprintf("require(%q);\n", podsBulk)
		}
		src += fmt.Sprintf("module.exports = { main: function (event, context) { return dep(%q); } };\n", answer)
	}
	versions := map[string]string{}
	for _, d := range deps {
		versions[d] = "1.0.0"
	}
	return &v1alpha2.Function{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.ns, Name: name},
		Spec: v1alpha2.FunctionSpec{Runtime: v1alpha2.RuntimeNodejs22, Replicas: ptr.To[int32](1),
			Source: v1alpha2.Source{Inline: &v1alpha2.InlineSource{Source: src, Dependencies: packageJSON(pkgName, versions)}}},
	}
}

func packageJSON(name string, deps map[string]string) string {
	names := make([]string, 0, len(deps))
	for d := range deps {
		names = append(names, d)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, d := range names {
		parts[i] = fmt.Sprintf("%q: %q", d, deps[d])
	}
	return fmt.Sprintf(`{ "name": %q, "version": "1.0.0", "dependencies": { %s } }`, name, strings.Join(parts, ", "))
}

// expect is what a podsFunction answers.
func expect(answer string, deps ...string) string {
	if slices.Contains(deps, podsDep) {
		return answer + " (with " + podsDep + ")"
	}
	return answer
}

// round is one run of every figure of mode; it leaves no Function behind.
func (p *podsBench) round(ctx context.Context, mode string, r int) error {
	add := func(fig string, d time.Duration) {
		p.samples[mode][fig] = append(p.samples[mode][fig], d)
		p.log(fmt.Sprintf("  %s: %s %.1fs", mode, fig, d.Seconds()))
	}
	tag := fmt.Sprintf("%s-%d", mode, r)
	small := []string{podsDep}
	bulk := []string{podsDep, podsBulk}

	// The Function the scale-out starts from: created first (its answer
	// timed), in build mode changed once more (the rebuild timed).
	main := p.podsFunction("dep", "dep-"+tag, "v1", small...)
	d, err := p.createAndAnswer(ctx, main, expect("v1", small...))
	if err != nil {
		return err
	}
	add(figCold, d)
	if mode == v1alpha1.FunctionModeBuild {
		if d, err = p.changeAndAnswer(ctx, "dep", p.podsFunction("dep", "dep-"+tag, "v2", small...), expect("v2", small...)); err != nil {
			return err
		}
		add(figRebuild, d)
	} else {
		nodep := p.podsFunction("nodep", "nodep-"+tag, "v1")
		if d, err = p.createAndAnswer(ctx, nodep, expect("v1")); err != nil {
			return err
		}
		add(figNoDep, d)
		if err := p.deleteFunction(ctx, "nodep"); err != nil {
			return err
		}
	}
	want := expect("v1", small...)
	if mode == v1alpha1.FunctionModeBuild {
		want = expect("v2", small...)
	}
	if d, err = p.scaleOut(ctx, "dep", podsScaleTo, want); err != nil {
		return err
	}
	add(figScale, d)
	if err := p.deleteFunction(ctx, "dep"); err != nil {
		return err
	}

	big := p.podsFunction("bulk", "bulk-"+tag, "v1", bulk...)
	if d, err = p.createAndAnswer(ctx, big, expect("v1", bulk...)); err != nil {
		return err
	}
	add(figBulk, d)
	if d, err = p.scaleOut(ctx, "bulk", podsScaleTo, expect("v1", bulk...)); err != nil {
		return err
	}
	add(figScaleBulk, d)
	if r == 1 {
		mem, err := readNodeMemory()
		if err != nil {
			return err
		}
		p.memory[mode] = mem
	}
	return p.deleteFunction(ctx, "bulk")
}

// createAndAnswer creates fn and times until its Service answers want.
func (p *podsBench) createAndAnswer(ctx context.Context, fn *v1alpha2.Function, want string) (time.Duration, error) {
	start := time.Now()
	if err := p.fcs.Create(ctx, fn); err != nil {
		return 0, err
	}
	return p.untilAnswer(ctx, fn.Name, want, start)
}

// changeAndAnswer replaces fn's source and dependencies with next's and
// times until its Service answers want.
func (p *podsBench) changeAndAnswer(ctx context.Context, name string, next *v1alpha2.Function, want string) (time.Duration, error) {
	start, err := p.edit(ctx, name, func(fn *v1alpha2.Function) { fn.Spec.Source = next.Spec.Source })
	if err != nil {
		return 0, err
	}
	return p.untilAnswer(ctx, name, want, start)
}

// edit changes the Function, read again after a conflict with the
// controller's status writes, and returns when the accepted update was sent.
func (p *podsBench) edit(ctx context.Context, name string, change func(*v1alpha2.Function)) (sent time.Time, err error) {
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		fn := &v1alpha2.Function{}
		if err := p.fcs.Get(ctx, client.ObjectKey{Namespace: p.ns, Name: name}, fn); err != nil {
			return err
		}
		change(fn)
		sent = time.Now()
		return p.fcs.Update(ctx, fn)
	})
	return sent, err
}

func (p *podsBench) untilAnswer(ctx context.Context, name, want string, start time.Time) (time.Duration, error) {
	var at time.Time
	err := framework.Poll(ctx, 10*time.Minute, fmt.Sprintf("Function %s/%s to answer %q", p.ns, name, want), func(ctx context.Context) (bool, string, error) {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		r, err := p.cluster.CallService(cctx, p.ns, name, http.MethodGet, "/", nil, nil)
		if err != nil {
			return false, err.Error(), nil
		}
		at = time.Now()
		return r.Status == http.StatusOK && r.Body == want, fmt.Sprintf("HTTP %d: %.200s", r.Status, r.Body), nil
	}, p.dumpFunction(name), p.cluster.DumpPodLogs(p.ns, map[string]string{v1alpha2.LabelFunctionName: name}, 20))
	return at.Sub(start), err
}

// dumpFunction says where a Function stands.
func (p *podsBench) dumpFunction(name string) func() string {
	return func() string {
		fn := &v1alpha2.Function{}
		if err := p.fcs.Get(context.Background(), client.ObjectKey{Namespace: p.ns, Name: name}, fn); err != nil {
			return err.Error()
		}
		return fmt.Sprintf("Function %s: generation %d, observed %d, waiting on %s", name, fn.Generation, fn.Status.ObservedGeneration, waitingOnIn(fn, p.mode))
	}
}

// scaleOut sets the Function's replicas to n and times until n Pods of its
// Deployment, not terminating, each answer want on their own address.
func (p *podsBench) scaleOut(ctx context.Context, name string, n int32, want string) (time.Duration, error) {
	// A rollout just ended leaves a Pod terminating; its teardown would
	// take the CPU the new Pods start with.
	if err := p.onePodLeft(ctx, name); err != nil {
		return 0, err
	}
	// Where the time goes: the Deployment scaled (the controller), each
	// Pod created (ReplicaSet controller), its IP reported (kubelet: sandbox
	// up), its answer (the container's start).
	sel := []client.ListOption{client.InNamespace(p.ns), client.MatchingLabels{v1alpha2.LabelFunctionName: name}}
	deploys, err := watchTimeline(ctx, p.wc, &appsv1.DeploymentList{}, func(o client.Object) (bool, string) {
		d := o.(*appsv1.Deployment)
		return d.Spec.Replicas != nil && *d.Spec.Replicas == n, "not scaled"
	}, sel...)
	if err != nil {
		return 0, err
	}
	defer deploys.end()
	pods, err := watchTimeline(ctx, p.wc, &corev1.PodList{}, func(o client.Object) (bool, string) {
		return o.(*corev1.Pod).Status.PodIP != "", "no IP"
	}, sel...)
	if err != nil {
		return 0, err
	}
	defer pods.end()
	start, err := p.edit(ctx, name, func(fn *v1alpha2.Function) { fn.Spec.Replicas = ptr.To(n) })
	if err != nil {
		return 0, err
	}
	answered, err := p.untilPodsAnswer(ctx, name, int(n), func(body string) bool { return body == want })
	_, scaled := deploys.end()
	created, withIP := pods.end()
	if err != nil {
		return 0, err
	}
	var lastPod string
	for pod, a := range answered {
		if lastPod == "" || a.at.After(answered[lastPod].at) {
			lastPod = pod
		}
	}
	key := p.ns + "/" + lastPod
	p.log(fmt.Sprintf("    after the change: Deployment scaled %.1fs; the last Pod to answer created %.1fs, its IP reported %.1fs, answered %.1fs",
		last(scaled, start).Seconds(), created[key].Sub(start).Seconds(), withIP[key].Sub(start).Seconds(), answered[lastPod].at.Sub(start).Seconds()))
	return answered[lastPod].at.Sub(start), nil
}

// functionPods selects the Pods of the Function's Deployment.
func (p *podsBench) functionPods(name string) []client.ListOption {
	return []client.ListOption{client.InNamespace(p.ns), client.MatchingLabels{
		v1alpha2.LabelFunctionName: name, v1alpha2.LabelResource: v1alpha2.ResourceDeployment}}
}

// onePodLeft waits until the Function has exactly one Pod, none terminating.
func (p *podsBench) onePodLeft(ctx context.Context, name string) error {
	return framework.Poll(ctx, 2*time.Minute, "Function "+name+" to have one Pod left", func(ctx context.Context) (bool, string, error) {
		var pods corev1.PodList
		if err := p.c.List(ctx, &pods, p.functionPods(name)...); err != nil {
			return false, "", err
		}
		return len(pods.Items) == 1 && pods.Items[0].DeletionTimestamp == nil, fmt.Sprintf("%d Pods", len(pods.Items)), nil
	}, p.dumpFunction(name))
}

// podAnswer is a Pod's first answer.
type podAnswer struct {
	at   time.Time
	body string
}

// untilPodsAnswer calls each of the Function's Pods (not terminating) on
// port 8080 of its IP until n of them answered a body ok accepts, and
// returns each Pod's first such answer.
func (p *podsBench) untilPodsAnswer(ctx context.Context, name string, n int, ok func(string) bool) (map[string]podAnswer, error) {
	answered := map[string]podAnswer{}
	httpc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	err := framework.Poll(ctx, 10*time.Minute, fmt.Sprintf("%d Pods of Function %s/%s to answer", n, p.ns, name), func(ctx context.Context) (bool, string, error) {
		var pods corev1.PodList
		if err := p.c.List(ctx, &pods, p.functionPods(name)...); err != nil {
			return false, "", err
		}
		var mu sync.Mutex
		var wg sync.WaitGroup
		var waiting []string
		for i := range pods.Items {
			pod := &pods.Items[i]
			if pod.DeletionTimestamp != nil {
				continue
			}
			if _, done := answered[pod.Name]; done {
				continue
			}
			if pod.Status.PodIP == "" {
				waiting = append(waiting, pod.Name+": no IP")
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				body, err := get(ctx, httpc, "http://"+pod.Status.PodIP+":8080/")
				mu.Lock()
				defer mu.Unlock()
				if err == nil && ok(body) {
					answered[pod.Name] = podAnswer{at: time.Now(), body: body}
				} else {
					waiting = append(waiting, fmt.Sprintf("%s: %v %.100s", pod.Name, err, body))
				}
			}()
		}
		wg.Wait()
		return len(answered) >= n, fmt.Sprintf("%d answered; %s", len(answered), strings.Join(waiting, "; ")), nil
	}, p.dumpFunction(name))
	return answered, err
}

func get(ctx context.Context, c *http.Client, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return string(data), fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return string(bytes.TrimSpace(data)), err
}

// deleteFunction deletes a Function and waits until its Pods are gone (the
// next figure gets the node's CPU back).
func (p *podsBench) deleteFunction(ctx context.Context, name string) error {
	if err := p.fcs.Delete(ctx, &v1alpha2.Function{ObjectMeta: metav1.ObjectMeta{Namespace: p.ns, Name: name}}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return framework.Poll(ctx, 3*time.Minute, "Function "+name+"'s Pods to be gone", func(ctx context.Context) (bool, string, error) {
		var pods corev1.PodList
		if err := p.c.List(ctx, &pods, client.InNamespace(p.ns), client.MatchingLabels{v1alpha2.LabelFunctionName: name}); err != nil {
			return false, "", err
		}
		return len(pods.Items) == 0, fmt.Sprintf("%d Pods left", len(pods.Items)), nil
	})
}

// measureDrift runs 2 replicas of a Function declaring the mode's drift
// package "^1.0.0", releases 1.1.0, scales to 4 and records the version
// each replica runs.
func (p *podsBench) measureDrift(ctx context.Context, mode string) error {
	pkg := podsDrift + "-" + mode
	p.log(fmt.Sprintf("  %s: drift: 2 replicas on %s ^1.0.0, then 1.1.0 released, then 4 replicas", mode, pkg))
	src := fmt.Sprintf("module.exports = { main: function (event, context) { return require(%q); } };\n", pkg)
	fn := &v1alpha2.Function{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.ns, Name: "drift"},
		Spec: v1alpha2.FunctionSpec{Runtime: v1alpha2.RuntimeNodejs22, Replicas: ptr.To[int32](2),
			Source: v1alpha2.Source{Inline: &v1alpha2.InlineSource{Source: src, Dependencies: packageJSON("drift", map[string]string{pkg: "^1.0.0"})}}},
	}
	if err := p.fcs.Create(ctx, fn); err != nil {
		return err
	}
	if _, err := p.untilPodsAnswer(ctx, "drift", 2, func(b string) bool { return b == "1.0.0" }); err != nil {
		return err
	}
	if err := p.publishDrift(mode, "1.1.0"); err != nil {
		return err
	}
	if _, err := p.edit(ctx, fn.Name, func(fn *v1alpha2.Function) { fn.Spec.Replicas = ptr.To[int32](4) }); err != nil {
		return err
	}
	answered, err := p.untilPodsAnswer(ctx, "drift", 4, func(b string) bool { return b == "1.0.0" || b == "1.1.0" })
	if err != nil {
		return err
	}
	names := make([]string, 0, len(answered))
	for n := range answered {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return answered[names[i]].at.Before(answered[names[j]].at) })
	for _, n := range names {
		p.drift[mode] = append(p.drift[mode], answered[n].body)
	}
	return p.deleteFunction(ctx, "drift")
}

// nodeMemory is the resident memory of the real node's parts.
type nodeMemory struct {
	kubelet, containerd, shims int64
	shimCount                  int
}

// readNodeMemory finds kubelet, containerd and the containerd shims among
// this machine's processes (one real node per machine) by their binary.
func readNodeMemory() (nodeMemory, error) {
	var m nodeMemory
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return m, err
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		if err != nil {
			continue
		}
		rss, err := residentBytes(pid)
		if err != nil {
			continue
		}
		switch filepath.Base(exe) {
		case "kubelet":
			m.kubelet += rss
		case "containerd":
			m.containerd += rss
		case "containerd-shim-runc-v2":
			m.shims += rss
			m.shimCount++
		}
	}
	if m.kubelet == 0 || m.containerd == 0 {
		return m, errors.New("no kubelet or containerd process on this machine: is the real node up?")
	}
	return m, nil
}

// residentBytes is a process's VmRSS.
func residentBytes(pid int) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("process %d: no VmRSS", pid)
}

// spread is "median s (min–max)".
func spread(ds []time.Duration) string {
	if len(ds) == 0 {
		return "-"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return fmt.Sprintf("%.1f s (%.1f–%.1f)", median(s).Seconds(), s[0].Seconds(), s[len(s)-1].Seconds())
}

func (p *podsBench) ratio(fig string) string {
	b, l := p.samples[v1alpha1.FunctionModeBuild][fig], p.samples[v1alpha1.FunctionModeBuildless][fig]
	if len(b) == 0 || len(l) == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f×", median(b).Seconds()/median(l).Seconds())
}

func (p *podsBench) print(repeats int, fnPreset, buildPreset string) {
	build, buildless := v1alpha1.FunctionModeBuild, v1alpha1.FunctionModeBuildless
	fmt.Printf("\nReal Pods on the real node: a Node.js 22 Function, dependencies from a local npm registry; builds %s, Functions %s; median (min–max) of %d runs\n\n", buildPreset, fnPreset, repeats)
	fmt.Println("| | build mode | buildless mode | build ÷ buildless |")
	fmt.Println("|---|---|---|---|")
	for _, fig := range []string{figCold, figRebuild, figNoDep, figBulk, figScale, figScaleBulk} {
		fmt.Printf("| %s | %s | %s | %s |\n", fig, spread(p.samples[build][fig]), spread(p.samples[buildless][fig]), p.ratio(fig))
	}
	fmt.Printf("\nDrift (a dependency declared ^1.0.0; 1.1.0 released after 2 replicas ran; 4 replicas in the order they answered):\n")
	for _, mode := range []string{build, buildless} {
		fmt.Printf("- %s mode: %s\n", mode, strings.Join(p.drift[mode], ", "))
	}
	fmt.Printf("\nNode parts' resident memory, %d replicas of the ~50 MB Function running:\n", podsScaleTo)
	for _, mode := range []string{build, buildless} {
		m := p.memory[mode]
		fmt.Printf("- %s mode: kubelet %.0f MiB, containerd %.0f MiB, %d shims %.0f MiB (%.1f MiB each)\n",
			mode, mib(m.kubelet), mib(m.containerd), m.shimCount, mib(m.shims), mib(m.shims)/float64(max(1, m.shimCount)))
	}
	fmt.Printf("Target: scale-out in build mode ≤ 0.5× buildless mode's time with the dependency: %s\n", p.ratio(figScale))
}
