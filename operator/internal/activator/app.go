package activator

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
	"github.com/kyma-project/serverless-manager/operator/pkg/scaletozero"
)

// The activator's permissions (docs/contributor/scale-to-zero.md,
// "Permissions of the Activator"). The Lease Role is the chart's: a
// marker cannot name the Lease.
// +kubebuilder:rbac:groups=serverless.kyma-project.io,resources=functions,verbs=get;list;watch
// +kubebuilder:rbac:groups=serverless.kyma-project.io,resources=functions/scale,verbs=get;update
// +kubebuilder:rbac:groups=discovery.k8s.io,resources=endpointslices,verbs=list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// AppOptions configure the activator.
type AppOptions struct {
	// HoldTimeout bounds a held request; scaletozero.DefaultHoldTimeout if zero.
	HoldTimeout time.Duration
	// Metrics gets the activator's metrics.
	Metrics prometheus.Registerer
	// Events records failed wakes.
	Events EventRecorder
	// Address is the replica's Pod address (Listeners.Address).
	Address string
	// Mesh is the service mesh the activator runs in (v1alpha1.MeshIstio,
	// docs/contributor/scale-to-zero.md, Mesh Mode); "" none.
	Mesh string
}

// Setup adds the activator to mgr: the listeners and Holder on every
// replica, the scale-down loop on the leader. mgr's cache must have been
// built with CacheOptions.
func Setup(ctx context.Context, mgr manager.Manager, opts AppOptions) error {
	id := module.Activator()
	log := mgr.GetLogger().WithName("activator")
	kube := &Kube{Cache: mgr.GetCache(), Client: mgr.GetClient(), Events: opts.Events, Probe: HTTPProbe(probeClient()), Mesh: opts.Mesh}
	hopts := Options{Timeout: opts.HoldTimeout, Registerer: opts.Metrics, Recorder: kube, Timeouts: kube}
	if opts.Mesh != "" {
		hopts.Authority = func(fn types.NamespacedName) string { return scaletozero.MeshAuthority(fn.Namespace, fn.Name) }
	}
	holder, err := NewHolder(kube, kube, hopts)
	if err != nil {
		return err
	}
	listeners := &Listeners{
		Cache: mgr.GetCache(), Handler: holder.Handler, Log: log.WithName("listeners"),
		Reserved:        []int{id.MetricsPort, id.HealthPort},
		ShutdownTimeout: opts.HoldTimeout,
		Address:         opts.Address,
	}
	if err := mgr.Add(listeners); err != nil {
		return fmt.Errorf("adding the listeners: %w", err)
	}
	if err := mgr.AddReadyzCheck("listeners", listeners.Ready); err != nil {
		return fmt.Errorf("adding the listeners' readiness check: %w", err)
	}
	loop, err := NewScaleDowns(ScaleDowns{Cache: mgr.GetCache(), Client: mgr.GetClient(), Kube: kube,
		Log: log.WithName("scale-down")}, opts.Metrics)
	if err != nil {
		return err
	}
	if err := mgr.Add(loop); err != nil {
		return fmt.Errorf("adding the scale-down loop: %w", err)
	}
	return Notify(ctx, mgr.GetCache(), kube, listeners)
}

// NewScheme has the kinds the activator reads and writes: the cluster's
// and Functions.
func NewScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, fmt.Errorf("building the scheme: %w", err)
	}
	if err := v1alpha2.AddToScheme(s); err != nil {
		return nil, fmt.Errorf("building the scheme: %w", err)
	}
	return s, nil
}

// Notify tells kube of every change of a Function or an EndpointSlice, and
// listeners of every change of an EndpointSlice.
func Notify(ctx context.Context, c cache.Cache, kube *Kube, listeners *Listeners) error {
	on := func(obj client.Object, calls ...func()) error {
		inf, err := c.GetInformer(ctx, obj)
		if err != nil {
			return fmt.Errorf("watching %T: %w", obj, err)
		}
		changed := func() {
			for _, call := range calls {
				call()
			}
		}
		_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { changed() },
			UpdateFunc: func(any, any) { changed() },
			DeleteFunc: func(any) { changed() },
		})
		if err != nil {
			return fmt.Errorf("watching %T: %w", obj, err)
		}
		return nil
	}
	if err := on(&v1alpha2.Function{}, kube.Changed); err != nil {
		return err
	}
	return on(&discoveryv1.EndpointSlice{}, kube.Changed, listeners.Changed)
}
