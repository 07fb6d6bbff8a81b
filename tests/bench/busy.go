package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/tests/framework"
)

// busyObjects is how many Secrets, and how many Services, the busy variant
// adds to the module namespace.
const busyObjects = 2000

// busySettle is how long the restarted manager runs before its memory is
// sampled, and busySamples how many samples (a second apart) are taken: the
// median of them is reported, so one garbage collection more or less does
// not decide the figure.
const (
	busySettle  = 5 * time.Second
	busySamples = 5
)

// runBusyNamespace measures the manager's memory with the default CR
// installed, first with the module namespace as the install leaves it,
// then with 2,000 Secrets and 2,000 Services of users in it (no module
// labels, as a busy namespace holds them). Both figures are taken the same
// way, back to back: a fresh manager process, its first reconcile (nothing
// to change), then samples. The objects are removed at the end.
func runBusyNamespace() error {
	ctx := context.Background()
	b, release, err := prepare(ctx, framework.Simulated)
	if err != nil {
		return err
	}
	defer release()
	if err := b.deleteBusy(ctx); err != nil { // an interrupted earlier run's
		return err
	}

	mark, err := b.cluster.MarkAudit()
	if err != nil {
		return err
	}
	step("starting the manager and installing the default Serverless CR")
	if err := b.startManager(ctx); err != nil {
		return err
	}
	defer func() { _ = b.mgr.Stop() }()
	cr := &v1alpha1.Serverless{ObjectMeta: metav1.ObjectMeta{Namespace: framework.ManagerNamespace, Name: "default"},
		Spec: v1alpha1.ServerlessSpec{DockerRegistry: &v1alpha1.DockerRegistry{EnableInternal: ptr.To(true)}}}
	if err := b.c.Create(ctx, cr); err != nil {
		return err
	}
	if err := b.waitReady(ctx, 1, 2*time.Minute); err != nil {
		return err
	}
	if _, err := b.count(mark); err != nil {
		return err
	}

	var empty, busy busyFigures
	step("restarting the manager: module namespace as installed")
	if empty, err = b.restartAndSample(ctx); err != nil {
		return err
	}
	step(fmt.Sprintf("adding %d Secrets and %d Services to %s", busyObjects, busyObjects, framework.ManagerNamespace))
	if err := b.createBusy(ctx); err != nil {
		return err
	}
	step("restarting the manager: busy module namespace")
	if busy, err = b.restartAndSample(ctx); err != nil {
		return err
	}
	printBusy(empty, busy)

	step("deleting the Serverless CR and the added objects")
	if err := b.c.Delete(ctx, cr); err != nil {
		return err
	}
	if err := framework.Poll(ctx, 2*time.Minute, "the CR to be gone", func(ctx context.Context) (bool, string, error) {
		err := b.c.Get(ctx, client.ObjectKeyFromObject(cr), &v1alpha1.Serverless{})
		return apierrors.IsNotFound(err), "", client.IgnoreNotFound(err)
	}); err != nil {
		return err
	}
	return b.deleteBusy(ctx)
}

// busyFigures of one measurement.
type busyFigures struct {
	objects  int // Secrets and Services in the module namespace
	mem      memoryFigures
	requests framework.AuditCount // start-up and first reconcile
}

// restartAndSample starts a new manager process, waits for its first
// reconcile and samples its memory.
func (b *bench) restartAndSample(ctx context.Context) (busyFigures, error) {
	var f busyFigures
	var err error
	if f.objects, err = b.namespaceObjects(ctx); err != nil {
		return f, err
	}
	mark, err := b.cluster.MarkAudit()
	if err != nil {
		return f, err
	}
	if err := b.startManager(ctx); err != nil {
		return f, err
	}
	if err := b.waitReconciles(ctx, 1); err != nil {
		return f, err
	}
	time.Sleep(busySettle)
	var samples []memoryFigures
	for i := range busySamples {
		if i > 0 {
			time.Sleep(time.Second)
		}
		m, err := memory(b.mgr.PID(), b.metrics)
		if err != nil {
			return f, err
		}
		samples = append(samples, m)
	}
	f.mem = medianMemory(samples)
	if f.requests, err = b.count(mark); err != nil {
		return f, err
	}
	return f, nil
}

// medianMemory takes each figure's median over the samples.
func medianMemory(samples []memoryFigures) memoryFigures {
	median := func(get func(memoryFigures) int64) int64 {
		vs := make([]int64, 0, len(samples))
		for _, s := range samples {
			vs = append(vs, get(s))
		}
		sort.Slice(vs, func(i, j int) bool { return vs[i] < vs[j] })
		return vs[len(vs)/2]
	}
	return memoryFigures{
		rss:       median(func(m memoryFigures) int64 { return m.rss }),
		hwm:       median(func(m memoryFigures) int64 { return m.hwm }),
		anon:      median(func(m memoryFigures) int64 { return m.anon }),
		file:      median(func(m memoryFigures) int64 { return m.file }),
		heapInUse: median(func(m memoryFigures) int64 { return m.heapInUse }),
		goSys:     median(func(m memoryFigures) int64 { return m.goSys }),
	}
}

// namespaceObjects counts the Secrets and Services of the module namespace.
func (b *bench) namespaceObjects(ctx context.Context) (int, error) {
	n := 0
	for _, kind := range []string{"SecretList", "ServiceList"} {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(kind))
		if err := b.c.List(ctx, list, client.InNamespace(framework.ManagerNamespace)); err != nil {
			return 0, err
		}
		n += len(list.Items)
	}
	return n, nil
}

// busyLabel marks the added objects for their removal; it is not a module
// label, so the manager treats them as any user's.
const busyLabel = "bench.serverless.kyma-project.io/busy"

// busyObjectsOf returns the i-th Secret and Service: a registry-like
// Secret applied with kubectl (its data again in the last-applied
// annotation) and a ClusterIP Service, as users leave them.
func busyObjectsOf(i int) []client.Object {
	name := fmt.Sprintf("busy-%04d", i)
	labels := map[string]string{busyLabel: "true", "app.kubernetes.io/name": fmt.Sprintf("app-%02d", i%50)}
	data := map[string]string{"username": "robot-" + name, "password": strings.Repeat("p", 32), "serverAddress": "registry.example.com"}
	return []client.Object{
		&corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: framework.ManagerNamespace, Name: name, Labels: labels,
				Annotations: map[string]string{"kubectl.kubernetes.io/last-applied-configuration": fmt.Sprintf(
					`{"apiVersion":"v1","kind":"Secret","metadata":{"name":%q,"namespace":%q},"stringData":{"username":%q,"password":%q,"serverAddress":%q}}`,
					name, framework.ManagerNamespace, data["username"], data["password"], data["serverAddress"])}},
			StringData: data,
		},
		&corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: framework.ManagerNamespace, Name: name, Labels: labels},
			Spec: corev1.ServiceSpec{
				Selector: map[string]string{"app.kubernetes.io/name": labels["app.kubernetes.io/name"]},
				Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}},
			},
		},
	}
}

// createBusy creates the objects (idempotently), several at a time.
func (b *bench) createBusy(ctx context.Context) error {
	return b.forBusy(ctx, func(ctx context.Context, o client.Object) error {
		if err := b.c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating %s: %w", o.GetName(), err)
		}
		return nil
	})
}

// deleteBusy removes the objects createBusy made.
func (b *bench) deleteBusy(ctx context.Context) error {
	return b.forBusy(ctx, func(ctx context.Context, o client.Object) error {
		return client.IgnoreNotFound(b.c.Delete(ctx, o))
	})
}

// forBusy runs do for every busy object with a few workers.
func (b *bench) forBusy(ctx context.Context, do func(context.Context, client.Object) error) error {
	work := make(chan client.Object)
	errs := make(chan error, 1)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for o := range work {
				if err := do(ctx, o); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		}()
	}
	for i := range busyObjects {
		for _, o := range busyObjectsOf(i) {
			work <- o
		}
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}

func printBusy(empty, busy busyFigures) {
	fmt.Printf("\nServerless Manager memory with a busy module namespace (%d Secrets + %d Services added, no module labels)\n", busyObjects, busyObjects)
	row := func(name, a, b, target string) { fmt.Printf("  %-36s %-22s %-22s %s\n", name, a, b, target) }
	pct := func(a, b int64) string {
		if a == 0 {
			return ""
		}
		return fmt.Sprintf(" (%+.1f%%)", 100*float64(b-a)/float64(a))
	}
	row("figure (median of 5 samples)", "as installed", "busy", "target")
	row("Secrets + Services in the namespace", fmt.Sprint(empty.objects), fmt.Sprint(busy.objects), "")
	row("manager RSS", fmt.Sprintf("%.1f MiB", mib(empty.mem.rss)), fmt.Sprintf("%.1f MiB%s", mib(busy.mem.rss), pct(empty.mem.rss, busy.mem.rss)), "within 10% of as installed")
	row("  anonymous / file-backed", fmt.Sprintf("%.1f / %.1f MiB", mib(empty.mem.anon), mib(empty.mem.file)),
		fmt.Sprintf("%.1f / %.1f MiB", mib(busy.mem.anon), mib(busy.mem.file)), "")
	row("Go heap in use", fmt.Sprintf("%.1f MiB", mib(empty.mem.heapInUse)), fmt.Sprintf("%.1f MiB%s", mib(busy.mem.heapInUse), pct(empty.mem.heapInUse, busy.mem.heapInUse)), "")
	row("Go runtime total", fmt.Sprintf("%.1f MiB", mib(empty.mem.goSys)), fmt.Sprintf("%.1f MiB", mib(busy.mem.goSys)), "")
	row("requests: start-up + first reconcile", fmt.Sprintf("%d", empty.requests.Total()), fmt.Sprintf("%d", busy.requests.Total()), "")
	row("  writes", fmt.Sprintf("%d", empty.requests.Writes()), fmt.Sprintf("%d", busy.requests.Writes()), "0")
}
