package main

// The scale-to-zero bench (-zero): Functions with minReplicas 0 on the real
// node, the module installed as `make run` does, dependencies from the
// bench's own npm registry (as -pods):
//
//   - from zero to the first answer, -wakeups times, in three setups: build
//     mode without dependencies, build mode with an npm dependency, buildless
//     mode with the same dependency; where each wake-up's time goes, from the
//     bench's watch of the Function's Pod: the wake (the activator's scale
//     request, the controller's Deployment, the ReplicaSet's Pod), scheduling,
//     the sandbox, the container's start, the runtime's readiness, and the
//     hand-back from Ready to the answer;
//   - 100 requests at once to a Function at zero: how many were answered,
//     and when the last was;
//   - the latency a scale-to-zero Function adds once awake: sequential calls
//     through its Service against those of the same Function without
//     minReplicas 0.
//
// The bench puts a Function to zero itself (spec.replicas 0, what the
// activator's leader writes after the idle window), so a cycle does not wait
// the window out; the Functions' window is long enough that the leader
// never races it.

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/tests/framework"
)

// zeroSetup is one kind of Function the wake-ups are measured for.
type zeroSetup struct {
	name string
	mode string
	deps []string
}

func zeroSetups() []zeroSetup {
	return []zeroSetup{
		{"build mode, no dependency", v1alpha1.FunctionModeBuild, nil},
		{"build mode, npm dependency", v1alpha1.FunctionModeBuild, []string{podsDep}},
		{"buildless mode, npm dependency", v1alpha1.FunctionModeBuildless, []string{podsDep}},
	}
}

// The phases of a wake-up, in order; each ends at the moment its name says.
var zeroPhases = []string{
	"request → Pod created (wake, Deployment, ReplicaSet)",
	"→ scheduled",
	"→ sandbox ready",
	"→ container started",
	"→ Pod Ready (runtime up, readiness probe)",
	"→ first answer (hand-back, forward)",
}

type zeroBench struct {
	*podsBench
	wakeups int
	total   map[string][]time.Duration            // setup → from request to answer
	phases  map[string]map[string][]time.Duration // setup → phase → durations
	burst   string                                // 100 requests at zero
	steady  [2][]time.Duration                    // [minReplicas 0, minReplicas 1]
}

func runZero(wakeups int, fnPreset string) error {
	ctx := context.Background()
	b, release, err := startFnBench(ctx)
	if err != nil {
		return err
	}
	defer release()
	p := &podsBench{fnBench: b, ns: "bench-zero", samples: map[string]map[string][]time.Duration{}}
	npm, err := b.cluster.StartNPMRegistry(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = npm.Close() }()
	p.npm = npm
	if err := npm.Publish(framework.NPMPackage{Name: podsDep, Version: "1.0.0", Main: "index.js",
		Files: map[string][]byte{"index.js": []byte("module.exports = (s) => s + ' (with " + podsDep + ")';\n")}}); err != nil {
		return err
	}
	cr, cleanup, err := p.install(ctx, "normal", fnPreset)
	if err != nil {
		return err
	}
	defer cleanup()

	z := &zeroBench{podsBench: p, wakeups: wakeups, total: map[string][]time.Duration{}, phases: map[string]map[string][]time.Duration{}}
	for i, s := range zeroSetups() {
		if err := b.useMode(ctx, cr, s.mode); err != nil {
			return err
		}
		if _, err := b.controllerPod(ctx, "in "+s.mode+" mode", nil); err != nil {
			return err
		}
		p.mode = s.mode
		if err := z.setup(ctx, i, s); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
	}
	z.print(fnPreset)
	return nil
}

// setup measures one setup's wake-ups; the first setup also measures the
// burst at zero and the steady-state latency.
func (z *zeroBench) setup(ctx context.Context, i int, s zeroSetup) error {
	name := fmt.Sprintf("zero-%d", i)
	want := expect("awake", s.deps...)
	fn := z.sleepy(name, s.deps)
	z.log(fmt.Sprintf("%s: creating %s", s.name, name))
	if _, err := z.createAndAnswer(ctx, fn, want); err != nil {
		return err
	}
	defer func() { _ = z.deleteFunction(context.Background(), name) }()
	if i == 0 {
		if err := z.measureSteady(ctx, name, want); err != nil {
			return err
		}
		if err := z.measureBurst(ctx, name, want, 100); err != nil {
			return err
		}
	}
	z.phases[s.name] = map[string][]time.Duration{}
	for n := 1; n <= z.wakeups; n++ {
		if err := z.toZero(ctx, name); err != nil {
			return err
		}
		total, phases, err := z.wake(ctx, name, want)
		if err != nil {
			return fmt.Errorf("wake-up %d: %w", n, err)
		}
		z.total[s.name] = append(z.total[s.name], total)
		for ph, d := range phases {
			z.phases[s.name][ph] = append(z.phases[s.name][ph], d)
		}
		z.log(fmt.Sprintf("  %s: wake-up %d answered after %.2fs", s.name, n, total.Seconds()))
	}
	return nil
}

// sleepy is a podsFunction with minReplicas 0 and an idle window the bench
// never waits out.
func (z *zeroBench) sleepy(name string, deps []string) *v1alpha2.Function {
	fn := z.podsFunction(name, name+"-pkg", "awake", deps...)
	fn.Annotations = map[string]string{v1alpha2.AnnotationScaleToZeroAfter: "1h"}
	fn.Spec.ScaleConfig = &v1alpha2.ScaleConfig{MinReplicas: ptr.To[int32](0), MaxReplicas: ptr.To[int32](1)}
	return fn
}

// toZero sets the Function's replicas to 0 and waits until it says so and
// has no Pod left.
func (z *zeroBench) toZero(ctx context.Context, name string) error {
	if _, err := z.edit(ctx, name, func(fn *v1alpha2.Function) { fn.Spec.Replicas = ptr.To[int32](0) }); err != nil {
		return err
	}
	err := framework.Poll(ctx, 5*time.Minute, fmt.Sprintf("Function %s/%s at zero with no Pod", z.ns, name), func(ctx context.Context) (bool, string, error) {
		fn := &v1alpha2.Function{}
		if err := z.fcs.Get(ctx, client.ObjectKey{Namespace: z.ns, Name: name}, fn); err != nil {
			return false, "", err
		}
		var pods corev1.PodList
		if err := z.c.List(ctx, &pods, z.functionPods(name)...); err != nil {
			return false, "", err
		}
		running := conditionOf(fn, v1alpha2.ConditionRunning)
		reason := ""
		if running != nil {
			reason = running.Reason
		}
		return reason == v1alpha2.ReasonScaledToZero && len(pods.Items) == 0, fmt.Sprintf("Running reason %q, %d Pods", reason, len(pods.Items)), nil
	}, z.dumpFunction(name))
	// The Service has pointed at the activator since the drain began; give
	// the node a moment after the last Pod went.
	time.Sleep(time.Second)
	return err
}

func conditionOf(fn *v1alpha2.Function, typ string) *v1alpha2.Condition {
	for i := range fn.Status.Conditions {
		if fn.Status.Conditions[i].Type == typ {
			return &fn.Status.Conditions[i]
		}
	}
	return nil
}

// wake calls the Function at zero once and returns the time to its answer
// and the phases of its new Pod, from a watch opened before the call.
func (z *zeroBench) wake(ctx context.Context, name, want string) (time.Duration, map[string]time.Duration, error) {
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	w, err := z.wc.Watch(wctx, &corev1.PodList{}, z.functionPods(name)...)
	if err != nil {
		return 0, nil, err
	}
	marks := make(chan map[int]time.Time, 1)
	go func() { marks <- podMarks(w) }()

	start := time.Now()
	cctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	r, err := z.cluster.CallService(cctx, z.ns, name, http.MethodGet, "/", nil, nil)
	cancel()
	answered := time.Now()
	if err != nil {
		return 0, nil, err
	}
	if r.Status != http.StatusOK || r.Body != want {
		return 0, nil, fmt.Errorf("answered HTTP %d %q, want 200 %q", r.Status, r.Body, want)
	}
	// The watch's events for a Ready Pod arrive within moments of it.
	time.Sleep(300 * time.Millisecond)
	w.Stop()
	m := <-marks
	phases := map[string]time.Duration{}
	prev := start
	for i, ph := range zeroPhases {
		at, ok := m[i]
		if i == len(zeroPhases)-1 {
			at, ok = answered, true
		}
		if !ok || at.Before(prev) {
			continue // not seen by the watch: the phase merges into the next
		}
		phases[ph] = at.Sub(prev)
		prev = at
	}
	return answered.Sub(start), phases, nil
}

// podMarks records, from a Pod watch, when the first Pod reached each of the
// first five phases of zeroPhases (by index), until the watch ends.
func podMarks(w watch.Interface) map[int]time.Time {
	m := map[int]time.Time{}
	mark := func(i int, reached bool) {
		if _, seen := m[i]; reached && !seen {
			m[i] = time.Now()
		}
	}
	for ev := range w.ResultChan() {
		pod, ok := ev.Object.(*corev1.Pod)
		if !ok || ev.Type == watch.Deleted || pod.DeletionTimestamp != nil {
			continue
		}
		mark(0, true)
		mark(1, pod.Spec.NodeName != "")
		for _, c := range pod.Status.Conditions {
			mark(2, c.Type == corev1.PodReadyToStartContainers && c.Status == corev1.ConditionTrue)
			mark(4, c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue)
		}
		for _, cs := range pod.Status.ContainerStatuses {
			mark(3, cs.State.Running != nil)
		}
	}
	return m
}

// measureBurst sends n requests at once to the Function at zero.
func (z *zeroBench) measureBurst(ctx context.Context, name, want string, n int) error {
	if err := z.toZero(ctx, name); err != nil {
		return err
	}
	z.log(fmt.Sprintf("%d requests at once to %s at zero", n, name))
	var mu sync.Mutex
	var ok int
	var last time.Duration
	var failures []string
	var wg sync.WaitGroup
	start := time.Now()
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, 90*time.Second)
			defer cancel()
			r, err := z.cluster.CallService(cctx, z.ns, name, http.MethodGet, "/", nil, nil)
			mu.Lock()
			defer mu.Unlock()
			last = max(last, time.Since(start))
			switch {
			case err != nil:
				failures = append(failures, err.Error())
			case r.Status != http.StatusOK || r.Body != want:
				failures = append(failures, fmt.Sprintf("HTTP %d %.80q", r.Status, r.Body))
			default:
				ok++
			}
		}()
	}
	wg.Wait()
	z.burst = fmt.Sprintf("%d of %d answered; the last after %.2f s", ok, n, last.Seconds())
	if len(failures) > 0 {
		slices.Sort(failures)
		z.burst += "; failed: " + strings.Join(slices.Compact(failures), "; ")
	}
	z.log(z.burst)
	return nil
}

// steadyCalls is how many sequential calls each steady-state figure takes.
const steadyCalls = 300

// measureSteady times sequential calls through the Services of the awake
// scale-to-zero Function and of a twin without minReplicas 0, alternating.
func (z *zeroBench) measureSteady(ctx context.Context, name, want string) error {
	twin := z.podsFunction(name+"-twin", name+"-pkg", "awake")
	if want != expect("awake") {
		twin = z.podsFunction(name+"-twin", name+"-pkg", "awake", podsDep)
	}
	if _, err := z.createAndAnswer(ctx, twin, want); err != nil {
		return err
	}
	defer func() { _ = z.deleteFunction(context.Background(), twin.Name) }()
	z.log(fmt.Sprintf("steady state: %d calls each to %s and %s", steadyCalls, name, twin.Name))
	urls := [2]string{}
	for i, n := range []string{name, twin.Name} {
		svc := &corev1.Service{}
		if err := z.c.Get(ctx, client.ObjectKey{Namespace: z.ns, Name: n}, svc); err != nil {
			return err
		}
		urls[i] = "http://" + net.JoinHostPort(svc.Spec.ClusterIP, "80") + "/"
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil}}
	for range steadyCalls {
		for i, u := range urls {
			start := time.Now()
			resp, err := hc.Get(u)
			if err != nil {
				return fmt.Errorf("steady-state call to %s: %w", u, err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			z.steady[i] = append(z.steady[i], time.Since(start))
		}
	}
	return nil
}

// percentile of sorted durations (nearest rank).
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p*float64(len(sorted))+0.999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// quantiles is "p50 x s, p99 y s (min–max)".
func quantiles(ds []time.Duration, unit time.Duration, suffix string) string {
	if len(ds) == 0 {
		return "-"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	f := func(d time.Duration) float64 { return float64(d) / float64(unit) }
	return fmt.Sprintf("p50 %.2f %s, p99 %.2f %s (%.2f–%.2f)", f(percentile(s, 0.5)), suffix, f(percentile(s, 0.99)), suffix, f(s[0]), f(s[len(s)-1]))
}

func (z *zeroBench) print(fnPreset string) {
	fmt.Printf("\nScale to zero on the real node: a Node.js 22 Function (preset %s), dependencies from a local npm registry; %d wake-ups per setup\n\n", fnPreset, z.wakeups)
	fmt.Println("| setup | from zero to the first answer |")
	fmt.Println("|---|---|")
	for _, s := range zeroSetups() {
		fmt.Printf("| %s | %s |\n", s.name, quantiles(z.total[s.name], time.Second, "s"))
	}
	fmt.Println("\nWhere a wake-up's time goes (median of each phase; a phase the Pod watch did not see merges into the next):")
	fmt.Println()
	fmt.Print("| phase |")
	for _, s := range zeroSetups() {
		fmt.Printf(" %s |", s.name)
	}
	fmt.Print("\n|---|")
	for range zeroSetups() {
		fmt.Print("---|")
	}
	fmt.Println()
	for _, ph := range zeroPhases {
		fmt.Printf("| %s |", ph)
		for _, s := range zeroSetups() {
			ds := slices.Clone(z.phases[s.name][ph])
			sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
			if len(ds) == 0 {
				fmt.Print(" - |")
				continue
			}
			fmt.Printf(" %.2f s |", percentile(ds, 0.5).Seconds())
		}
		fmt.Println()
	}
	fmt.Printf("\n100 requests at once at zero (%s): %s\n", zeroSetups()[0].name, z.burst)
	fmt.Printf("\nSteady state, %d sequential calls through the Service (new connection each):\n", steadyCalls)
	fmt.Printf("- minReplicas 0, awake: %s\n", quantiles(z.steady[0], time.Millisecond, "ms"))
	fmt.Printf("- minReplicas 1:        %s\n", quantiles(z.steady[1], time.Millisecond, "ms"))
}
