// Package app wires the Function controller into a controller-runtime
// manager: its scheme, a cache that holds only what the controller needs,
// the Function reconciler and the per-namespace copies.
package app

import (
	"fmt"
	"slices"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/discovery"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/internal/function/cleanup"
	"github.com/kyma-project/serverless-manager/operator/internal/function/config"
	"github.com/kyma-project/serverless-manager/operator/internal/function/copies"
	"github.com/kyma-project/serverless-manager/operator/internal/function/leftovers"
	"github.com/kyma-project/serverless-manager/operator/internal/function/reconciler"
	"github.com/kyma-project/serverless-manager/operator/internal/function/resources"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
	"github.com/kyma-project/serverless-manager/operator/pkg/registryagent"
)

// DefaultWorkers is how many Functions are reconciled at once. The build
// cap does not depend on it (BuildSlots locks).
const DefaultWorkers = 4

// registryCleanupPauseFor is the longest a registry clean-up waits for
// running builds to end; builds are held back meanwhile.
const registryCleanupPauseFor = 2 * time.Minute

// NewScheme has the built-in kinds and Functions.
func NewScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := v1alpha2.AddToScheme(s); err != nil {
		return nil, err
	}
	return s, nil
}

// CacheOptions keep memory independent of the cluster's size: Functions
// are cached whole; the kinds a Function owns only when labelled
// managed-by=function-controller, build Jobs and build Pods slimmed to what
// the reconciler reads; ConfigMaps, Secrets and ServiceAccounts
// likewise (the per-namespace copies carry that label), and also when
// labelled managed-by=user (a copy its user took over: the cache is then
// the whole truth about copies, and the reconciler needs no API read for
// them), except in the base namespace, where the base objects (label
// serverless.kyma-project.io/config) are cached — and there all
// ConfigMaps, because a Function in the base namespace has its source
// ConfigMap there, and one selector cannot match both. Namespaces are read
// as metadata (copies). Managed fields are
// dropped from every cached object: nothing reads them, and with 300
// Functions they cost about 6 MiB (make bench); an update sent without them
// keeps the server's.
//
// EndpointSlices are cached when labelled managed-by=function-controller:
// the activator slices of scale-to-zero Functions and the slices the
// cluster makes for their Services (it copies the Service's labels); the
// slices of the module's own Services are in a cache of their own
// (moduleSliceCache).
//
// In buildless mode only Functions, their Deployments, Services and
// EndpointSlices, and the registry Secret of the base namespace (the registry clean-up) are
// cached: no Jobs, build Pods, ConfigMaps, ServiceAccounts or copies. A read
// of any other kind through the cache is an error there, not a new
// cluster-wide watch.
func CacheOptions(cfg *config.Config) (cache.Options, error) {
	managed := labels.SelectorFromSet(labels.Set{v1alpha2.LabelManagedBy: v1alpha2.ManagedByController})
	req, err := labels.NewRequirement(v1alpha2.LabelConfig, selection.Exists, nil)
	if err != nil {
		return cache.Options{}, err
	}
	bases := labels.NewSelector().Add(*req)
	if cfg.Mode == config.ModeBuildless {
		return cache.Options{
			DefaultTransform:            cache.TransformStripManagedFields(),
			ReaderFailOnMissingInformer: true,
			ByObject: map[client.Object]cache.ByObject{
				&v1alpha2.Function{}: {},
				&appsv1.Deployment{}: {Label: managed},
				&corev1.Service{}:    {Label: managed},
				// Scale to zero: the activator slices and the Services' own
				// (which copy the Services' labels).
				&discoveryv1.EndpointSlice{}: {Label: managed},
				&corev1.Secret{}:             {Namespaces: map[string]cache.Config{cfg.BaseNamespace: {LabelSelector: bases}}},
			},
		}, nil
	}
	ours, err := labels.NewRequirement(v1alpha2.LabelManagedBy, selection.In,
		[]string{v1alpha2.ManagedByController, v1alpha2.ManagedByUser})
	if err != nil {
		return cache.Options{}, err
	}
	copies := labels.NewSelector().Add(*ours)
	perNamespace := func(base labels.Selector) cache.ByObject {
		return cache.ByObject{Namespaces: map[string]cache.Config{
			cfg.BaseNamespace:   {LabelSelector: base},
			cache.AllNamespaces: {LabelSelector: copies},
		}}
	}
	return cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&batchv1.Job{}:                           {Label: managed, Transform: jobTransform},
			&appsv1.Deployment{}:                     {Label: managed},
			&corev1.Service{}:                        {Label: managed},
			&discoveryv1.EndpointSlice{}:             {Label: managed},
			&autoscalingv2.HorizontalPodAutoscaler{}: {Label: managed},
			&corev1.ConfigMap{}:                      perNamespace(labels.Everything()),
			&corev1.Secret{}:                         perNamespace(bases),
			&corev1.ServiceAccount{}:                 perNamespace(bases),
			// Build Pods only, for their steps' termination messages.
			&corev1.Pod{}: {Label: resources.BuildPodSelector(), Transform: buildPodTransform},
		},
	}, nil
}

// Options of the wiring.
type Options struct {
	Config config.Config
	// Workers is the number of concurrent Function reconciles (DefaultWorkers if 0).
	Workers int
	// Metrics is where the build metrics are registered.
	Metrics prometheus.Registerer
	// DrainSettle is how long a scale-to-zero Function's drain waits
	// before its first scrape (reconciler.DefaultDrainSettle if 0).
	DrainSettle time.Duration
}

// Setup adds the Function reconciler and, in build mode, the copies
// reconciler to mgr, or in buildless mode the removal of what build mode
// left. The returned tracker backs the liveness check.
func Setup(mgr ctrl.Manager, opts Options) (*reconciler.InFlight, error) {
	if opts.Workers == 0 {
		opts.Workers = DefaultWorkers
	}
	metrics, err := reconciler.NewMetrics(opts.Metrics)
	if err != nil {
		return nil, fmt.Errorf("registering metrics: %w", err)
	}
	if !opts.Config.StartupCPULimit.IsZero() {
		resizable, err := podsResizable(mgr.GetConfig())
		if err != nil {
			return nil, err
		}
		if !resizable {
			mgr.GetLogger().Info("the API server cannot resize Pods in place (no pods/resize): scale-to-zero Functions start with their own CPU limit")
			opts.Config.StartupCPULimit = resource.Quantity{}
		}
	}
	rOpts := reconciler.Options{Config: opts.Config, API: mgr.GetAPIReader(), Informers: mgr.GetCache(), DrainSettle: opts.DrainSettle}
	if rOpts.ModuleSlices, err = moduleSliceCache(mgr, opts.Config.BaseNamespace); err != nil {
		return nil, err
	}
	var slots *reconciler.BuildSlots
	if opts.Config.Mode == config.ModeBuildless {
		sweeper := leftovers.New(mgr.GetAPIReader(), mgr.GetClient(), opts.Config.BaseNamespace, mgr.GetLogger().WithName("leftovers"))
		if err := mgr.Add(sweeper); err != nil {
			return nil, fmt.Errorf("adding the removal of build mode's leftovers: %w", err)
		}
		rOpts.Leftovers = sweeper
	} else {
		slots = reconciler.NewBuildSlots(mgr.GetCache(), opts.Config.Build.MaxSimultaneousJobs, metrics)
		if rOpts.PackageConfigs, err = packageConfigCache(mgr, opts.Config.PackageRegistryConfigSecretName); err != nil {
			return nil, err
		}
	}
	r := reconciler.New(mgr.GetClient(), mgr.GetEventRecorder(module.FunctionController().Name), metrics, slots, rOpts)
	inflight := reconciler.NewInFlight()
	if err := r.SetupWithManager(mgr, opts.Workers, inflight); err != nil {
		return nil, fmt.Errorf("setting up the Function controller: %w", err)
	}
	var builds cleanup.Builds
	if slots != nil {
		builds = slots
	}
	cleaner := cleanup.New(cleanup.Cleaner{
		Reader: mgr.GetClient(), API: mgr.GetAPIReader(), Informers: mgr.GetCache(), Builds: builds,
		Connect: func(address string, creds authn.Basic, insecure bool) (cleanup.Registry, cleanup.GarbageCollector, error) {
			reg, err := cleanup.NewRemoteRegistry(address, &creds, insecure, nil)
			agent := &registryagent.Client{URL: registryagent.URL(opts.Config.BaseNamespace), Username: creds.Username, Password: creds.Password}
			return reg, agent, err
		},
		Repositories: cleanup.Repositories{Client: mgr.GetClient(), Namespace: opts.Config.BaseNamespace},
		Config:       &opts.Config, Delay: opts.Config.RegistryCleanupDelay, Interval: opts.Config.RegistryCleanupInterval,
		PauseFor: registryCleanupPauseFor, Log: mgr.GetLogger().WithName("registry-cleanup"),
	})
	if err := mgr.Add(cleaner); err != nil {
		return nil, fmt.Errorf("adding the registry clean-up: %w", err)
	}
	if opts.Config.Mode == config.ModeBuildless {
		return inflight, nil
	}
	cfg := opts.Config
	if err := copies.New(mgr.GetClient(), mgr.GetAPIReader(), &cfg).SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("setting up the copies controller: %w", err)
	}
	return inflight, nil
}

// podsResizable reports whether the API server serves pods/resize
// (Kubernetes 1.33 and later: in-place Pod resize), which the startup CPU
// of scale-to-zero Functions needs.
func podsResizable(cfg *rest.Config) (bool, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return false, fmt.Errorf("discovery client: %w", err)
	}
	list, err := dc.ServerResourcesForGroupVersion("v1")
	if err != nil {
		return false, fmt.Errorf("discovering the core API's resources: %w", err)
	}
	return slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == "pods/resize" }), nil
}

// jobTransform keeps of a build Job what the reconciler reads.
func jobTransform(o any) (any, error) {
	if j, ok := o.(*batchv1.Job); ok {
		return resources.SlimJob(j), nil
	}
	return o, nil
}

// packageConfigCache holds the package registry config Secrets (users
// create them, unlabelled, in their namespaces), selected by name: a build
// reads its namespace's from memory, whatever the number of Functions.
func packageConfigCache(mgr ctrl.Manager, name string) (cache.Cache, error) {
	c, err := cache.New(mgr.GetConfig(), cache.Options{
		Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Secret{}: {Field: fields.OneTermEqualSelector("metadata.name", name)},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("creating the package registry config cache: %w", err)
	}
	if err := mgr.Add(c); err != nil {
		return nil, fmt.Errorf("adding the package registry config cache: %w", err)
	}
	return c, nil
}

// moduleSliceCache holds the EndpointSlices of the module's own Services
// that passes read (reconciler.ModuleSliceSelector, in the module
// namespace). A cache of its own, as the main cache's EndpointSlices are
// selected by another label in every namespace.
func moduleSliceCache(mgr ctrl.Manager, namespace string) (cache.Cache, error) {
	sel, err := reconciler.ModuleSliceSelector()
	if err != nil {
		return nil, err
	}
	c, err := cache.New(mgr.GetConfig(), cache.Options{
		Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&discoveryv1.EndpointSlice{}: {Namespaces: map[string]cache.Config{namespace: {}}, Label: sel},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("creating the module Services' EndpointSlice cache: %w", err)
	}
	if err := mgr.Add(c); err != nil {
		return nil, fmt.Errorf("adding the module Services' EndpointSlice cache: %w", err)
	}
	return c, nil
}

// buildPodTransform keeps of a build Pod what the reconciler reads: its
// labels, the termination of its containers, and while the scheduler finds
// no node for it, its PodScheduled condition (a placed Pod keeps none, so
// builds at rest cost nothing more).
func buildPodTransform(o any) (any, error) {
	pod, ok := o.(*corev1.Pod)
	if !ok {
		return o, nil
	}
	slim := &corev1.Pod{
		TypeMeta: pod.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID, ResourceVersion: pod.ResourceVersion,
			CreationTimestamp: pod.CreationTimestamp, DeletionTimestamp: pod.DeletionTimestamp,
			Labels: pod.Labels, OwnerReferences: pod.OwnerReferences,
		},
		Status: corev1.PodStatus{Phase: pod.Status.Phase},
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			slim.Status.Conditions = []corev1.PodCondition{{Type: c.Type, Status: c.Status, Reason: c.Reason, Message: c.Message}}
		}
	}
	slim.Status.InitContainerStatuses = terminations(pod.Status.InitContainerStatuses)
	slim.Status.ContainerStatuses = terminations(pod.Status.ContainerStatuses)
	return slim, nil
}

func terminations(in []corev1.ContainerStatus) []corev1.ContainerStatus {
	out := make([]corev1.ContainerStatus, len(in))
	for i, s := range in {
		out[i] = corev1.ContainerStatus{Name: s.Name, State: corev1.ContainerState{Terminated: s.State.Terminated}}
	}
	return out
}
