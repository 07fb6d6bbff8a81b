// Package app wires the manager's parts together, so that main and the
// integration tests run exactly the same controller.
package app

import (
	"fmt"
	"io/fs"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/metadata"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/kyma-project/serverless-manager/operator/internal/manager/apply"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/metrics"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/reconciler"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/render"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/scope"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/watch"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
)

// Options of the Serverless controller.
type Options struct {
	// Chart is the Serverless chart's root.
	Chart fs.FS
	// Metrics registry; nil disables the manager's own metrics.
	Metrics prometheus.Registerer
	reconciler.Options
}

// Setup adds the Serverless controller to mgr, whose cache must have been
// built with watch.CacheOptions; the module's namespaced objects are cached
// by a scope.Scope Setup adds, starting in opts.Namespace (the manager's
// own) and following the served CR. It returns the chart version.
func Setup(mgr ctrl.Manager, opts Options) (string, error) {
	chrt, err := render.LoadChart(opts.Chart)
	if err != nil {
		return "", err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(mgr.GetConfig())
	if err != nil {
		return "", fmt.Errorf("creating a discovery client: %w", err)
	}
	caps, err := render.DiscoverCapabilities(dc)
	if err != nil {
		return "", err
	}
	var m reconciler.Metrics
	if opts.Metrics != nil {
		mm, err := metrics.New(opts.Metrics)
		if err != nil {
			return "", fmt.Errorf("registering metrics: %w", err)
		}
		m = mm
	}
	meta, err := metadata.NewForConfigAndClient(mgr.GetConfig(), mgr.GetHTTPClient())
	if err != nil {
		return "", fmt.Errorf("creating a metadata client: %w", err)
	}
	named := watch.NewNamed(meta, mgr.GetRESTMapper())
	if err := mgr.Add(named); err != nil {
		return "", err
	}
	opts.Named = named
	sc, err := newScope(mgr, opts.Namespace)
	if err != nil {
		return "", err
	}
	opts.Scope = sc
	c := scope.Client(mgr.GetClient(), sc)
	live := watch.NewScopedLive(c, mgr.GetAPIReader(), mgr.GetScheme(), sc)
	r := reconciler.New(c, mgr.GetAPIReader(), live,
		render.New(chrt, caps),
		apply.New(c, mgr.GetAPIReader(), live, mgr.GetRESTMapper()),
		mgr.GetEventRecorder(module.ManagerName), m, opts.Options)
	if err := r.SetupWithManager(mgr); err != nil {
		return "", fmt.Errorf("setting up the controller: %w", err)
	}
	return chrt.Metadata.Version, nil
}

// newScope adds to mgr the namespace cache of the module, starting in home;
// the manager binds its namespaced ClusterRole to its ServiceAccount in any
// other namespace the module moves to.
func newScope(mgr ctrl.Manager, home string) (*scope.Scope, error) {
	newCache := func(namespace string) (cache.Cache, error) {
		opts, err := watch.NamespaceCacheOptions(mgr.GetScheme(), namespace)
		if err != nil {
			return nil, err
		}
		opts.HTTPClient, opts.Mapper = mgr.GetHTTPClient(), mgr.GetRESTMapper()
		return cache.New(mgr.GetConfig(), opts)
	}
	binder := scope.NewBinder(mgr.GetClient(), mgr.GetAPIReader(), home, module.Manager().ServiceAccount)
	sc, err := scope.New(home, newCache, binder, 0)
	if err != nil {
		return nil, err
	}
	if err := mgr.Add(sc); err != nil {
		return nil, err
	}
	return sc, nil
}
