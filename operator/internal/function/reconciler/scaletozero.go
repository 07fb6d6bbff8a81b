package reconciler

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/internal/function/resources"
	"github.com/kyma-project/serverless-manager/operator/internal/steps"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
	"github.com/kyma-project/serverless-manager/operator/pkg/scaletozero"
)

// Scale to zero (docs/contributor/scale-to-zero.md), for Functions with
// spec.scaleConfig.minReplicas 0 only: the Service step parks the Function
// (its Service without selector, its EndpointSlice listing the activator's
// Pods) or serves it (the selector of before, the slice empty); the
// Deployment step drains the replicas before it scales them to zero; the
// Running step reports the Function at zero.

const (
	// DefaultDrainSettle is how long a drain waits after the Function was
	// parked before it scrapes.
	DefaultDrainSettle = module.EndpointSettle
	// drainScrapeEvery is the interval of the drain's scrapes.
	drainScrapeEvery = 2 * time.Second
)

// Scraper reads the call counters of the replica at address (host:port).
type Scraper func(ctx context.Context, address string) (scaletozero.Sample, error)

// HTTPScraper scrapes the runtime's /metrics over plain HTTP with c.
func HTTPScraper(c *http.Client) Scraper {
	return func(ctx context.Context, address string) (scaletozero.Sample, error) {
		return scaletozero.ScrapeCounters(ctx, c, address)
	}
}

// drains remembers since when each Function's replicas drain (in memory: a
// restarted controller starts the drain again, which only makes it later).
type drains struct {
	mu    sync.Mutex
	since map[types.NamespacedName]time.Time
}

func newDrains() *drains { return &drains{since: map[types.NamespacedName]time.Time{}} }

// start returns when the drain of key began, beginning it at now.
func (d *drains) start(key types.NamespacedName, now time.Time) time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	if t, ok := d.since[key]; ok {
		return t
	}
	d.since[key] = now
	return now
}

func (d *drains) forget(key types.NamespacedName) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.since, key)
}

// drain keeps live's replicas in desired while they drain (holdReplicas);
// recheck is when the pass comes again to look (0: no drain).
func (r *Reconciler) drain(ctx context.Context, p *pass, live, desired *appsv1.Deployment) (recheck time.Duration, err error) {
	hold, recheck, err := r.holdReplicas(ctx, p, live, ptr.Deref(desired.Spec.Replicas, 1))
	if err != nil {
		return 0, err
	}
	if hold {
		desired.Spec.Replicas = ptr.To(ptr.Deref(live.Spec.Replicas, 1))
	}
	return recheck, nil
}

// drainPhase is where a drain stands.
type drainPhase int

const (
	drainSettling drainPhase = iota // waiting for the nodes to route to the activator
	drainScraping                   // scraping until drained
	drainOver                       // the Function's timeout passed: scale down anyway
)

// drainAt tells the phase of a drain begun at since, and how long until
// the next decision.
func drainAt(since, now time.Time, settle, timeout time.Duration) (drainPhase, time.Duration) {
	scrapeFrom := since.Add(settle)
	if now.Before(scrapeFrom) {
		return drainSettling, scrapeFrom.Sub(now)
	}
	if !now.Before(scrapeFrom.Add(timeout)) {
		return drainOver, 0
	}
	return drainScraping, drainScrapeEvery
}

// holdReplicas decides for a scale-to-zero Function whose spec.replicas
// dropped to 0 while live still runs replicas whether they stay for now
// (true: the drain goes on, a pass comes again after recheck) or go.
// Every other case forgets any drain of the Function.
func (r *Reconciler) holdReplicas(ctx context.Context, p *pass, live *appsv1.Deployment, desiredReplicas int32) (hold bool, recheck time.Duration, err error) {
	if !scaletozero.Enabled(p.fn) || desiredReplicas != 0 || live == nil || ptr.Deref(live.Spec.Replicas, 1) == 0 {
		r.drains.forget(p.key)
		return false, 0, nil
	}
	if svc := r.liveService(p, p.fn.Name); svc != nil && len(svc.Spec.Selector) > 0 {
		// Not parked yet (the Service step parks it after this one, or no
		// activator Pod is ready): requests still go to the replicas, so
		// they stay, and the drain counts from the parking.
		r.drains.forget(p.key)
		return true, r.settle, nil
	}
	now := p.now.Time
	phase, next := drainAt(r.drains.start(p.key, now), now, r.settle, scaletozero.FunctionTimeout(p.fn))
	log := logr.FromContextOrDiscard(ctx)
	switch phase {
	case drainSettling:
		return true, next, nil
	case drainOver:
		log.Info("drain ended by the Function's timeout: scaling to zero", "deployment", live.Name)
		r.drains.forget(p.key)
		return false, 0, nil
	}
	round, err := r.scrapeReplicas(ctx, p.fn)
	if err != nil {
		return false, 0, err
	}
	if len(round) == 0 || scaletozero.Drained(round) {
		log.Info("replicas drained: scaling to zero", "deployment", live.Name, "replicas", len(round))
		r.drains.forget(p.key)
		return false, 0, nil
	}
	return true, next, nil
}

// scrapeReplicas scrapes the Function's ready Pods, read from the API
// server (the cache holds no Function Pods; this runs only while a
// drain does). Without an API reader there is nothing to scrape.
func (r *Reconciler) scrapeReplicas(ctx context.Context, fn *v1alpha2.Function) ([]scaletozero.Scrape, error) {
	if r.api == nil {
		return nil, nil
	}
	var pods corev1.PodList
	if err := r.api.List(ctx, &pods, client.InNamespace(fn.Namespace), client.MatchingLabels(resources.SelectorLabels(fn))); err != nil {
		return nil, fmt.Errorf("listing the Pods of Function %s to drain them: %w", fn.Name, err)
	}
	var round []scaletozero.Scrape
	for i := range pods.Items {
		pod := &pods.Items[i]
		if !podServes(pod) {
			continue
		}
		s, err := r.scrape(ctx, net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(resources.FunctionPort)))
		round = append(round, scaletozero.Scrape{Replica: string(pod.UID), Sample: s, Err: err})
	}
	return round, nil
}

// podServes: a Pod that may have calls in flight, running, ready, with an
// address. A Pod that is not ready gets no request through the Service;
// waiting for its answer would hold the drain until the timeout.
func podServes(pod *corev1.Pod) bool {
	if pod.DeletionTimestamp != nil || pod.Status.Phase != corev1.PodRunning || pod.Status.PodIP == "" {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// parked reports whether a scale-to-zero Function is to be served by the
// activator: asked to be at zero, or without a ready replica.
func parked(p *pass) bool {
	return restRequested(p) || p.deployment == nil || p.deployment.Status.ReadyReplicas == 0
}

// restRequested reports whether a scale-to-zero Function is asked to be at
// zero (spec.replicas 0: the activator's leader found it idle).
func restRequested(p *pass) bool {
	return ptr.Deref(p.fn.Spec.Replicas, 1) == 0
}

// route keeps a scale-to-zero Function's Service and EndpointSlice. Each
// change is ordered so that the Service always has an endpoint:
//   - at rest (asked to be at zero) the Service has no selector and our
//     slice lists the activator: parking fills the slice before the
//     selector goes;
//   - waking (asked for replicas, none ready yet) the Service has its
//     selector and our slice still lists the activator: the cluster's slices
//     then list the starting replicas as not ready, which the activator
//     probes to forward on their first answer, while kube-proxy sends
//     requests only to the ready endpoints, the activator's;
//   - served (a ready replica) the slice is emptied once the Service's own
//     slice shows a ready Pod (a later pass: the slice's change requeues it).
func (r *Reconciler) route(ctx context.Context, p *pass, desired *corev1.Service) (steps.Outcome, error) {
	family, eps, err := r.activatorEndpoints(ctx)
	if err != nil {
		return steps.Outcome{}, err
	}
	live := r.ourSlice(p)
	svc := r.liveService(p, desired.Name)
	if restRequested(p) && len(eps) > 0 {
		if svc == nil {
			// A new Service, no client yet: made first, so that a slice
			// never names a Service of that name that is not the
			// Function's (keepService refuses to take one over).
			desired.Spec.Selector = nil
			if out, err := r.keepService(ctx, p, desired); err != nil || out.Ends() {
				return out, err
			}
			return r.keepSlice(ctx, p, live, family, eps)
		}
		if out, err := r.keepSlice(ctx, p, live, family, eps); err != nil || out.Ends() {
			return out, err
		}
		desired.Spec.Selector = nil
		if out, err := r.keepService(ctx, p, desired); err != nil || out.Ends() {
			return out, err
		}
		return steps.Next(), r.dropServiceSlices(ctx, p, desired.Name)
	}
	if parked(p) {
		keep := eps
		if len(eps) == 0 {
			// No activator Pod is ready: dropping the selector would leave
			// the Service without any endpoint. It stays served until one
			// is (a change of the activator's slices requeues the
			// Function).
			logr.FromContextOrDiscard(ctx).Info("no ready activator Pod: the Function's Service keeps its selector",
				"service", module.ActivatorServiceName, "namespace", r.cfg.BaseNamespace)
			keep = sliceEndpoints(live)
		}
		if svc == nil {
			if out, err := r.keepService(ctx, p, desired); err != nil || out.Ends() {
				return out, err
			}
			return r.keepSlice(ctx, p, live, family, keep)
		}
		if out, err := r.keepSlice(ctx, p, live, family, keep); err != nil || out.Ends() {
			return out, err
		}
		return r.keepService(ctx, p, desired)
	}
	hadSelector := svc != nil && len(svc.Spec.Selector) > 0
	if out, err := r.keepService(ctx, p, desired); err != nil || out.Ends() {
		return out, err
	}
	keep := sliceEndpoints(live)
	if hadSelector && resources.ServiceHasReadyEndpoint(desired.Name, p.endpointSlices) {
		keep = nil
	}
	return r.keepSlice(ctx, p, live, family, keep)
}

// liveService is the Function's Service named name, nil when it has none.
func (r *Reconciler) liveService(p *pass, name string) *corev1.Service {
	for i := range p.services {
		if p.services[i].Name == name {
			return &p.services[i]
		}
	}
	return nil
}

// ourSlice is the Function's activator EndpointSlice, nil when it has none.
func (r *Reconciler) ourSlice(p *pass) *discoveryv1.EndpointSlice {
	name := resources.ActivatorSliceName(p.fn)
	for i := range p.endpointSlices {
		if s := &p.endpointSlices[i]; resources.IsActivatorSlice(s) && s.Name == name {
			return s
		}
	}
	return nil
}

func sliceEndpoints(s *discoveryv1.EndpointSlice) []discoveryv1.Endpoint {
	if s == nil {
		return nil
	}
	return s.Endpoints
}

// keepSlice makes the Function's slice list eps, on the port it has, or on
// the lowest free one for a new slice. Our other slices of the Function
// (another name) are deleted.
func (r *Reconciler) keepSlice(ctx context.Context, p *pass, live *discoveryv1.EndpointSlice, family discoveryv1.AddressType, eps []discoveryv1.Endpoint) (steps.Outcome, error) {
	if err := r.dropSlices(ctx, p, live); err != nil {
		return steps.Outcome{}, err
	}
	if live != nil {
		port, ok := resources.ActivatorSlicePort(live)
		if ok && (family == "" || live.AddressType == family) {
			desired := resources.ActivatorSlice(p.fn, port, live.AddressType, eps)
			updated, changed := resources.UpdateActivatorSlice(live, desired)
			if !changed {
				return steps.Next(), nil
			}
			if err := r.update(ctx, updated); err != nil {
				return steps.Outcome{}, fmt.Errorf("updating EndpointSlice %s: %w", live.Name, err)
			}
			return steps.Next(), nil
		}
		// Another address family, or a port out of the range: a new slice.
		if err := r.remove(ctx, live); err != nil {
			return steps.Outcome{}, err
		}
	}
	return r.createSlice(ctx, p, family, eps)
}

// createSlice creates the Function's slice on the lowest free port. One
// allocation at a time: each reads back (from the cache) the slice it
// created before the next allocates.
func (r *Reconciler) createSlice(ctx context.Context, p *pass, family discoveryv1.AddressType, eps []discoveryv1.Endpoint) (steps.Outcome, error) {
	r.ports.Lock()
	defer r.ports.Unlock()
	var made discoveryv1.EndpointSliceList
	if err := r.client.List(ctx, &made, client.MatchingLabels{discoveryv1.LabelManagedBy: module.ActivatorSliceManagedBy}); err != nil {
		return steps.Outcome{}, fmt.Errorf("listing the activator EndpointSlices: %w", err)
	}
	port, ok := resources.FreeActivatorPort(made.Items)
	if !ok {
		setCondition(&p.status, v1alpha2.ConditionRunning, corev1.ConditionFalse, v1alpha2.ReasonServiceFailed,
			fmt.Sprintf("no activator port is free for EndpointSlice %s: all of %d-%d are taken", resources.ActivatorSliceName(p.fn),
				module.ActivatorPortFirst, module.ActivatorPortLast), p.now)
		return steps.Fail(v1alpha2.ReasonServiceFailed).Within(r.cfg.GitFetchRequeueDuration), nil
	}
	slice := resources.ActivatorSlice(p.fn, port, family, eps)
	err := r.create(ctx, slice)
	if apierrors.IsAlreadyExists(err) {
		return steps.Outcome{}, fmt.Errorf("creating EndpointSlice %s: one of that name is not in the cache yet: %w", slice.Name, err)
	}
	if err != nil {
		return steps.Outcome{}, fmt.Errorf("creating EndpointSlice %s: %w", slice.Name, err)
	}
	p.endpointSlices = append(p.endpointSlices, *slice)
	return steps.Next(), nil
}

// dropServiceSlices deletes what the cluster keeps of a parked Service's
// Pods. Its controllers leave a Service without selector alone: the
// EndpointSlice controller's slices and the Endpoints object (which the
// mirroring controller then copies into slices of its own, as it does for
// every Service without selector) would keep the Pods' addresses after the
// Pods are gone, kube-proxy would send requests there, and the activator
// would take them for ready replicas. Both are made anew when the selector
// comes back.
func (r *Reconciler) dropServiceSlices(ctx context.Context, p *pass, service string) error {
	for i := range p.endpointSlices {
		s := &p.endpointSlices[i]
		if s.Labels[discoveryv1.LabelServiceName] != service {
			continue
		}
		switch s.Labels[discoveryv1.LabelManagedBy] {
		case resources.ClusterSliceManager:
		case resources.MirroredSliceManager:
			// Deleted without waiting for the cache, which holds no
			// Endpoints: the mirrored slice's deletion is what the next
			// pass sees.
			//nolint:staticcheck // Endpoints is what the mirroring copies from.
			ep := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: service}}
			if err := r.client.Delete(ctx, ep); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("deleting Endpoints %s: %w", service, err)
			}
		default:
			continue
		}
		if err := r.remove(ctx, s); err != nil {
			return err
		}
	}
	return nil
}

// dropSlices deletes the Function's activator slices but keep (nil: all).
func (r *Reconciler) dropSlices(ctx context.Context, p *pass, keep *discoveryv1.EndpointSlice) error {
	for i := range p.endpointSlices {
		s := &p.endpointSlices[i]
		if s == keep || !resources.IsActivatorSlice(s) {
			continue
		}
		if err := r.remove(ctx, s); err != nil {
			return err
		}
	}
	return nil
}

// activatorEndpoints are the ready activator Pods, from the EndpointSlices
// of the activator's Service in the module namespace.
func (r *Reconciler) activatorEndpoints(ctx context.Context) (discoveryv1.AddressType, []discoveryv1.Endpoint, error) {
	found, err := r.moduleServiceSlices(ctx, module.ActivatorServiceName)
	if err != nil {
		return "", nil, err
	}
	family, eps := resources.ActivatorEndpoints(found)
	return family, eps, nil
}

// atZero reports whether a scale-to-zero Function is at zero: asked to be,
// and its Deployment scaled down (the drain is over).
func atZero(p *pass) bool {
	return scaletozero.Enabled(p.fn) && ptr.Deref(p.fn.Spec.Replicas, 1) == 0 &&
		p.deployment != nil && ptr.Deref(p.deployment.Spec.Replicas, 1) == 0
}

// scaledToZeroMessage is Running's message at zero.
func scaledToZeroMessage(fn *v1alpha2.Function) string {
	window, err := scaletozero.IdleWindow(fn.Annotations)
	if err != nil {
		return "scaled to zero; the next request starts it"
	}
	return fmt.Sprintf("scaled to zero after %s without a request; the next request starts it", window)
}
