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

	"github.com/kyma-project/serverless-manager/operator/internal/manager/apply"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/metrics"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/reconciler"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/render"
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
// built with watch.CacheOptions for opts.Namespace. It returns the chart version.
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
	live := watch.NewLive(mgr.GetClient(), mgr.GetAPIReader(), mgr.GetScheme(), opts.Namespace)
	r := reconciler.New(mgr.GetClient(), mgr.GetAPIReader(), live,
		render.New(chrt, caps),
		apply.New(mgr.GetClient(), mgr.GetAPIReader(), live, mgr.GetRESTMapper()),
		mgr.GetEventRecorder(module.ManagerName), m, opts.Options)
	if err := r.SetupWithManager(mgr); err != nil {
		return "", fmt.Errorf("setting up the controller: %w", err)
	}
	return chrt.Metadata.Version, nil
}
