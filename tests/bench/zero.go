package main

// The scale-to-zero bench (-zero): Functions with minReplicas 0 on the real
// node, the module installed as `make run` does, dependencies from the
// bench's own npm registry (as -pods):
//
//   - from zero to the first answer, -wakeups times, in four setups: a
//     built Node.js Function (the bench's profile, and XS: make run's) and a
//     built Python Function without dependencies, and a buildless Node.js
//     Function with an npm dependency;
//   - where each wake-up's time goes, from a watch of the Function's Pods
//     opened before the request: the wake (the activator's scale request,
//     the controller's Deployment, the ReplicaSet's Pod), scheduling, the
//     sandbox (the Pod's IP reported), the runtime's start (the bench polls
//     the Pod's /healthz itself from when it sees the IP) and the forward
//     to the first answer; Pod Ready for reference;
//   - -zero-functions Functions at zero called at the same moment: their
//     answers, their phases, and the machine's CPU-seconds per woken Pod,
//     split by process;
//   - -zero-burst requests at once to one Function at zero: how many were
//     answered, and when the last was;
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
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
	"github.com/kyma-project/serverless-manager/tests/framework"
)

// zeroSetup is one kind of Function the wake-ups are measured for.
type zeroSetup struct {
	name    string
	mode    string
	runtime v1alpha2.Runtime
	deps    []string
	profile string // the Function's profile ("": the bench's)
}

func zeroSetups() []zeroSetup {
	return []zeroSetup{
		{"build mode, Node.js 22, no dependency", v1alpha1.FunctionModeBuild, v1alpha2.RuntimeNodejs22, nil, ""},
		// make run's default profile on its one-node cluster.
		{"build mode, Node.js 22, no dependency, XS", v1alpha1.FunctionModeBuild, v1alpha2.RuntimeNodejs22, nil, "XS"},
		{"build mode, Python 3.12, no dependency", v1alpha1.FunctionModeBuild, v1alpha2.RuntimePython312, nil, ""},
		{"buildless mode, Node.js 22, npm dependency", v1alpha1.FunctionModeBuildless, v1alpha2.RuntimeNodejs22, []string{podsDep}, ""},
	}
}

const (
	// zeroFleetPreset sizes the Functions woken at once: all fit on the
	// real node's 2 cores beside the module.
	zeroFleetPreset = "XS"
	// zeroCallTimeout bounds each request (the activator holds one 60 s).
	zeroCallTimeout = 90 * time.Second
	// zeroSettle bounds the wait, after the answers, for the woken Pods to
	// be Ready and the bench's probes to end.
	zeroSettle = 60 * time.Second
	// zeroAfterglow is how long the CPU of the Functions woken at once is
	// counted after their Pods were Ready: the hand-back of their Services
	// and the status writes follow.
	zeroAfterglow = 5 * time.Second
	// zeroIdle is how long the machine's CPU is counted with every Function
	// at zero before they are called, to take the idle rate out.
	zeroIdle = 10 * time.Second
)

// The bench's own probe of a woken runtime: GET /healthz on the Function
// port of the Pod's IP (this machine reaches the real node's Pods on its
// bridge), from when the watch sees the IP.
const (
	listenEvery  = 5 * time.Millisecond
	listenTry    = 200 * time.Millisecond
	listenFor    = 60 * time.Second
	listenTries  = 12000
	functionPort = "8080"
)

// The moments of a wake-up, in order; zeroPhases[i] ends at moment i. Pod
// Ready ends no phase, it is printed for reference: an activator that
// forwards only to Ready Pods shows its wait in the last phase.
const (
	atCreated = iota
	atScheduled
	atIP
	atListening
	atAnswer
	atReady
	atCount
)

// moments of one wake-up (zero: not seen).
type moments [atCount]time.Time

var momentNames = [atCount]string{"created", "scheduled", "IP", "listening", "answered", "Ready"}

var zeroPhases = []string{
	"request → Pod created (wake, Deployment, ReplicaSet)",
	"→ scheduled",
	"→ sandbox ready (Pod IP reported)",
	"→ runtime listening (answers the bench's /healthz)",
	"→ first answer (forward)",
}

const zeroReadyRow = "(Pod Ready, from the request, for reference)"

// phases splits the time from start to the answer at the moments seen; a
// moment not seen, or seen after the answer (the bench's probe sleeps
// between tries), merges its phase into the next. Pod Ready counts from
// start.
func (m moments) phases(start time.Time) map[string]time.Duration {
	out := map[string]time.Duration{}
	prev := start
	for i, ph := range zeroPhases {
		if m[i].IsZero() || m[i].Before(prev) || m[i].After(m[atAnswer]) {
			continue
		}
		out[ph] = m[i].Sub(prev)
		prev = m[i]
	}
	if !m[atReady].IsZero() {
		out[zeroReadyRow] = m[atReady].Sub(start)
	}
	return out
}

func (m moments) String() string {
	var seen []string
	for i, at := range m {
		if !at.IsZero() {
			seen = append(seen, momentNames[i])
		}
	}
	if len(seen) == 0 {
		return "no Pod"
	}
	return strings.Join(seen, ", ")
}

// Names of process groups in the CPU snapshots of the Functions woken at
// once, besides the cluster's PID files.
const (
	cpuActivator = "activator"
	cpuRuntimes  = "runtimes"
	cpuBench     = "bench"
)

type cpuRow struct{ name, label string }

// cpuRows are the rows of the CPU table, in order; what else the snapshots
// name follows.
var cpuRows = []cpuRow{
	{"kubelet", "kubelet"},
	{"containerd", "containerd, with the children it reaped (CNI plugins, shim starts)"},
	{cpuShims, "containerd shims, with the children they reaped (runc)"},
	{"kube-proxy", "kube-proxy, with the children it reaped (iptables-restore)"},
	{"kube-apiserver", "kube-apiserver"},
	{"etcd", "etcd"},
	{"kube-controller-manager", "kube-controller-manager"},
	{"kube-scheduler", "kube-scheduler"},
	{cpuController, "the Function controller"},
	{cpuActivator, "the activator (its Pods' processes)"},
	{cpuRuntimes, "the runtimes (the woken Functions' containers)"},
}

type zeroBench struct {
	*podsBench
	wakeups, fleet, burst int
	total                 map[string][]time.Duration            // column → from request to answer
	phases                map[string]map[string][]time.Duration // column → phase → durations
	fleetOutcome          string
	burstOutcome          string
	cpu                   struct {
		wake, idle cpuSpent
		pods       int // the Pods woken meanwhile
	}
	steady [2][]time.Duration // [minReplicas 0, minReplicas 1]
}

// fleetColumn is the phase table's column of the Functions woken at once.
func (z *zeroBench) fleetColumn() string { return fmt.Sprintf("%d at once", z.fleet) }

func runZero(wakeups, fleet, burst int, fnPreset string) error {
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

	z := &zeroBench{podsBench: p, wakeups: wakeups, fleet: fleet, burst: burst,
		total: map[string][]time.Duration{}, phases: map[string]map[string][]time.Duration{}}
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
		if i == 0 {
			if err := z.measureFleet(ctx, s); err != nil {
				return fmt.Errorf("%d Functions at once: %w", fleet, err)
			}
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
	z.log(fmt.Sprintf("%s: creating %s", s.name, name))
	if _, err := z.createAndAnswer(ctx, z.sleepy(name, s), want); err != nil {
		return err
	}
	defer func() { _ = z.deleteFunction(context.Background(), name) }()
	url, err := z.serviceURL(ctx, name)
	if err != nil {
		return err
	}
	if i == 0 {
		if err := z.measureSteady(ctx, name, url, want); err != nil {
			return err
		}
		if err := z.measureBurst(ctx, name, url, want); err != nil {
			return err
		}
	}
	for n := 1; n <= z.wakeups; n++ {
		if err := z.toZero(ctx, name); err != nil {
			return err
		}
		start, m, err := z.wake(ctx, name, url, want)
		if err != nil {
			return fmt.Errorf("wake-up %d: %w", n, err)
		}
		z.add(s.name, start, m)
		z.log(fmt.Sprintf("  %s: wake-up %d answered after %.2fs (%s)", s.name, n, m[atAnswer].Sub(start).Seconds(), m))
	}
	return nil
}

// add records a wake-up's time and phases in column.
func (z *zeroBench) add(column string, start time.Time, m moments) {
	z.total[column] = append(z.total[column], m[atAnswer].Sub(start))
	if z.phases[column] == nil {
		z.phases[column] = map[string][]time.Duration{}
	}
	for ph, d := range m.phases(start) {
		z.phases[column][ph] = append(z.phases[column][ph], d)
	}
}

// sleepy is the setup's Function answering "awake" (with the setup's
// dependencies), with minReplicas 0 and an idle window the bench never
// waits out.
func (z *zeroBench) sleepy(name string, s zeroSetup) *v1alpha2.Function {
	fn := z.podsFunction(name, name+"-pkg", "awake", s.deps...)
	if s.runtime == v1alpha2.RuntimePython312 {
		fn.Spec.Runtime = s.runtime
		fn.Spec.Source.Inline = &v1alpha2.InlineSource{Source: "def main(event, context):\n    return \"awake\"\n"}
	}
	if s.profile != "" {
		fn.Spec.ResourceConfiguration = &v1alpha2.ResourceConfiguration{Function: &v1alpha2.ResourceRequirements{Profile: s.profile}}
	}
	fn.Annotations = map[string]string{v1alpha2.AnnotationScaleToZeroAfter: "1h"}
	fn.Spec.ScaleConfig = &v1alpha2.ScaleConfig{MinReplicas: ptr.To[int32](0), MaxReplicas: ptr.To[int32](1)}
	return fn
}

// serviceURL is the Function's Service, called from this machine.
func (z *zeroBench) serviceURL(ctx context.Context, name string) (string, error) {
	svc := &corev1.Service{}
	if err := z.c.Get(ctx, client.ObjectKey{Namespace: z.ns, Name: name}, svc); err != nil {
		return "", err
	}
	return "http://" + net.JoinHostPort(svc.Spec.ClusterIP, "80") + "/", nil
}

// toZero sets the Functions' replicas to 0 and waits until each says so
// and has no Pod left.
func (z *zeroBench) toZero(ctx context.Context, names ...string) error {
	for _, name := range names {
		if _, err := z.edit(ctx, name, func(fn *v1alpha2.Function) { fn.Spec.Replicas = ptr.To[int32](0) }); err != nil {
			return err
		}
	}
	err := framework.Poll(ctx, 5*time.Minute, fmt.Sprintf("%d Functions in %s at zero with no Pod", len(names), z.ns), func(ctx context.Context) (bool, string, error) {
		var pods corev1.PodList
		if err := z.c.List(ctx, &pods, client.InNamespace(z.ns), client.MatchingLabels{v1alpha2.LabelResource: v1alpha2.ResourceDeployment}); err != nil {
			return false, "", err
		}
		var waiting []string
		for _, name := range names {
			fn := &v1alpha2.Function{}
			if err := z.fcs.Get(ctx, client.ObjectKey{Namespace: z.ns, Name: name}, fn); err != nil {
				return false, "", err
			}
			reason := ""
			if running := fn.Status.Condition(v1alpha2.ConditionRunning); running != nil {
				reason = running.Reason
			}
			n := 0
			for _, p := range pods.Items {
				if p.Labels[v1alpha2.LabelFunctionName] == name {
					n++
				}
			}
			if reason != v1alpha2.ReasonScaledToZero || n > 0 {
				waiting = append(waiting, fmt.Sprintf("%s: Running reason %q, %d Pods", name, reason, n))
			}
		}
		return len(waiting) == 0, strings.Join(waiting, "; "), nil
	}, z.dumpFunction(names[0]))
	// The Services have pointed at the activator since the drain began;
	// give the node a moment after the last Pod went.
	time.Sleep(time.Second)
	return err
}

// wake calls the Function at zero once and returns when, and the moments
// of its wake-up.
func (z *zeroBench) wake(ctx context.Context, name, url, want string) (time.Time, moments, error) {
	ww, err := z.watchWakes(ctx, []string{name}, true)
	if err != nil {
		return time.Time{}, moments{}, err
	}
	defer ww.end()
	start, answers := callAtOnce(ctx, []string{url}, want)
	if f := answers[0].failure; f != "" {
		return start, moments{}, fmt.Errorf("after %.2fs: %s (the Pod: %s)", answers[0].after.Seconds(), f, ww.end()[name])
	}
	if err := ww.settle(ctx); err != nil {
		z.log(err.Error())
	}
	m := ww.end()[name]
	m[atAnswer] = start.Add(answers[0].after)
	return start, m, nil
}

// measureFleet creates z.fleet Functions of setup s at once, puts them to
// zero, and calls them at the same moment: their answers, their phases, and
// the machine's CPU meanwhile against its idle rate just before.
func (z *zeroBench) measureFleet(ctx context.Context, s zeroSetup) error {
	want := expect("awake", s.deps...)
	names := make([]string, z.fleet)
	for i := range names {
		names[i] = fmt.Sprintf("fleet-%02d", i)
	}
	z.log(fmt.Sprintf("%d Functions (%s, preset %s): creating them at once", z.fleet, s.name, zeroFleetPreset))
	defer func() {
		// All deleted first: their Pods stop side by side.
		for _, name := range names {
			_ = z.fcs.Delete(context.Background(), &v1alpha2.Function{ObjectMeta: metav1.ObjectMeta{Namespace: z.ns, Name: name}})
		}
		for _, name := range names {
			_ = z.deleteFunction(context.Background(), name)
		}
	}()
	for _, name := range names {
		fn := z.sleepy(name, s)
		fn.Spec.ResourceConfiguration = &v1alpha2.ResourceConfiguration{Function: &v1alpha2.ResourceRequirements{Profile: zeroFleetPreset}}
		if err := z.fcs.Create(ctx, fn); err != nil {
			return err
		}
	}
	urls := make([]string, len(names))
	for i, name := range names {
		if _, err := z.untilAnswer(ctx, name, want, time.Now()); err != nil {
			return err
		}
		url, err := z.serviceURL(ctx, name)
		if err != nil {
			return err
		}
		urls[i] = url
	}
	if err := z.toZero(ctx, names...); err != nil {
		return err
	}
	procs, err := z.moduleProcesses(ctx)
	if err != nil {
		return err
	}
	z.log(fmt.Sprintf("the machine's CPU for %s with every Function at zero", zeroIdle))
	idle := z.snapshotCPU(procs)
	time.Sleep(zeroIdle)
	z.cpu.idle = z.snapshotCPU(procs).since(idle)

	z.log(fmt.Sprintf("calling the %d Functions at zero at the same moment", z.fleet))
	ww, err := z.watchWakes(ctx, names, false)
	if err != nil {
		return err
	}
	defer ww.end()
	before := z.snapshotCPU(procs)
	start, answers := callAtOnce(ctx, urls, want)
	if err := ww.settle(ctx); err != nil {
		z.log(err.Error())
	}
	time.Sleep(zeroAfterglow)
	procs[cpuRuntimes] = z.runtimeProcesses(ctx, names)
	after := z.snapshotCPU(procs)
	z.cpu.wake = after.since(before)
	if len(after.unreadable) > 0 {
		z.log("CPU not read (the process ended): " + strings.Join(after.unreadable, ", "))
	}
	seen := ww.end()
	for i, name := range names {
		if !seen[name][atCreated].IsZero() {
			z.cpu.pods++
		}
		if answers[i].failure == "" {
			m := seen[name]
			m[atAnswer] = start.Add(answers[i].after)
			z.add(z.fleetColumn(), start, m)
		}
	}
	z.fleetOutcome = outcome(answers)
	z.log(z.fleetOutcome)
	return nil
}

// moduleProcesses are the processes of the Function controller's and the
// activator's containers, by snapshot name.
func (z *zeroBench) moduleProcesses(ctx context.Context) (map[string][]int, error) {
	ctrl, err := z.controllerPod(ctx, "", nil)
	if err != nil {
		return nil, err
	}
	pid, err := controllerProcess(ctrl)
	if err != nil {
		return nil, err
	}
	act := module.Activator()
	var pods corev1.PodList
	if err := z.c.List(ctx, &pods, client.InNamespace(framework.ManagerNamespace), client.MatchingLabels{"app.kubernetes.io/name": act.Name}); err != nil {
		return nil, err
	}
	var activator []int
	for i := range pods.Items {
		if pods.Items[i].DeletionTimestamp != nil {
			continue
		}
		p, err := containerProcess(&pods.Items[i], "activator", "/"+act.Binary)
		if err != nil {
			return nil, err
		}
		activator = append(activator, p)
	}
	if len(activator) == 0 {
		return nil, fmt.Errorf("no activator Pod in %s", framework.ManagerNamespace)
	}
	return map[string][]int{cpuController: {pid}, cpuActivator: activator, cpuBench: {os.Getpid()}}, nil
}

// functionContainer is the runtime's container in a Function's Pod.
const functionContainer = "function"

// runtimeProcesses are the processes of the named Functions' runtime
// containers; a Pod without one is logged.
func (z *zeroBench) runtimeProcesses(ctx context.Context, names []string) []int {
	var pods corev1.PodList
	if err := z.c.List(ctx, &pods, client.InNamespace(z.ns), client.MatchingLabels{v1alpha2.LabelResource: v1alpha2.ResourceDeployment}); err != nil {
		z.log("the runtimes' processes: " + err.Error())
		return nil
	}
	var out []int
	for i := range pods.Items {
		pod := &pods.Items[i]
		if pod.DeletionTimestamp != nil || !slices.Contains(names, pod.Labels[v1alpha2.LabelFunctionName]) {
			continue
		}
		pids, err := containerProcesses(pod, functionContainer)
		if err != nil {
			z.log("the runtimes' processes: " + err.Error())
		}
		out = append(out, pids...)
	}
	return out
}

// measureBurst sends z.burst requests at once to the Function at zero.
func (z *zeroBench) measureBurst(ctx context.Context, name, url, want string) error {
	if err := z.toZero(ctx, name); err != nil {
		return err
	}
	z.log(fmt.Sprintf("%d requests at once to %s at zero", z.burst, name))
	urls := make([]string, z.burst)
	for i := range urls {
		urls[i] = url
	}
	_, answers := callAtOnce(ctx, urls, want)
	z.burstOutcome = outcome(answers)
	z.log(z.burstOutcome)
	return nil
}

// answer is how one request ended: after how long, and why it failed (""
// when it answered 200 with the body wanted).
type answer struct {
	after   time.Duration
	failure string
}

// callAtOnce sends one GET to each of urls at the same moment, each on a
// connection of its own with a deadline of zeroCallTimeout, and returns
// when they were sent and how each ended.
func callAtOnce(ctx context.Context, urls []string, want string) (time.Time, []answer) {
	n := len(urls)
	hc := &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true,
		MaxConnsPerHost: n, MaxIdleConns: n, MaxIdleConnsPerHost: n}}
	answers := make([]answer, n)
	fire := make(chan struct{})
	var start time.Time
	var wg sync.WaitGroup
	for i, u := range urls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-fire
			cctx, cancel := context.WithTimeout(ctx, zeroCallTimeout)
			defer cancel()
			body, err := get(cctx, hc, u)
			answers[i].after = time.Since(start)
			switch {
			case err != nil:
				answers[i].failure = fmt.Sprintf("%v %.80q", err, body)
			case body != want:
				answers[i].failure = fmt.Sprintf("answered %.80q", body)
			}
		}()
	}
	start = time.Now()
	close(fire)
	wg.Wait()
	return start, answers
}

// outcome: how many requests were answered, p50 and p95 of their answers,
// the last answer, and the failures by kind.
func outcome(answers []answer) string {
	var ok []time.Duration
	var last time.Duration
	failed := map[string]int{}
	for _, a := range answers {
		last = max(last, a.after)
		if a.failure == "" {
			ok = append(ok, a.after)
		} else {
			failed[a.failure]++
		}
	}
	s := summarize(ok)
	out := fmt.Sprintf("%d of %d answered 200; p50 %.2f s, p95 %.2f s, the last answer after %.2f s",
		len(ok), len(answers), s.p50.Seconds(), s.p95.Seconds(), s.max.Seconds())
	if len(failed) == 0 {
		return out
	}
	kinds := make([]string, 0, len(failed))
	for f := range failed {
		kinds = append(kinds, f)
	}
	sort.Slice(kinds, func(i, j int) bool { return failed[kinds[i]] > failed[kinds[j]] })
	for i, f := range kinds[:min(len(kinds), 5)] {
		kinds[i] = fmt.Sprintf("%d× %s", failed[f], f)
	}
	return fmt.Sprintf("%s; the last request ended after %.2f s; failed: %s", out, last.Seconds(), strings.Join(kinds[:min(len(kinds), 5)], "; "))
}

// wakeWatch follows, from a watch of the namespace's Function Pods opened
// before a wake, each named Function's first Pod: when it was created,
// scheduled, given its IP and Ready and, with probe, when its runtime
// answered the bench's GET /healthz.
type wakeWatch struct {
	mu   sync.Mutex
	fns  map[string]*wakeRecord
	stop func()
	done chan struct{}
	// probes run until they end; end waits for them.
	probes sync.WaitGroup
}

type wakeRecord struct {
	pod     string
	at      moments
	probing bool
}

func (z *zeroBench) watchWakes(ctx context.Context, names []string, probe bool) (*wakeWatch, error) {
	ctx, cancel := context.WithCancel(ctx)
	w, err := z.wc.Watch(ctx, &corev1.PodList{}, client.InNamespace(z.ns), client.MatchingLabels{v1alpha2.LabelResource: v1alpha2.ResourceDeployment})
	if err != nil {
		cancel()
		return nil, err
	}
	ww := &wakeWatch{fns: map[string]*wakeRecord{}, stop: func() { cancel(); w.Stop() }, done: make(chan struct{})}
	for _, n := range names {
		ww.fns[n] = &wakeRecord{}
	}
	go func() {
		defer close(ww.done)
		for ev := range w.ResultChan() {
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok || ev.Type == watch.Deleted || pod.DeletionTimestamp != nil {
				continue
			}
			r := ww.record(pod, time.Now(), probe)
			if r == nil {
				continue
			}
			ww.probes.Add(1)
			go func() {
				defer ww.probes.Done()
				at, err := untilListening(ctx, "http://"+net.JoinHostPort(pod.Status.PodIP, functionPort)+"/healthz")
				if err != nil && ctx.Err() == nil {
					z.log(fmt.Sprintf("Pod %s: %v", pod.Name, err))
				}
				ww.mu.Lock()
				defer ww.mu.Unlock()
				r.at[atListening], r.probing = at, false
			}()
		}
	}()
	return ww, nil
}

// record notes the moments pod reached; it returns the Pod's record when
// the Pod's IP is new and its runtime is to be probed.
func (ww *wakeWatch) record(pod *corev1.Pod, now time.Time, probe bool) (toProbe *wakeRecord) {
	ww.mu.Lock()
	defer ww.mu.Unlock()
	r := ww.fns[pod.Labels[v1alpha2.LabelFunctionName]]
	if r == nil || (r.pod != "" && r.pod != pod.Name) {
		return nil
	}
	r.pod = pod.Name
	if probe && pod.Status.PodIP != "" && r.at[atIP].IsZero() {
		r.probing, toProbe = true, r
	}
	for i, reached := range map[int]bool{atCreated: true, atScheduled: pod.Spec.NodeName != "",
		atIP: pod.Status.PodIP != "", atReady: framework.PodReady(pod)} {
		if reached && r.at[i].IsZero() {
			r.at[i] = now
		}
	}
	return toProbe
}

// settle waits, at most zeroSettle, until each Function's Pod is Ready and
// its probe ended.
func (ww *wakeWatch) settle(ctx context.Context) error {
	return framework.Poll(ctx, zeroSettle, "the woken Pods to be Ready", func(context.Context) (bool, string, error) {
		ww.mu.Lock()
		defer ww.mu.Unlock()
		var waiting []string
		for name, r := range ww.fns {
			if r.at[atReady].IsZero() || r.probing {
				waiting = append(waiting, fmt.Sprintf("%s: %s", name, r.at))
			}
		}
		sort.Strings(waiting)
		return len(waiting) == 0, "seen: " + strings.Join(waiting, "; "), nil
	})
}

// end stops the watch and the probes and returns each Function's moments;
// ending again returns them again.
func (ww *wakeWatch) end() map[string]moments {
	ww.stop()
	<-ww.done
	ww.probes.Wait()
	out := map[string]moments{}
	for name, r := range ww.fns {
		out[name] = r.at
	}
	return out
}

// untilListening polls GET url (a runtime's /healthz) every listenEvery,
// each try listenTry at most, until it answers 200: when the runtime
// listens. It gives up after listenFor or listenTries tries.
func untilListening(ctx context.Context, url string) (time.Time, error) {
	hc := &http.Client{Timeout: listenTry, Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	deadline := time.Now().Add(listenFor)
	var err error
	tries := 0
	for ; tries < listenTries && time.Now().Before(deadline); tries++ {
		if _, err = get(ctx, hc, url); err == nil {
			return time.Now(), nil
		}
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-time.After(listenEvery):
		}
	}
	return time.Time{}, fmt.Errorf("%s: no HTTP 200 after %d tries in %s; the last: %v", url, tries, listenFor, err)
}

// steadyCalls is how many sequential calls each steady-state figure takes.
const steadyCalls = 300

// measureSteady times sequential calls through the Services of the awake
// scale-to-zero Function and of a twin without minReplicas 0, alternating.
func (z *zeroBench) measureSteady(ctx context.Context, name, url, want string) error {
	twin := z.podsFunction(name+"-twin", name+"-pkg", "awake")
	if want != expect("awake") {
		twin = z.podsFunction(name+"-twin", name+"-pkg", "awake", podsDep)
	}
	if _, err := z.createAndAnswer(ctx, twin, want); err != nil {
		return err
	}
	defer func() { _ = z.deleteFunction(context.Background(), twin.Name) }()
	z.log(fmt.Sprintf("steady state: %d calls each to %s and %s", steadyCalls, name, twin.Name))
	twinURL, err := z.serviceURL(ctx, twin.Name)
	if err != nil {
		return err
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil}}
	for range steadyCalls {
		for i, u := range []string{url, twinURL} {
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

// summary of durations, nearest-rank percentiles.
type summary struct {
	n                       int
	p50, p95, p99, min, max time.Duration
}

func summarize(ds []time.Duration) summary {
	if len(ds) == 0 {
		return summary{}
	}
	s := slices.Sorted(slices.Values(ds))
	return summary{n: len(s), p50: percentile(s, 0.5), p95: percentile(s, 0.95), p99: percentile(s, 0.99), min: s[0], max: s[len(s)-1]}
}

// percentile of sorted durations (nearest rank).
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p*float64(len(sorted))+0.999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// quantiles is "p50 a s, p95 b s, p99 c s (min–max)".
func quantiles(ds []time.Duration, unit time.Duration, suffix string) string {
	s := summarize(ds)
	if s.n == 0 {
		return "-"
	}
	f := func(d time.Duration) float64 { return float64(d) / float64(unit) }
	return fmt.Sprintf("p50 %.2f %s, p95 %.2f %s, p99 %.2f %s (%.2f–%.2f)", f(s.p50), suffix, f(s.p95), suffix, f(s.p99), suffix, f(s.min), f(s.max))
}

// phaseCell is "p50 / p95 (min–max)" in seconds.
func phaseCell(ds []time.Duration) string {
	s := summarize(ds)
	if s.n == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f / %.2f (%.2f–%.2f)", s.p50.Seconds(), s.p95.Seconds(), s.min.Seconds(), s.max.Seconds())
}

func (z *zeroBench) print(fnPreset string) {
	setups := zeroSetups()
	fmt.Printf("\nScale to zero on the real node: Functions %s, dependencies from a local npm registry; %d wake-ups per setup\n\n", fnPreset, z.wakeups)
	fmt.Println("| setup | from zero to the first answer |")
	fmt.Println("|---|---|")
	for _, s := range setups {
		fmt.Printf("| %s | %s |\n", s.name, quantiles(z.total[s.name], time.Second, "s"))
	}

	fmt.Printf("\nWhere a wake-up's time goes: p50 / p95 (min–max) of each phase, in s. The runtime listens when it answers the bench's GET /healthz on the Pod's IP, polled every %s from when the Pod watch sees the IP (not for the %s: each one's start shows in its first answer). A moment not seen merges its phase into the next.\n\n",
		listenEvery, z.fleetColumn())
	columns := []string{}
	for _, s := range setups {
		columns = append(columns, s.name)
	}
	columns = append(columns, z.fleetColumn())
	fmt.Printf("| phase | %s |\n|---|%s\n", strings.Join(columns, " | "), strings.Repeat("---|", len(columns)))
	for _, ph := range append(slices.Clone(zeroPhases), zeroReadyRow) {
		cells := make([]string, len(columns))
		for i, c := range columns {
			cells[i] = phaseCell(z.phases[c][ph])
		}
		fmt.Printf("| %s | %s |\n", ph, strings.Join(cells, " | "))
	}

	fmt.Printf("\n%d Functions at zero (%s, preset %s) called at the same moment: %s\n", z.fleet, setups[0].name, zeroFleetPreset, z.fleetOutcome)
	z.printCPU()
	fmt.Printf("\n%d requests at once to one Function at zero (%s): %s\n", z.burst, setups[0].name, z.burstOutcome)
	fmt.Printf("\nSteady state, %d sequential calls through the Service (new connection each):\n", steadyCalls)
	fmt.Printf("- minReplicas 0, awake: %s\n", quantiles(z.steady[0], time.Millisecond, "ms"))
	fmt.Printf("- minReplicas 1:        %s\n", quantiles(z.steady[1], time.Millisecond, "ms"))
}

// printCPU prints the CPU-seconds of the Functions woken at once, by
// process: over the wake-up, over as long idle, and per woken Pod.
func (z *zeroBench) printCPU() {
	wake, idle, pods := z.cpu.wake, z.cpu.idle, z.cpu.pods
	if wake.wall <= 0 || idle.wall <= 0 || pods == 0 {
		fmt.Println("\nCPU of the wake-up: not measured")
		return
	}
	fmt.Printf("\nCPU-seconds of the machine while they woke: from the calls to %s after the last Pod was Ready (%.1f s); idle: the same processes over %s just before, every Function at zero, scaled to %.1f s; per woken Pod: (wake-up − idle) ÷ %d. A process counts with the children it reaped.\n\n",
		zeroAfterglow, wake.wall.Seconds(), zeroIdle, wake.wall.Seconds(), pods)
	rows := slices.Clone(cpuRows)
	var others []string
	for name := range wake.processes {
		if !slices.ContainsFunc(rows, func(r cpuRow) bool { return r.name == name }) && name != cpuBench {
			others = append(others, name)
		}
	}
	slices.Sort(others)
	for _, name := range others {
		rows = append(rows, cpuRow{name, name})
	}
	rows = append(rows, cpuRow{cpuBench, "the bench"}, cpuRow{cpuRest, "the rest of the machine"}, cpuRow{cpuAll, "all (the machine's busy time)"})
	scale := wake.wall.Seconds() / idle.wall.Seconds()
	during, before := wake.byRow(), idle.byRow()
	fmt.Println("| process | wake-up | idle | per woken Pod |")
	fmt.Println("|---|---|---|---|")
	for _, r := range rows {
		d, ok := during[r.name]
		if !ok {
			continue // not on this cluster
		}
		baseline := before[r.name].Seconds() * scale
		fmt.Printf("| %s | %.2f | %.2f | %.3f |\n", r.label, d.Seconds(), baseline, (d.Seconds()-baseline)/float64(pods))
	}
}

// Rows of the CPU table that are no process.
const (
	cpuRest = "rest"
	cpuAll  = "all"
)

// byRow is each process's time, what no process listed used (cpuRest) and
// the machine's busy time (cpuAll).
func (s cpuSpent) byRow() map[string]time.Duration {
	out := map[string]time.Duration{cpuRest: s.busy, cpuAll: s.busy}
	for name, d := range s.processes {
		out[name] = d
		out[cpuRest] -= d
	}
	return out
}
