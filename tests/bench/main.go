// Command bench measures the Serverless Manager on the local cluster: one
// install of the default CR, idle, restart, a preset change and the
// uninstall, counting the manager's own requests in the kube-apiserver audit
// log. With -scale, the cluster first gets 200 namespaces × 5 Functions,
// 1,000 Secrets and 1,000 ConfigMaps, to show that the manager's memory and
// requests do not grow with the cluster. With -functions it measures the
// Function controller instead: 300 Functions built and run (functions.go);
// with -builds real builds (builds.go); with -cleanup one registry clean-up
// round (cleanup.go).
//
// The manager always runs here, as a process under its ServiceAccount. The
// local cluster has one real node (kubelet, containerd) and kwok's
// simulated nodes; where the module's Pods go is the module namespace's
// placement: simulated for the manager's figures (the bench measures what
// the manager does with objects), the real node where the Function
// controller, the internal registry and builds must run for real
// (-functions, -builds, -cleanup). It loads the images `make image` wrote
// into the real node first, as the e2e tests do.
// Run it with `make bench`.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/pkg/manifest"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
	"github.com/kyma-project/serverless-manager/tests/framework"
)

func main() {
	scale := flag.Bool("scale", false, "fill the cluster with 200 namespaces × 5 Functions, 1,000 Secrets and 1,000 ConfigMaps first")
	functions := flag.Bool("functions", false, "instead: the Function controller with 300 Functions created at once (see functions.go)")
	variants := flag.String("function-sources", "distinct,identical,buildless", "with -functions: which runs, in order (distinct: a source per Function; identical: one per runtime; buildless: distinct sources in buildless mode)")
	idle := flag.Duration("idle", 30*time.Second, "how long to count requests while nothing changes")
	builds := flag.Bool("builds", false, "instead: real builds of a Node Function with npm dependencies against a registry process (builds.go)")
	cleanup := flag.Bool("cleanup", false, "instead: one registry clean-up round after 20 Functions built for real, 8 deleted, 5 changed twice (cleanup.go)")
	pods := flag.Bool("pods", false, "instead: real Pods on the real node, build mode against buildless mode: create → first answer, scale-out 1 → 5, dependency drift, the node's memory (realpods.go)")
	repeats := flag.Int("repeats", 3, "with -pods: runs per figure (median, min, max)")
	podsPreset := flag.String("pods-function-preset", "M", "with -pods and -zero: the Functions' preset")
	podsBuildPreset := flag.String("pods-build-preset", "normal", "with -pods: the build Jobs' preset")
	zero := flag.Bool("zero", false, "instead: scale to zero on the real node: from zero to the first answer of built Node.js and Python Functions and a buildless one with an npm dependency, and where the time goes; Functions woken at once and their CPU; many requests at zero; the latency added when awake (zero.go)")
	wakeups := flag.Int("wakeups", 20, "with -zero: wake-ups per setup")
	zeroFunctions := flag.Int("zero-functions", 15, "with -zero: Functions at zero called at the same moment")
	zeroBurst := flag.Int("zero-burst", 1000, "with -zero: requests at once to one Function at zero")
	busy := flag.Bool("busy-namespace", false, "instead: the manager's memory with the CR installed, before and after 2,000 Secrets and 2,000 Services are added to the module namespace (busy.go)")
	flag.Parse()
	ctrllog.SetLogger(logr.Discard()) // the bench's clients have nothing to log
	var err error
	if *functions {
		var vs []fnVariant
		for _, name := range strings.Split(*variants, ",") {
			v, ok := fnVariantNamed(name)
			if !ok {
				fmt.Fprintf(os.Stderr, "bench: -function-sources: %q is none of distinct, identical, buildless\n", name)
				os.Exit(2)
			}
			vs = append(vs, v)
		}
		err = runFunctions(vs, *idle)
	} else if *builds {
		err = runBuilds()
	} else if *cleanup {
		err = runCleanup()
	} else if *pods {
		err = runPods(*repeats, *podsPreset, *podsBuildPreset)
	} else if *zero {
		err = runZero(*wakeups, *zeroFunctions, *zeroBurst, *podsPreset)
	} else if *busy {
		err = runBusyNamespace()
	} else {
		err = run(*scale, *idle)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// figures of one run.
type figures struct {
	startup, install, idle, restart, preset framework.AuditCount
	toReady, toDelete                       time.Duration
	mem                                     memoryFigures
}

type bench struct {
	cluster *framework.Cluster
	c       client.Client
	mgr     *framework.Process
	metrics string
	// managerArgs are added to the manager's (e.g. --chart-path).
	managerArgs []string
}

// step prints the bench's progress.
func step(msg string) { fmt.Fprintf(os.Stderr, "[bench %s] %s\n", time.Now().Format("15:04:05"), msg) }

// prepare brings the local cluster up with the real node's images loaded,
// the manager's prerequisites, the module's Pods placed on module and a
// warm scheduler; release hands the cluster back (the module namespace's
// placement as it was).
func prepare(ctx context.Context, module framework.Placement) (b *bench, release func(), err error) {
	cluster, err := framework.EnsureCluster(ctx)
	if err != nil {
		return nil, nil, err
	}
	release = func() { _ = cluster.Release() }
	defer func() {
		if err != nil {
			release()
		}
	}()
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1alpha1.AddToScheme, v1alpha2.AddToScheme} {
		if err := add(s); err != nil {
			return nil, nil, err
		}
	}
	c, err := cluster.NewClient(s)
	if err != nil {
		return nil, nil, err
	}
	b = &bench{cluster: cluster, c: c}
	step("loading the module's images (make image) and the local images into the real node")
	if err := cluster.LoadImages(ctx); err != nil {
		return nil, nil, err
	}
	step("installing the Serverless CRD and the manager's RBAC from config/")
	if err := cluster.InstallManagerPrerequisites(ctx); err != nil {
		return nil, nil, err
	}
	restore, err := b.placeModule(ctx, module)
	if err != nil {
		return nil, nil, err
	}
	release = func() { restore(); _ = cluster.Release() }
	step("warming the cluster with a throwaway Deployment (simulated nodes)")
	if err := b.warmUp(ctx); err != nil {
		return nil, nil, err
	}
	return b, release, nil
}

// placeModule sends the module's Pods (created from now on) to p; restore
// puts the module namespace's node selector back as it was.
func (b *bench) placeModule(ctx context.Context, p framework.Placement) (restore func(), err error) {
	ns := &corev1.Namespace{}
	if err := b.c.Get(ctx, types.NamespacedName{Name: framework.ManagerNamespace}, ns); err != nil {
		return nil, err
	}
	before, had := ns.Annotations[framework.NodeSelectorAnnotation]
	step(fmt.Sprintf("the module's Pods (namespace %s) go to %s", framework.ManagerNamespace, p))
	if err := b.cluster.PlacePods(ctx, framework.ManagerNamespace, p); err != nil {
		return nil, err
	}
	return func() {
		ctx := context.Background()
		ns := &corev1.Namespace{}
		if err := b.c.Get(ctx, types.NamespacedName{Name: framework.ManagerNamespace}, ns); err != nil {
			return
		}
		patch := client.MergeFrom(ns.DeepCopy())
		if had {
			if ns.Annotations == nil {
				ns.Annotations = map[string]string{}
			}
			ns.Annotations[framework.NodeSelectorAnnotation] = before
		} else {
			delete(ns.Annotations, framework.NodeSelectorAnnotation)
		}
		_ = b.c.Patch(ctx, ns, patch)
	}, nil
}

// simulatedNamespace creates namespace name (when missing) with its Pods on
// the simulated nodes.
func (b *bench) simulatedNamespace(ctx context.Context, name string) error {
	return b.cluster.PlacePods(ctx, name, framework.Simulated)
}

func run(scale bool, idle time.Duration) error {
	ctx := context.Background()
	b, release, err := prepare(ctx, framework.Simulated)
	if err != nil {
		return err
	}
	defer release()
	cluster, c := b.cluster, b.c
	if scale {
		step("filling the cluster: 200 namespaces × 5 Functions, 1,000 Secrets, 1,000 ConfigMaps")
		if err := b.fill(ctx); err != nil {
			return err
		}
	}

	var f figures
	mark, err := cluster.MarkAudit()
	if err != nil {
		return err
	}
	step("starting the manager as its ServiceAccount")
	if err := b.startManager(ctx); err != nil {
		return err
	}
	defer func() { _ = b.mgr.Stop() }()
	if err := b.waitStarted(); err != nil {
		return err
	}
	if f.startup, err = b.count(mark); err != nil {
		return err
	}

	step("installing the default Serverless CR")
	mark, _ = cluster.MarkAudit()
	start := time.Now()
	cr := &v1alpha1.Serverless{ObjectMeta: metav1.ObjectMeta{Namespace: framework.ManagerNamespace, Name: "default"},
		Spec: v1alpha1.ServerlessSpec{DockerRegistry: &v1alpha1.DockerRegistry{EnableInternal: ptr.To(true)}}}
	if err := c.Create(ctx, cr); err != nil {
		return err
	}
	if err := b.waitReady(ctx, 1, 2*time.Minute); err != nil {
		return err
	}
	f.toReady = time.Since(start)
	time.Sleep(2 * time.Second) // let trailing status updates land before counting
	if f.install, err = b.count(mark); err != nil {
		return err
	}
	if f.mem, err = memory(b.mgr.PID(), b.metrics); err != nil {
		return err
	}

	step(fmt.Sprintf("idle for %s", idle))
	mark, _ = cluster.MarkAudit()
	time.Sleep(idle)
	if f.idle, err = b.count(mark); err != nil {
		return err
	}

	step("restarting the manager with nothing changed")
	mark, _ = cluster.MarkAudit()
	if err := b.startManager(ctx); err != nil {
		return err
	}
	if err := b.waitReconciles(ctx, 1); err != nil {
		return err
	}
	time.Sleep(2 * time.Second)
	if f.restart, err = b.count(mark); err != nil {
		return err
	}

	step("changing one preset")
	mark, _ = cluster.MarkAudit()
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(cr), cr); err != nil {
			return err
		}
		cr.Spec.DefaultRuntimePodPreset = "M"
		return c.Update(ctx, cr)
	}); err != nil {
		return err
	}
	if err := b.waitReady(ctx, cr.Generation, time.Minute); err != nil {
		return err
	}
	time.Sleep(2 * time.Second)
	if f.preset, err = b.count(mark); err != nil {
		return err
	}

	step("deleting the Serverless CR")
	start = time.Now()
	if err := c.Delete(ctx, cr); err != nil {
		return err
	}
	if scale {
		// 1,000 Functions exist: the uninstall must wait for them.
		if err := b.waitFunctionsGuard(ctx); err != nil {
			return err
		}
		step("the uninstall waits for the Functions; deleting them")
		if err := b.deleteFunctions(ctx); err != nil {
			return err
		}
		start = time.Now()
	}
	if err := framework.Poll(ctx, 2*time.Minute, "the CR to be gone", func(ctx context.Context) (bool, string, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(cr), &v1alpha1.Serverless{})
		return apierrors.IsNotFound(err), "", client.IgnoreNotFound(err)
	}); err != nil {
		return err
	}
	f.toDelete = time.Since(start)
	f.print(scale, idle)
	return nil
}

func (b *bench) startManager(ctx context.Context) error {
	if b.mgr != nil {
		// A new run of the same process, on the same metrics port.
		return b.mgr.Restart()
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	b.metrics = fmt.Sprintf("http://127.0.0.1:%d/metrics", port)
	b.mgr, err = b.cluster.StartManager(ctx, "bench-manager", nil, append([]string{fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", port)}, b.managerArgs...)...)
	return err
}

// restartManagerWith stops the manager and starts it again with args added
// instead of the earlier ones (e.g. another --chart-path).
func (b *bench) restartManagerWith(ctx context.Context, name string, args ...string) error {
	if b.mgr != nil {
		if err := b.mgr.Stop(); err != nil {
			return err
		}
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	b.managerArgs = args
	b.metrics = fmt.Sprintf("http://127.0.0.1:%d/metrics", port)
	b.mgr, err = b.cluster.StartManager(ctx, name, nil, append([]string{fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", port)}, args...)...)
	return err
}

// waitStarted waits until the controller runs with synced caches.
func (b *bench) waitStarted() error {
	return framework.Poll(context.Background(), time.Minute, "the manager to start its workers", func(context.Context) (bool, string, error) {
		if exited, err := b.mgr.Exited(); exited {
			return false, "", framework.StopWaiting(fmt.Errorf("manager exited: %v\n%s", err, b.mgr.Tail(30)))
		}
		return b.mgr.LogHas("Starting workers"), "", nil
	})
}

// waitReconciles waits until the controller finished more than n reconciles
// (n=0: it is running with synced caches).
func (b *bench) waitReconciles(ctx context.Context, n int) error {
	return framework.Poll(ctx, time.Minute, "the manager to reconcile", func(ctx context.Context) (bool, string, error) {
		if exited, err := b.mgr.Exited(); exited {
			return false, "", framework.StopWaiting(fmt.Errorf("manager exited: %v\n%s", err, b.mgr.Tail(30)))
		}
		total, err := reconcileTotal(ctx, b.metrics)
		if err != nil {
			return false, "", err
		}
		return total >= n, fmt.Sprintf("%d reconciles", total), nil
	})
}

func (b *bench) waitReady(ctx context.Context, generation int64, timeout time.Duration) error {
	cr := &v1alpha1.Serverless{}
	return framework.Poll(ctx, timeout, "the CR to be Ready", func(ctx context.Context) (bool, string, error) {
		if err := b.c.Get(ctx, types.NamespacedName{Namespace: framework.ManagerNamespace, Name: "default"}, cr); err != nil {
			return false, "", err
		}
		return cr.Status.State == v1alpha1.StateReady && cr.Status.ObservedGeneration >= generation,
			fmt.Sprintf("state %s observed %d", cr.Status.State, cr.Status.ObservedGeneration), nil
	}, func() string { return b.mgr.Tail(40) })
}

func (b *bench) count(mark framework.AuditMark) (framework.AuditCount, error) {
	user := framework.AuditUser(module.Manager())
	counts, err := b.cluster.CountAudit(mark, user)
	return counts[user], err
}

// warmUpNamespace holds the warm-up Deployment, on the simulated nodes (its
// image exists nowhere). It is kept between runs.
const warmUpNamespace = "bench-warmup"

// warmUp makes sure scheduler, controllers and kwok are warm: a bare
// Deployment becomes Available before the measured install.
func (b *bench) warmUp(ctx context.Context) error {
	if err := b.simulatedNamespace(ctx, warmUpNamespace); err != nil {
		return err
	}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: warmUpNamespace, Name: "bench-warmup"},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "bench-warmup"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "bench-warmup"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "example.com/warmup:1"}}},
			},
		},
	}
	_ = b.c.Delete(ctx, d)
	if err := framework.Poll(ctx, time.Minute, "the warm-up Deployment to be gone", func(ctx context.Context) (bool, string, error) {
		err := b.c.Get(ctx, client.ObjectKeyFromObject(d), &appsv1.Deployment{})
		return apierrors.IsNotFound(err), "", client.IgnoreNotFound(err)
	}); err != nil {
		return err
	}
	d.ResourceVersion = ""
	if err := b.c.Create(ctx, d); err != nil {
		return err
	}
	err := framework.Poll(ctx, time.Minute, "the warm-up Deployment to be Available", func(ctx context.Context) (bool, string, error) {
		got := &appsv1.Deployment{}
		if err := b.c.Get(ctx, client.ObjectKeyFromObject(d), got); err != nil {
			return false, "", err
		}
		return got.Status.AvailableReplicas == 1, "", nil
	})
	_ = b.c.Delete(ctx, d)
	return err
}

// waitFunctionsGuard waits for the uninstall to report the Functions.
func (b *bench) waitFunctionsGuard(ctx context.Context) error {
	return framework.Poll(ctx, time.Minute, "the uninstall to wait for 1000 Functions", func(ctx context.Context) (bool, string, error) {
		cr := &v1alpha1.Serverless{}
		if err := b.c.Get(ctx, types.NamespacedName{Namespace: framework.ManagerNamespace, Name: "default"}, cr); err != nil {
			return false, "", err
		}
		for _, cond := range cr.Status.Conditions {
			// The message may lead with the manager's own cause (v1alpha1.NewCondition).
			if cond.Type == v1alpha1.ConditionDeleted && strings.Contains(cond.Message, "1000 Functions still exist") {
				return true, cond.Message, nil
			}
		}
		return false, string(cr.Status.State), nil
	})
}

// deleteFunctions removes the scale variant's Functions.
func (b *bench) deleteFunctions(ctx context.Context) error {
	for i := range 200 {
		fn := &unstructured.Unstructured{}
		fn.SetAPIVersion("serverless.kyma-project.io/v1alpha2")
		fn.SetKind("Function")
		if err := b.c.DeleteAllOf(ctx, fn, client.InNamespace(fmt.Sprintf("bench-%03d", i))); err != nil {
			return err
		}
	}
	return nil
}

// fill creates the scale variant's objects (idempotently).
func (b *bench) fill(ctx context.Context) error {
	crds, err := manifest.ReadDir(filepath.Join(b.cluster.Root(), "charts", "serverless", "crds"))
	if err != nil {
		return err
	}
	if err := b.cluster.Apply(ctx, "", crds...); err != nil {
		return err
	}
	time.Sleep(2 * time.Second) // the Function CRD gets established
	create := func(o client.Object) error {
		if err := b.c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		return nil
	}
	for i := range 200 {
		ns := fmt.Sprintf("bench-%03d", i)
		// Simulated: an earlier run's namespace is placed there too.
		if err := b.simulatedNamespace(ctx, ns); err != nil {
			return err
		}
		for j := range 5 {
			fn := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "serverless.kyma-project.io/v1alpha2", "kind": "Function",
				"metadata": map[string]any{"namespace": ns, "name": fmt.Sprintf("fn-%d", j)},
				"spec": map[string]any{"runtime": "nodejs22", "source": map[string]any{"inline": map[string]any{
					"source": "module.exports = { main: function (event, context) { return 'hello' } }"}}},
			}}
			name := fmt.Sprintf("data-%d", j)
			for _, o := range []client.Object{fn,
				&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, StringData: map[string]string{"k": strings.Repeat("s", 256)}},
				&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string]string{"k": strings.Repeat("c", 256)}},
			} {
				if err := create(o); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func (f figures) print(scale bool, idle time.Duration) {
	variant := "empty cluster"
	if scale {
		variant = "scale: 200 ns × 5 Functions, 1,000 Secrets, 1,000 ConfigMaps"
	}
	fmt.Printf("\nServerless Manager benchmark (%s)\n", variant)
	fmt.Println("  the manager runs here; the module's Pods and the bench's namespaces are on the 3 simulated nodes (kwok) beside the real node")
	row := func(name, value, target string) { fmt.Printf("  %-38s %-42s %s\n", name, value, target) }
	row("figure", "value", "target")
	row("install → Ready", fmt.Sprintf("%.2fs", f.toReady.Seconds()), "≤ 1.5s")
	row("install requests: writes", fmt.Sprintf("%d (%s)", f.install.Writes(), f.install), "≤ 55")
	row("install requests: reads", strconv.Itoa(f.install.Reads()), "≤ 100")
	row("manager start-up requests (before the CR)", fmt.Sprintf("%d (%s)", f.startup.Total(), f.startup), "")
	row(fmt.Sprintf("requests while idle %s", idle), fmt.Sprintf("%d (%s)", f.idle.Total(), f.idle), "0")
	row("writes after a restart, nothing changed", fmt.Sprintf("%d (all requests: %s)", f.restart.Writes(), f.restart), "0")
	row("writes for a one-field preset change", fmt.Sprintf("%d (%s)", f.preset.Writes(), f.preset), "≤ 5")
	deleteNote := ""
	if scale {
		deleteNote = "(from the last Function's deletion)"
	}
	row("delete → CR gone", fmt.Sprintf("%.2fs %s", f.toDelete.Seconds(), deleteNote), "")
	row("manager RSS after install (peak)", fmt.Sprintf("%.1f MiB (%.1f MiB)", mib(f.mem.rss), mib(f.mem.hwm)), "≤ 45 MiB")
	row("  of which anonymous / file-backed", fmt.Sprintf("%.1f MiB / %.1f MiB", mib(f.mem.anon), mib(f.mem.file)), "")
	row("  Go heap in use / runtime total", fmt.Sprintf("%.1f MiB / %.1f MiB", mib(f.mem.heapInUse), mib(f.mem.goSys)), "")
}

func mib(bytes int64) float64 { return float64(bytes) / (1 << 20) }

// memoryFigures of the manager process, in bytes.
type memoryFigures struct {
	// rss is resident memory, hwm its peak; anon and file split rss into
	// the heap, stacks and runtime data and the pages of the binary.
	rss, hwm, anon, file int64
	// heapInUse and goSys come from the Go runtime (its metrics endpoint).
	heapInUse, goSys int64
}

// memory reads the process's resident memory from /proc and the Go
// runtime's own figures from its metrics endpoint.
func memory(pid int, metricsURL string) (memoryFigures, error) {
	var m memoryFigures
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return m, err
	}
	kib := map[string]*int64{"VmRSS:": &m.rss, "VmHWM:": &m.hwm, "RssAnon:": &m.anon, "RssFile:": &m.file}
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 2 || kib[fields[0]] == nil {
			continue
		}
		v, err := strconv.ParseInt(fields[1], 10, 64)
		if err != nil {
			return m, fmt.Errorf("%s in /proc/%d/status: %w", fields[0], pid, err)
		}
		*kib[fields[0]] = v << 10
	}
	samples, err := scrape(context.Background(), metricsURL, "go_memstats_heap_inuse_bytes", "go_memstats_sys_bytes")
	if err != nil {
		return m, err
	}
	m.heapInUse, m.goSys = int64(samples["go_memstats_heap_inuse_bytes"]), int64(samples["go_memstats_sys_bytes"])
	return m, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// reconcileTotal sums controller_runtime_reconcile_total of the serverless controller.
func reconcileTotal(ctx context.Context, url string) (int, error) {
	body, err := framework.FetchMetrics(ctx, url)
	if err != nil {
		return 0, err
	}
	total, found := framework.SumSamples(body, "controller_runtime_reconcile_total", `controller="serverless"`)
	if !found {
		return 0, errors.New("no reconcile metrics yet")
	}
	return int(total), nil
}

// scrape reads unlabelled samples by name from the metrics endpoint.
func scrape(ctx context.Context, url string, names ...string) (map[string]float64, error) {
	body, err := framework.FetchMetrics(ctx, url)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, name := range names {
		v, found := framework.SumSamples(body, name, "")
		if !found {
			return nil, fmt.Errorf("no %s in the metrics", name)
		}
		out[name] = v
	}
	return out, nil
}
