package main

// The Function scenario (-functions): 300 inline Functions, an equal share
// of each runtime (75 of each of 4), over 10 namespaces, created at once
// while the Function controller runs as the chart's Deployment: its real
// Pod on the real node (the module namespace is placed there), under the
// Deployment's CPU and memory limits, 5 simultaneous builds (the CR's
// default functionBuildMaxSimultaneousJobs). The Functions' namespaces are
// on the simulated nodes, so their build Jobs' Pods succeed at once
// without building and their Pods are Running at once: the controller
// alone is measured. It prints the time until all are Running, the
// controller's requests per Function from the audit log (with a breakdown
// by verb and resource), its requests while idle and after a restart (its
// Pod deleted: the ReplicaSet starts a new one), its memory (its
// container's process on this machine, /proc) and CPU (its cgroup), next to
// the figures of the published 1.8.4 controller and the targets of issue 12.
//
// It runs three times, each with a controller process of its own: with a
// distinct source per Function, so no build can be shared, with identical
// sources per runtime, and in buildless mode (the CR's functionMode, which
// rolls the controller's Deployment; no builds) with distinct sources, printed
// beside the first run and the reference figures of release 1.13's own
// controller. Our image tag is 1.8.4's formula
// (docs/contributor/upstream-contract.md#image-tag), which starts with the
// Function's UID, so that Functions 1.8.4 built are adopted without a rebuild;
// the consequence is that identical sources still build once per Function, and
// the second run shows that honestly instead of a saving.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
	"github.com/kyma-project/serverless-manager/tests/framework"
)

const (
	fnNamespaces = 10
	// fnTotal is the scenario's size whatever the number of runtimes: 3
	// simulated nodes hold 330 Pods (110 each), build Pods included.
	fnTotal       = 300
	fnRuntimePods = "S" // 300 Pods of the default L (400m) need 120 cores; 3 simulated nodes have 96
)

// fnVariant is one run of the scenario.
type fnVariant struct {
	name      string
	identical bool   // every Function of a runtime has the same source and dependencies
	mode      string // the CR's functionMode
}

// fnVariantNamed is the variant of a -function-sources name.
func fnVariantNamed(name string) (fnVariant, bool) {
	switch name {
	case "distinct", "identical":
		return fnVariant{name: name, identical: name == "identical", mode: v1alpha1.FunctionModeBuild}, true
	case "buildless":
		return fnVariant{name: name, mode: v1alpha1.FunctionModeBuildless}, true
	}
	return fnVariant{}, false
}

// fnFigures of one variant.
type fnFigures struct {
	variant             fnVariant
	functions           int
	toRunning           time.Duration
	run, idle, restart  auditTally
	mem                 memoryFigures
	buildsStarted       float64
	restartReconciles   int
	jobs                jobFigures
	afterLastBuild      time.Duration // last build Job Complete → all Running
	deployments         deploymentFigures
	idleFor, settleTime time.Duration
	// limits are the controller container's (its Deployment's), cpu what
	// its cgroup used and was throttled from the creates to all Running.
	limits string
	cpu    cpuUsage
	cpuErr error
	// machine is where this machine's CPU went meanwhile.
	machine cpuSpent
}

type fnBench struct {
	*bench
	fcs client.Client // knows Functions; high QPS, so 300 creates go out at once
	wc  client.WithWatch
	log func(string)
	// measured is the controller Pod the last variant measured: the next
	// one starts a new process.
	measured *corev1.Pod
}

func runFunctions(variants []fnVariant, idle time.Duration) error {
	ctx := context.Background()
	b, release, err := startFnBench(ctx)
	if err != nil {
		return err
	}
	defer release()
	b.log("installing the module (Function Pods preset " + fnRuntimePods + ", 5 simultaneous builds)")
	cr := &v1alpha1.Serverless{ObjectMeta: metav1.ObjectMeta{Namespace: framework.ManagerNamespace, Name: "default"},
		Spec: v1alpha1.ServerlessSpec{
			DockerRegistry:          &v1alpha1.DockerRegistry{EnableInternal: ptr.To(true)},
			DefaultRuntimePodPreset: fnRuntimePods,
		}}
	if err := b.c.Create(ctx, cr); err != nil {
		return fmt.Errorf("creating the Serverless CR (is one left from an earlier run?): %w", err)
	}
	defer b.uninstall(cr)
	if err := b.waitReady(ctx, 1, 3*time.Minute); err != nil {
		return err
	}

	byName := map[string]fnFigures{}
	for _, v := range variants {
		if err := b.useMode(ctx, cr, v.mode); err != nil {
			return err
		}
		f, err := b.variant(ctx, v, idle)
		if err != nil {
			return fmt.Errorf("%s sources: %w", v.name, err)
		}
		byName[v.name] = f
	}
	distinct, okD := byName["distinct"]
	if identical, ok := byName["identical"]; ok && okD {
		printSharing(distinct, identical)
	}
	if buildless, ok := byName["buildless"]; ok && okD {
		printModes(distinct, buildless)
	}
	return nil
}

// useMode switches the module to mode (no Function exists meanwhile) and
// waits until the manager installed it.
func (b *fnBench) useMode(ctx context.Context, cr *v1alpha1.Serverless, mode string) error {
	if err := b.c.Get(ctx, client.ObjectKeyFromObject(cr), cr); err != nil {
		return err
	}
	if cr.Status.FunctionMode == mode {
		return nil
	}
	b.log("switching the module to " + mode + " mode (rolls the controller's Deployment)")
	cr.Spec.FunctionMode = mode
	if err := b.c.Update(ctx, cr); err != nil {
		return fmt.Errorf("switching to %s mode: %w", mode, err)
	}
	return framework.Poll(ctx, 3*time.Minute, "the CR to be Ready in "+mode+" mode", func(ctx context.Context) (bool, string, error) {
		if err := b.c.Get(ctx, client.ObjectKeyFromObject(cr), cr); err != nil {
			return false, "", err
		}
		return cr.Status.State == v1alpha1.StateReady && cr.Status.ObservedGeneration == cr.Generation && cr.Status.FunctionMode == mode,
			fmt.Sprintf("state %s, mode %q", cr.Status.State, cr.Status.FunctionMode), nil
	}, func() string { return b.mgr.Tail(40) })
}

// startFnBench brings the local cluster up with the manager's
// prerequisites, the module's Pods on the real node, a warm scheduler and
// the manager running (here, with the local images); release stops the
// manager and hands the cluster back.
func startFnBench(ctx context.Context, managerArgs ...string) (b *fnBench, release func(), err error) {
	base, releaseBase, err := prepare(ctx, framework.RealNode)
	if err != nil {
		return nil, nil, err
	}
	defer func() {
		if err != nil {
			releaseBase()
		}
	}()
	cfg := base.cluster.RESTConfig()
	cfg.QPS, cfg.Burst = 1000, 1000
	fcs, err := client.New(cfg, client.Options{Scheme: base.c.Scheme()})
	if err != nil {
		return nil, nil, err
	}
	wc, err := client.NewWithWatch(base.cluster.RESTConfig(), client.Options{Scheme: base.c.Scheme()})
	if err != nil {
		return nil, nil, err
	}
	base.managerArgs = managerArgs
	b = &fnBench{bench: base, fcs: fcs, wc: wc, log: step}
	b.log("starting the manager (here, as its ServiceAccount)")
	if err := b.startManager(ctx); err != nil {
		return nil, nil, err
	}
	return b, func() { _ = b.mgr.Stop(); releaseBase() }, nil
}

// uninstall deletes the CR (the Functions are gone by then) and waits for it.
func (b *fnBench) uninstall(cr *v1alpha1.Serverless) {
	ctx := context.Background()
	b.log("deleting the Serverless CR")
	if err := b.c.Delete(ctx, cr); err != nil && !apierrors.IsNotFound(err) {
		b.log(fmt.Sprintf("deleting the Serverless CR: %v", err))
		return
	}
	if err := framework.Poll(ctx, 3*time.Minute, "the CR to be gone", func(ctx context.Context) (bool, string, error) {
		err := b.c.Get(ctx, client.ObjectKeyFromObject(cr), &v1alpha1.Serverless{})
		return apierrors.IsNotFound(err), "", client.IgnoreNotFound(err)
	}); err != nil {
		b.log(err.Error())
	}
}

// freshController is the controller's Pod in mode, a new process if the
// last variant measured the one running.
func (b *fnBench) freshController(ctx context.Context, mode string) (*corev1.Pod, error) {
	pod, err := b.controllerPod(ctx, "in "+mode+" mode", func(p *corev1.Pod) (bool, string) {
		for _, c := range p.Spec.Containers {
			for _, e := range c.Env {
				if e.Name == "APP_FUNCTION_MODE" {
					return e.Value == mode, "APP_FUNCTION_MODE=" + e.Value
				}
			}
		}
		return mode == v1alpha1.FunctionModeBuild, "no APP_FUNCTION_MODE"
	})
	if err != nil {
		return nil, err
	}
	if b.measured != nil && pod.UID == b.measured.UID {
		b.log("restarting the controller (its Pod deleted) for a fresh process")
		if pod, err = b.restartController(ctx, pod); err != nil {
			return nil, err
		}
	}
	b.measured = pod
	return pod, nil
}

// simulatedNamespaces creates the namespaces with their Pods on the
// simulated nodes.
func (b *fnBench) simulatedNamespaces(ctx context.Context, names []string) error {
	for _, ns := range names {
		if err := b.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
			Annotations: map[string]string{framework.NodeSelectorAnnotation: framework.SimulatedNodes}}}); err != nil {
			return fmt.Errorf("namespace %s (left from an earlier run?): %w", ns, err)
		}
	}
	return nil
}

func (b *fnBench) variant(ctx context.Context, v fnVariant, idle time.Duration) (fnFigures, error) {
	f := fnFigures{variant: v, idleFor: idle}
	user := framework.AuditUser(module.FunctionController())

	b.log(fmt.Sprintf("[%s] the Function controller: its Deployment's Pod on the real node", v.name))
	pod, err := b.freshController(ctx, v.mode)
	if err != nil {
		return f, err
	}
	f.limits = limits(pod, controllerContainer)
	metricsURL, err := controllerMetrics(pod)
	if err != nil {
		return f, err
	}
	pid, err := controllerProcess(pod)
	if err != nil {
		return f, err
	}
	b.log(fmt.Sprintf("[%s] controller Pod %s, process %d on this machine, limits %s", v.name, pod.Name, pid, f.limits))

	namespaces := make([]string, fnNamespaces)
	for i := range namespaces {
		namespaces[i] = fmt.Sprintf("bench-fn-%s-%02d", v.name, i)
	}
	if err := b.simulatedNamespaces(ctx, namespaces); err != nil {
		return f, err
	}
	defer b.deleteNamespaces(namespaces)
	fns := benchFunctions(namespaces, v.identical)
	f.functions = len(fns)

	jobs, err := watchJobs(ctx, b.wc)
	if err != nil {
		return f, err
	}
	deployments, err := watchDeployments(ctx, b.wc)
	if err != nil {
		return f, err
	}
	running, err := watchFunctions(ctx, b.wc, v.mode)
	if err != nil {
		return f, err
	}
	b.log(fmt.Sprintf("[%s] creating %d Functions at once", v.name, len(fns)))
	mark, err := b.cluster.MarkAudit()
	if err != nil {
		return f, err
	}
	// The API server's first Function create can stall (2 s in some runs on
	// a fresh cluster, the CPU idle); a Function per namespace, dry-run (not
	// stored, not seen by the controller), takes that out of the figure.
	for _, ns := range namespaces {
		warm := fns[0].DeepCopy()
		warm.Namespace, warm.Name = ns, "bench-warm-up"
		if err := b.fcs.Create(ctx, warm, client.DryRunAll); err != nil {
			return f, fmt.Errorf("dry-run create of a Function in %s: %w", ns, err)
		}
	}
	cpuBefore, cpuErr := cgroupCPU(pid)
	machine := b.snapshotCPU(map[string][]int{cpuController: {pid}})
	start := time.Now()
	if err := b.createAll(ctx, fns); err != nil {
		return f, err
	}
	if err := b.waitAllRunning(ctx, running, len(fns), pod); err != nil {
		return f, err
	}
	f.machine = b.snapshotCPU(map[string][]int{cpuController: {pid}}).since(machine)
	_, runningAt := running.end()
	f.toRunning = last(runningAt, start)
	if cpuErr == nil {
		var cpuAfter cpuUsage
		if cpuAfter, cpuErr = cgroupCPU(pid); cpuErr == nil {
			f.cpu = cpuAfter.sub(cpuBefore)
		}
	}
	f.cpuErr = cpuErr
	f.deployments = deploymentFiguresOf(deployments, start)
	f.jobs = jobFiguresOf(jobs)
	f.afterLastBuild = start.Add(f.toRunning).Sub(f.jobs.lastComplete)
	b.log(fmt.Sprintf("[%s] all Running after %.1fs; waiting for the controller to go quiet", v.name, f.toRunning.Seconds()))
	quiet := time.Now()
	if f.run, err = b.settle(mark, user); err != nil {
		return f, err
	}
	f.settleTime = time.Since(quiet)
	if f.mem, err = memory(pid, metricsURL); err != nil {
		return f, err
	}
	if samples, err := framework.FetchMetrics(ctx, metricsURL); err == nil {
		f.buildsStarted, _ = framework.SumSamples(samples, "serverless_function_builds_started_total", "")
	}

	b.log(fmt.Sprintf("[%s] idle for %s", v.name, idle))
	mark, _ = b.cluster.MarkAudit()
	time.Sleep(idle)
	if f.idle, err = b.tally(mark, user); err != nil {
		return f, err
	}

	b.log(fmt.Sprintf("[%s] restarting the controller with nothing changed (its Pod deleted; the ReplicaSet starts another)", v.name))
	mark, _ = b.cluster.MarkAudit()
	restarted, err := b.restartController(ctx, pod)
	if err != nil {
		return f, err
	}
	b.measured = restarted
	if metricsURL, err = controllerMetrics(restarted); err != nil {
		return f, err
	}
	if err := framework.Poll(ctx, 2*time.Minute, "the restarted controller to reconcile every Function", func(ctx context.Context) (bool, string, error) {
		body, err := framework.FetchMetrics(ctx, metricsURL)
		if err != nil {
			return false, "", nil
		}
		n, _ := framework.SumSamples(body, "controller_runtime_reconcile_total", `controller="function"`)
		f.restartReconciles = int(n)
		return int(n) >= len(fns), fmt.Sprintf("%d reconciles", int(n)), nil
	}, b.controllerLog(restarted)); err != nil {
		return f, err
	}
	if f.restart, err = b.settle(mark, user); err != nil {
		return f, err
	}
	f.print() // before the namespaces' deletion, which takes a while
	return f, nil
}

// benchFunctions: fnTotal Functions, an equal share of each runtime, spread
// over the namespaces; with identical, every Function of a runtime has the same
// source and dependencies, else each its own.
func benchFunctions(namespaces []string, identical bool) []*v1alpha2.Function {
	var fns []*v1alpha2.Function
	perRuntime := fnTotal / len(v1alpha2.Runtimes())
	for _, rt := range v1alpha2.Runtimes() {
		for i := range perRuntime {
			greeting, pkg := fmt.Sprintf("hello from %s number %d", rt, i), fmt.Sprintf("bench-%d", i)
			if identical {
				greeting, pkg = "hello from "+string(rt), "bench"
			}
			fn := &v1alpha2.Function{
				ObjectMeta: metav1.ObjectMeta{Namespace: namespaces[len(fns)%len(namespaces)], Name: fmt.Sprintf("%s-%03d", rt, i)},
				Spec:       v1alpha2.FunctionSpec{Runtime: rt, Source: v1alpha2.Source{Inline: &v1alpha2.InlineSource{}}},
			}
			if strings.HasPrefix(string(rt), "python") {
				fn.Spec.Source.Inline.Source = fmt.Sprintf("def main(event, context):\n    return %q\n", greeting)
			} else {
				fn.Spec.Source.Inline.Source = fmt.Sprintf("module.exports = { main: function (event, context) { return %q; } };\n", greeting)
				fn.Spec.Source.Inline.Dependencies = fmt.Sprintf(`{ "name": %q, "version": "1.0.0", "dependencies": {} }`, pkg)
			}
			fns = append(fns, fn)
		}
	}
	return fns
}

// createAll creates the Functions concurrently, as `kubectl apply` of one
// big file would deliver them within a second or two.
func (b *fnBench) createAll(ctx context.Context, fns []*v1alpha2.Function) error {
	var wg sync.WaitGroup
	errs := make([]error, len(fns))
	next := make(chan int)
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				errs[i] = b.fcs.Create(ctx, fns[i])
			}
		}()
	}
	for i := range fns {
		next <- i
	}
	close(next)
	wg.Wait()
	return errors.Join(errs...)
}

// isRunning: the three conditions True for the current generation.
func isRunning(fn *v1alpha2.Function) bool { return isRunningIn(fn, v1alpha1.FunctionModeBuild) }

// conditionsOf are the conditions a Running Function has in mode.
func conditionsOf(mode string) []string {
	if mode == v1alpha1.FunctionModeBuildless {
		return []string{v1alpha2.ConditionConfigurationReady, v1alpha2.ConditionRunning}
	}
	return []string{v1alpha2.ConditionConfigurationReady, v1alpha2.ConditionBuildReady, v1alpha2.ConditionRunning}
}

// isRunningIn: the conditions of mode True for the current generation.
func isRunningIn(fn *v1alpha2.Function, mode string) bool {
	for _, typ := range conditionsOf(mode) {
		if c := fn.Status.Condition(typ); c == nil || c.Status != corev1.ConditionTrue {
			return false
		}
	}
	return fn.Status.ObservedGeneration == fn.Generation
}

// watchFunctions times each Function's creation and its first Running in
// mode.
func watchFunctions(ctx context.Context, wc client.WithWatch, mode string) (*timeline, error) {
	return watchTimeline(ctx, wc, &v1alpha2.FunctionList{}, func(obj client.Object) (bool, string) {
		fn := obj.(*v1alpha2.Function)
		if isRunningIn(fn, mode) {
			return true, ""
		}
		return false, waitingOnIn(fn, mode)
	})
}

// waitAllRunning waits until fns says want Functions are Running; a check
// reads only what the watch recorded (and every 5 s whether the
// controller's Pod still runs the same container).
func (b *fnBench) waitAllRunning(ctx context.Context, fns *timeline, want int, pod *corev1.Pod) error {
	lastCheck, lastLog := time.Now(), time.Now()
	return framework.Poll(ctx, 15*time.Minute, fmt.Sprintf("%d Functions to be Running", want), func(ctx context.Context) (bool, string, error) {
		running, others := fns.progress()
		summary := fmt.Sprintf("%d of %d Running; others: %v", running, want, others)
		if time.Since(lastCheck) >= 5*time.Second {
			if err := b.controllerAlive(ctx, pod); err != nil {
				return false, "", framework.StopWaiting(err)
			}
			lastCheck = time.Now()
		}
		if time.Since(lastLog) >= 10*time.Second {
			b.log(summary)
			lastLog = time.Now()
		}
		return running == want, summary, nil
	}, b.controllerLog(pod))
}

// waitingOn names the first condition of a Function that is not True.
func waitingOn(fn *v1alpha2.Function) string { return waitingOnIn(fn, v1alpha1.FunctionModeBuild) }

func waitingOnIn(fn *v1alpha2.Function, mode string) string {
	for _, typ := range conditionsOf(mode) {
		c := fn.Status.Condition(typ)
		if c == nil {
			return typ + " missing"
		}
		if c.Status != corev1.ConditionTrue {
			return typ + "=" + string(c.Status) + " " + c.Reason
		}
	}
	return "older generation"
}

// settle waits until the user sent nothing for 3 s (at most 30 s) and
// returns its requests since mark.
func (b *fnBench) settle(mark framework.AuditMark, user string) (auditTally, error) {
	var t auditTally
	var err error
	prev, still := -1, 0
	for i := 0; i < 30 && still < 3; i++ {
		time.Sleep(time.Second)
		if t, err = b.tally(mark, user); err != nil {
			return t, err
		}
		if n := t.total(); n == prev {
			still++
		} else {
			prev, still = n, 0
		}
	}
	return t, nil
}

func (b *fnBench) deleteNamespaces(namespaces []string) {
	ctx := context.Background()
	b.log(fmt.Sprintf("deleting the %d namespaces", len(namespaces)))
	for _, ns := range namespaces {
		_ = b.c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
	// The next variant needs the nodes' Pod slots back.
	if err := framework.Poll(ctx, 10*time.Minute, "the namespaces to be gone", func(ctx context.Context) (bool, string, error) {
		left := 0
		for _, ns := range namespaces {
			err := b.c.Get(ctx, types.NamespacedName{Name: ns}, &corev1.Namespace{})
			if err == nil {
				left++
			} else if !apierrors.IsNotFound(err) {
				return false, "", err
			}
		}
		return left == 0, fmt.Sprintf("%d left", left), nil
	}); err != nil {
		b.log(err.Error())
	}
}

// auditTally counts one user's requests by "verb resource[/subresource]"
// (each request once, whatever stages it logged) and the failed ones by
// response code.
type auditTally struct {
	byKind map[string]int
	failed map[int]int
}

func (t auditTally) total() int {
	n := 0
	for _, c := range t.byKind {
		n += c
	}
	return n
}

func isRead(verb string) bool { return verb == "get" || verb == "list" || verb == "watch" }

func (t auditTally) reads() int  { return t.count(func(verb, _ string) bool { return isRead(verb) }) }
func (t auditTally) writes() int { return t.count(func(verb, _ string) bool { return !isRead(verb) }) }

func (t auditTally) count(match func(verb, resource string) bool) int {
	n := 0
	for k, c := range t.byKind {
		verb, resource, _ := strings.Cut(k, " ")
		if match(verb, resource) {
			n += c
		}
	}
	return n
}

// statusWrites are writes of functions/status; events are creates of events.
func (t auditTally) statusWrites() int {
	return t.count(func(verb, r string) bool { return !isRead(verb) && r == "functions/status" })
}
func (t auditTally) events() int {
	return t.count(func(verb, r string) bool { return !isRead(verb) && r == "events" })
}

// breakdown lists the kinds, most frequent first; per divides the counts
// (per Function) when > 0.
func (t auditTally) breakdown(reads bool, per int) string {
	type kv struct {
		k string
		n int
	}
	var kvs []kv
	for k, n := range t.byKind {
		verb, _, _ := strings.Cut(k, " ")
		if isRead(verb) == reads {
			kvs = append(kvs, kv{k, n})
		}
	}
	sort.Slice(kvs, func(i, j int) bool { return kvs[i].n > kvs[j].n || kvs[i].n == kvs[j].n && kvs[i].k < kvs[j].k })
	parts := make([]string, 0, len(kvs))
	for _, e := range kvs {
		if per > 0 {
			parts = append(parts, fmt.Sprintf("%s=%d (%.2f)", e.k, e.n, float64(e.n)/float64(per)))
		} else {
			parts = append(parts, fmt.Sprintf("%s=%d", e.k, e.n))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func (t auditTally) failures() string {
	if len(t.failed) == 0 {
		return "none"
	}
	codes := make([]int, 0, len(t.failed))
	for c := range t.failed {
		codes = append(codes, c)
	}
	sort.Ints(codes)
	parts := make([]string, 0, len(codes))
	for _, c := range codes {
		parts = append(parts, fmt.Sprintf("%d×%d", t.failed[c], c))
	}
	return strings.Join(parts, " ")
}

// auditLine is what the breakdown reads of an audit event (framework's
// AuditEvent has no subresource, API group or response code).
type auditLine struct {
	AuditID string `json:"auditID"`
	Verb    string `json:"verb"`
	User    struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	ResponseStatus struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
}

// tally reads the audit log after mark for user's requests.
func (b *fnBench) tally(mark framework.AuditMark, user string) (auditTally, error) {
	t := auditTally{byKind: map[string]int{}, failed: map[int]int{}}
	f, err := os.Open(b.cluster.AuditLogPath())
	if err != nil {
		return t, err
	}
	defer func() { _ = f.Close() }()
	if _, err := f.Seek(int64(mark), io.SeekStart); err != nil {
		return t, err
	}
	seen := map[string]bool{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var e auditLine
		if json.Unmarshal(sc.Bytes(), &e) != nil || e.User.Username != user || seen[e.AuditID] {
			continue
		}
		seen[e.AuditID] = true
		resource := e.ObjectRef.Resource
		if e.ObjectRef.Subresource != "" {
			resource += "/" + e.ObjectRef.Subresource
		}
		t.byKind[e.Verb+" "+resource]++
		if c := e.ResponseStatus.Code; c >= 300 {
			t.failed[c]++
		}
	}
	return t, sc.Err()
}

func (f fnFigures) print() {
	if f.variant.mode == v1alpha1.FunctionModeBuildless {
		f.printBuildless()
		return
	}
	n := f.functions
	per := func(x int) string { return fmt.Sprintf("%.2f", float64(x)/float64(n)) }
	sources := "a distinct source per Function"
	if f.variant.identical {
		sources = "identical sources per runtime"
	}
	fmt.Printf("\nFunction controller benchmark: %d inline Functions (%d per runtime, %s) in %d namespaces, created at once;\n"+
		"their build Jobs and Pods on 3 simulated nodes (builds succeed at once), 5 simultaneous builds, Function Pods preset %s\n", n, fnTotal/len(v1alpha2.Runtimes()), sources, fnNamespaces, fnRuntimePods)
	f.printController()
	row := func(name, value, ref, target string) {
		fmt.Printf("  %-40s %-30s %-22s %s\n", name, value, ref, target)
	}
	row("figure", "value", "1.8.4 (reference)", "target")
	row("created → all Running", fmt.Sprintf("%.1fs", f.toRunning.Seconds()), "191s", "≤ 64s")
	row("builds started (controller metric)", fmt.Sprintf("%.0f", f.buildsStarted), "", "")
	row("writes per Function", fmt.Sprintf("%s (%d)", per(f.run.writes()), f.run.writes()), "16.1 (4,822)", "≤ 8")
	row("  of which Function status writes", fmt.Sprintf("%s (%d)", per(f.run.statusWrites()), f.run.statusWrites()), "6.0 (1,811)", "")
	row("  of which events", fmt.Sprintf("%s (%d)", per(f.run.events()), f.run.events()), "6.0 (1,802)", "")
	row("reads per Function", fmt.Sprintf("%s (%d)", per(f.run.reads()), f.run.reads()), "23.2", "≤ 2")
	row("failed requests (count×code)", f.run.failures(), "", "")
	row(fmt.Sprintf("requests while idle %s", f.idleFor), fmt.Sprintf("%d", f.idle.total()), "0", "0")
	row("writes after a restart, nothing changed", fmt.Sprintf("%d (reads: %d)", f.restart.writes(), f.restart.reads()), "", "0")
	row("controller RSS after all Running (peak)", fmt.Sprintf("%.1f MiB (%.1f MiB)", mib(f.mem.rss), mib(f.mem.hwm)), "87 MiB", "≤ 61 MiB")
	row("  of which anonymous / file-backed", fmt.Sprintf("%.1f MiB / %.1f MiB", mib(f.mem.anon), mib(f.mem.file)), "", "")
	row("  Go heap in use / runtime total", fmt.Sprintf("%.1f MiB / %.1f MiB", mib(f.mem.heapInUse), mib(f.mem.goSys)), "", "")
	fmt.Printf("  builds: %s; last build Complete → all Running %.1fs\n", f.jobs, f.afterLastBuild.Seconds())
	f.printRequests()
}

// printSharing compares the two variants. Identical sources do not share a
// build: the image tag hashes the Function's UID first (1.8.4's formula,
// kept so 1.8.4's images are adopted without a rebuild), so every Function
// has its own image.
func printSharing(unique, identical fnFigures) {
	fmt.Printf("\nIdentical sources vs distinct sources: %.0f vs %.0f builds, %.1fs vs %.1fs to all Running, %d vs %d writes.\n"+
		"No build is shared: the image tag starts with the Function's UID (1.8.4's tag formula,\n"+
		"kept so that images 1.8.4 built are adopted without a rebuild), so identical sources still build once per Function.\n",
		identical.buildsStarted, unique.buildsStarted, identical.toRunning.Seconds(), unique.toRunning.Seconds(),
		identical.run.writes(), unique.run.writes())
}

// printBuildless prints the buildless run beside release 1.13's reference
// (issue 22: its own controller, 300 inline Functions in 10 namespaces on a
// 3-node local cluster of this kind of machine) and the targets.
func (f fnFigures) printBuildless() {
	n := f.functions
	per := func(x int) string { return fmt.Sprintf("%.2f", float64(x)/float64(n)) }
	fmt.Printf("\nBuildless mode: %d inline Functions (%d per runtime, a distinct source per Function) in %d namespaces, created at once;\n"+
		"their Pods on 3 simulated nodes, no builds, Function Pods preset %s\n", n, fnTotal/len(v1alpha2.Runtimes()), fnNamespaces, fnRuntimePods)
	f.printController()
	row := func(name, value, ref, target string) {
		fmt.Printf("  %-40s %-30s %-22s %s\n", name, value, ref, target)
	}
	row("figure", "value", "1.13 (reference)", "target")
	row("created → all Running", fmt.Sprintf("%.1fs", f.toRunning.Seconds()), "23.8s", "≤ 14.3s (0.6×)")
	row("writes per Function", fmt.Sprintf("%s (%d)", per(f.run.writes()), f.run.writes()), "11 (5 status, 4 events)", "≤ 4")
	row("  of which Function status writes", fmt.Sprintf("%s (%d)", per(f.run.statusWrites()), f.run.statusWrites()), "5", "")
	row("  of which events", fmt.Sprintf("%s (%d)", per(f.run.events()), f.run.events()), "4", "")
	row("reads per Function", fmt.Sprintf("%s (%d)", per(f.run.reads()), f.run.reads()), "4.3", "≤ 0.5")
	row("failed requests (count×code)", f.run.failures(), "", "")
	row(fmt.Sprintf("requests while idle %s", f.idleFor), fmt.Sprintf("%d", f.idle.total()), "76 in 30s", "0")
	row("writes after a restart, nothing changed", fmt.Sprintf("%d (reads: %d)", f.restart.writes(), f.restart.reads()), "", "0")
	row("controller RSS after all Running (peak)", fmt.Sprintf("%.1f MiB (%.1f MiB)", mib(f.mem.rss), mib(f.mem.hwm)), "66 MiB", "≤ 52.8 MiB (0.8×)")
	row("  of which anonymous / file-backed", fmt.Sprintf("%.1f MiB / %.1f MiB", mib(f.mem.anon), mib(f.mem.file)), "", "")
	row("  Go heap in use / runtime total", fmt.Sprintf("%.1f MiB / %.1f MiB", mib(f.mem.heapInUse), mib(f.mem.goSys)), "", "")
	d := f.deployments
	fmt.Printf("  timeline after the creates: last of %d Deployments created %.1fs, last available %.1fs, all Running %.1fs\n",
		d.count, d.lastCreated.Seconds(), d.lastAvailable.Seconds(), f.toRunning.Seconds())
	f.printRequests()
}

// printModes puts the two modes' figures side by side.
func printModes(build, buildless fnFigures) {
	per := func(f fnFigures, x int) string { return fmt.Sprintf("%.2f", float64(x)/float64(f.functions)) }
	fmt.Printf("\nBuild mode vs buildless mode (distinct sources, same cluster):\n")
	row := func(name, a, b string) { fmt.Printf("  %-40s %-22s %s\n", name, a, b) }
	row("figure", "build", "buildless")
	row("created → all Running", fmt.Sprintf("%.1fs", build.toRunning.Seconds()), fmt.Sprintf("%.1fs", buildless.toRunning.Seconds()))
	row("writes per Function", per(build, build.run.writes()), per(buildless, buildless.run.writes()))
	row("reads per Function", per(build, build.run.reads()), per(buildless, buildless.run.reads()))
	row("requests while idle", fmt.Sprintf("%d", build.idle.total()), fmt.Sprintf("%d", buildless.idle.total()))
	row("writes after a restart", fmt.Sprintf("%d", build.restart.writes()), fmt.Sprintf("%d", buildless.restart.writes()))
	row("controller RSS after all Running", fmt.Sprintf("%.1f MiB", mib(build.mem.rss)), fmt.Sprintf("%.1f MiB", mib(buildless.mem.rss)))
}

// printController says how the controller ran: since the local cluster
// has a real node, the controller is its Deployment's Pod there, limited
// by the chart's resources (no longer a process of the bench without
// limits); its memory is its container's process, read in /proc.
func (f fnFigures) printController() {
	fmt.Printf("  the controller: the chart Deployment's Pod on the real node (2 CPUs shared with the control plane), limits %s (the chart's)\n", f.limits)
	if f.cpuErr != nil {
		fmt.Printf("  controller CPU: unknown (%v)\n", f.cpuErr)
	} else if f.toRunning > 0 {
		throttled := ""
		if f.cpu.periods > 0 {
			throttled = fmt.Sprintf("; held back by its CPU limit in %d of %d periods of 100 ms, %.1fs in all", f.cpu.throttledRuns, f.cpu.periods, f.cpu.throttled.Seconds())
		}
		fmt.Printf("  controller CPU from the creates to all Running: %.1fs in %.1fs (%.2f cores on average)%s\n",
			f.cpu.used.Seconds(), f.toRunning.Seconds(), f.cpu.used.Seconds()/f.toRunning.Seconds(), throttled)
	}
	fmt.Printf("  this machine from the creates to all Running: %s\n", f.machine)
	fmt.Println("  memory: the controller container's process on this machine (/proc/<pid>/status); Go heap from its metrics endpoint")
}

// printRequests prints where the requests went, by verb and resource.
func (f fnFigures) printRequests() {
	fmt.Printf("  writes by verb and resource (per Function): %s\n", f.run.breakdown(false, f.functions))
	fmt.Printf("  reads by verb and resource: %s\n", f.run.breakdown(true, 0))
	fmt.Printf("  idle: %s\n", f.idle.breakdown(false, 0)+"; reads: "+f.idle.breakdown(true, 0))
	fmt.Printf("  after the restart (%d reconciles): writes: %s; reads: %s\n", f.restartReconciles, f.restart.breakdown(false, 0), f.restart.breakdown(true, 0))
	fmt.Printf("  (the controller went quiet %.0fs after the last Function was Running)\n", f.settleTime.Seconds())
}
