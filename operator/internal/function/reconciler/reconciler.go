// Package reconciler builds and runs Functions: one pass validates the
// Function, checks the per-namespace prerequisites, keeps its source
// ConfigMap, builds its image with a Job (at most
// APP_FUNCTION_BUILD_MAX_SIMULTANEOUS_JOBS at once cluster-wide), and keeps
// its Deployment, Service and HPA, then writes the status once if it changed.
//
// Everything is read from the cache, and progress of Jobs and Deployments
// arrives by watch, so a pass never polls, with one exception: a rollout
// that stopped progressing, whose Pods are read from the API server now and
// then to name the cause (step rollout). Each step is one file.
package reconciler

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/internal/function/config"
	"github.com/kyma-project/serverless-manager/operator/internal/function/git"
	"github.com/kyma-project/serverless-manager/operator/internal/function/resources"
	"github.com/kyma-project/serverless-manager/operator/internal/steps"
)

// The controller's permissions: exactly what the steps below do (reads
// from the cache: list/watch; writes: create/update/delete, status by patch,
// events by the events.k8s.io recorder).
// +kubebuilder:rbac:groups=serverless.kyma-project.io,resources=functions,verbs=get;list;watch
// +kubebuilder:rbac:groups=serverless.kyma-project.io,resources=functions/status,verbs=patch
// Children carry blockOwnerDeletion; clusters that enforce owner-reference
// permissions require this to create them.
// +kubebuilder:rbac:groups=serverless.kyma-project.io,resources=functions/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=configmaps;services,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups="",resources=secrets;serviceaccounts,verbs=get;list;watch
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups=autoscaling,resources=horizontalpodautoscalers,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// Scale to zero: the activator EndpointSlice of each such Function, and the
// EndpointSlices of the Functions' and the activator's Services (read).
// +kubebuilder:rbac:groups=discovery.k8s.io,resources=endpointslices,verbs=get;list;watch;create;update;patch;delete
// A parked Function's Service has no selector: the Endpoints object the
// cluster kept for it is deleted with the slices mirrored from it
// (scaletozero.go, dropServiceSlices).
// +kubebuilder:rbac:groups="",resources=endpoints,verbs=delete

// EventRecorder emits events about a Function (events.k8s.io recorder).
type EventRecorder interface {
	Eventf(regarding runtime.Object, related runtime.Object, eventtype, reason, action, note string, args ...any)
}

// Options of a Reconciler.
type Options struct {
	// Config is the controller's configuration.
	Config config.Config
	// CacheWait bounds how long a write waits for the cache to show it, so
	// the next pass never decides on an older picture (default 5 s).
	CacheWait time.Duration
	// Now returns the current time (tests fix it).
	Now func() time.Time
	// API reads from the API server what the cache does not hold: Git auth
	// Secrets, and a per-namespace copy still missing from the cache after
	// the prerequisites grace (one 1.8.4 left, not adopted yet). Nil: the
	// cache only.
	API client.Reader
	// Git resolves Git Functions' references (nil: git.Resolver{}).
	Git GitResolver
	// PackageConfigs reads the package registry config Secrets, which
	// users create and the main cache does not hold (nil: the client).
	PackageConfigs client.Reader
	// Leftovers removes what build mode left of a Function once it runs
	// buildless (buildless mode; nil: nothing to remove).
	Leftovers Leftovers
	// Informers are the cache c reads from: waiting for a write to reach
	// the cache then looks at the cached object without copying it (nil:
	// a copy per look, through c).
	Informers cache.Informers
	// ModuleSlices holds the EndpointSlices of the module's own Services
	// that passes read (ModuleSliceSelector, in the module namespace); a
	// change requeues the Functions it concerns (nil: they are read
	// through c, and nothing watches them).
	ModuleSlices cache.Cache
	// Scrape reads a replica's call counters during a drain (nil:
	// HTTPScraper with http.DefaultTransport).
	Scrape Scraper
	// DrainSettle is how long a drain waits before its first scrape
	// (DefaultDrainSettle if 0).
	DrainSettle time.Duration
}

// Leftovers are what build mode left of Functions (their build Jobs,
// source ConfigMaps and HPAs, the per-namespace copies): in buildless mode
// each Function's go once its Deployment runs the buildless template.
type Leftovers interface {
	// Converted: fn's Deployment runs the buildless template now.
	Converted(ctx context.Context, fn *v1alpha2.Function) error
	// Forget: the Function is gone.
	Forget(ctx context.Context, key types.NamespacedName)
	// Wake names the Functions to reconcile once the leftovers are known.
	Wake() <-chan event.GenericEvent
}

// Reconciler reconciles Functions.
type Reconciler struct {
	steps   []step        // the mode's, chosen once
	client  client.Client // reads from the cache, writes to the API server
	api     client.Reader // reads what the cache does not hold (nil: none)
	pkgs    client.Reader // reads package registry config Secrets
	events  EventRecorder
	metrics *Metrics
	slots   *BuildSlots
	retries *retries
	cfg     config.Config
	wait    time.Duration
	now     func() time.Time
	started time.Time // when this process began reconciling (prerequisites grace)
	git     gitDeps
	// leftovers of build mode (buildless mode only; nil otherwise).
	leftovers        Leftovers
	informers        cache.Informers // nil: awaitCache reads through client
	moduleSlices     client.Reader   // the EndpointSlices of the module's Services
	moduleSliceWatch cache.Cache     // where they are watched (nil: not)
	registryWaits    *registryWaiters
	// Scale to zero.
	scrape Scraper
	settle time.Duration
	drains *drains
	// Pods brought to their own CPU limit after their start (startupCPU).
	resized *resizedPods
	ports   sync.Mutex // one activator port allocation at a time
}

// New returns a Reconciler for the configured mode. c must read from the
// manager's cache. slots is nil in buildless mode (nothing builds).
func New(c client.Client, events EventRecorder, metrics *Metrics, slots *BuildSlots, opts Options) *Reconciler {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.CacheWait == 0 {
		opts.CacheWait = 5 * time.Second
	}
	if opts.Git == nil {
		opts.Git = git.Resolver{}
	}
	if opts.PackageConfigs == nil {
		opts.PackageConfigs = c
	}
	var moduleSlices client.Reader = c
	if opts.ModuleSlices != nil {
		moduleSlices = opts.ModuleSlices
	}
	if opts.Scrape == nil {
		opts.Scrape = HTTPScraper(&http.Client{})
	}
	if opts.DrainSettle == 0 {
		opts.DrainSettle = DefaultDrainSettle
	}
	r := &Reconciler{
		git:    gitDeps{resolver: opts.Git, checks: newGitChecks(), auth: buildAuth},
		client: c, api: opts.API, pkgs: opts.PackageConfigs, events: events, metrics: metrics, slots: slots, retries: newRetries(),
		cfg: opts.Config, wait: opts.CacheWait, now: opts.Now, started: opts.Now(), leftovers: opts.Leftovers,
		informers:    opts.Informers,
		moduleSlices: moduleSlices, moduleSliceWatch: opts.ModuleSlices, registryWaits: newRegistryWaiters(), scrape: opts.Scrape, settle: opts.DrainSettle, drains: newDrains(),
		resized: newResizedPods(),
	}
	if opts.Config.Mode == config.ModeBuildless {
		r.steps, r.git.auth = r.buildlessSteps(), buildlessAuth
	} else {
		r.steps = r.buildSteps()
	}
	return r
}

// step is one named part of a pass; its outcome says whether the pass goes
// on and when it comes again (steps.Run runs, times and logs the list).
type step = steps.Step[*pass]

// buildSteps build an image per Function with a Job and run it.
func (r *Reconciler) buildSteps() []step {
	return []step{
		{Name: "validate", Run: r.validate},
		{Name: "prerequisites", Run: r.prerequisites},
		{Name: "observe", Run: r.observe},
		{Name: "startup-cpu", Run: r.startupCPU},
		{Name: "source", Run: r.source},
		{Name: "build", Run: r.build},
		{Name: "deployment", Run: r.deployment},
		{Name: "service", Run: r.service(func(p *pass) *corev1.Service { return resources.Service(p.in) })},
		{Name: "hpa", Run: r.hpa},
		{Name: "running", Run: r.running},
		{Name: "rollout", Run: r.rollout},
	}
}

// buildlessSteps run the runtime image with the sources in the Pod, as
// release 1.13 does: no Job, no source ConfigMap, no HPA (scaleConfig has
// no effect there).
func (r *Reconciler) buildlessSteps() []step {
	return []step{
		{Name: "forget-build", Run: forgetBuild},
		{Name: "validate", Run: r.validate},
		{Name: "observe", Run: r.observeRunning},
		{Name: "startup-cpu", Run: r.startupCPU},
		{Name: "git", Run: r.buildlessGit},
		{Name: "configured", Run: configured},
		{Name: "deployment", Run: r.buildlessDeployment},
		{Name: "leftovers", Run: r.removeLeftovers},
		{Name: "service", Run: r.service(func(p *pass) *corev1.Service { return resources.BuildlessService(p.fn) })},
		{Name: "running", Run: r.running},
		{Name: "rollout", Run: r.rollout},
	}
}

// Reconcile runs one pass over a Function.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := logr.FromContextOrDiscard(ctx)
	fn := &v1alpha2.Function{}
	if err := r.client.Get(ctx, req.NamespacedName, fn); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(ctx, req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("reading Function %s: %w", req.NamespacedName, err)
	}
	if fn.DeletionTimestamp != nil {
		// Owner references remove the children; nothing to do.
		r.forget(ctx, req.NamespacedName)
		return ctrl.Result{}, nil
	}
	p := newPass(fn, &r.cfg, metav1.NewTime(r.now()))
	res, stepErr := steps.Run(ctx, p, r.steps, nil)
	if apierrors.HasStatusCause(stepErr, corev1.NamespaceTerminatingCause) {
		// The namespace is being deleted, and the Function with it: no
		// status, no retry (each would be refused the same way).
		log.V(1).Info("namespace terminating, pass ended", "error", stepErr.Error())
		return ctrl.Result{}, nil
	}
	mirrorStatus(p)
	later, err := r.writeStatus(ctx, p)
	if err != nil {
		return ctrl.Result{}, errors.Join(stepErr, err)
	}
	if stepErr != nil {
		return ctrl.Result{}, stepErr
	}
	res = steps.Sooner(res, later)
	if res.RequeueAfter > 0 {
		log.V(1).Info("requeue", "after", res.RequeueAfter)
	}
	return res, nil
}

// forget drops what the controller remembers about a Function that is gone.
func (r *Reconciler) forget(ctx context.Context, key types.NamespacedName) {
	if r.slots != nil {
		r.slots.Leave(key)
	}
	if r.leftovers != nil {
		r.leftovers.Forget(ctx, key)
	}
	r.retries.reset(key)
	r.registryWaits.remove(key)
	r.drains.forget(key)
	r.resized.forget(key)
	r.git.checks.forget(key)
}
