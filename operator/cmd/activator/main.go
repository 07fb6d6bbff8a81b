// Command activator holds requests for Functions scaled to zero, wakes
// them and forwards the requests once a replica is ready; its leader scales
// idle Functions to zero (docs/contributor/scale-to-zero.md). Every replica
// listens on the port of each of the activator's EndpointSlices.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/internal/activator"
	"github.com/kyma-project/serverless-manager/operator/internal/logging"
	"github.com/kyma-project/serverless-manager/operator/pkg/fips"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
	"github.com/kyma-project/serverless-manager/operator/pkg/scaletozero"
)

// Environment of the activator; the chart sets them.
const (
	// EnvNamespace is the activator's namespace (the downward API), where
	// its leader Lease is.
	EnvNamespace = "POD_NAMESPACE"
	// EnvHoldTimeout bounds how long a request is held for a replica (a Go
	// duration; default 1m).
	EnvHoldTimeout = "ACTIVATOR_HOLD_TIMEOUT"
	// EnvPodIP is the replica's Pod address (the downward API): a stopping
	// replica serves until no EndpointSlice lists it.
	EnvPodIP = "POD_IP"
	// EnvMesh is the service mesh the activator runs in: "istio" (mesh
	// mode, docs/contributor/scale-to-zero.md) or none.
	EnvMesh = "ACTIVATOR_MESH"
)

type config struct {
	namespace      string
	address        string
	holdTimeout    time.Duration
	metricsAddr    string
	probeAddr      string
	leaderElection bool
	logLevel       string
	logFormat      string
	mesh           string
}

// parse reads the flags over the environment's defaults.
func parse(args []string, lookup func(string) (string, bool), out io.Writer) (config, error) {
	id := module.Activator()
	cfg := config{holdTimeout: scaletozero.DefaultHoldTimeout}
	if v, ok := lookup(EnvHoldTimeout); ok && v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return cfg, fmt.Errorf("%s: %q is not a duration such as 1m or 90s: %w", EnvHoldTimeout, v, err)
		}
		cfg.holdTimeout = d
	}
	cfg.namespace, _ = lookup(EnvNamespace)
	cfg.address, _ = lookup(EnvPodIP)
	cfg.mesh, _ = lookup(EnvMesh)
	flags := flag.NewFlagSet(id.Binary, flag.ContinueOnError)
	flags.SetOutput(out)
	flags.DurationVar(&cfg.holdTimeout, "hold-timeout", cfg.holdTimeout, "how long a request waits for a replica (env "+EnvHoldTimeout+")")
	flags.StringVar(&cfg.namespace, "namespace", cfg.namespace, "namespace of the leader Lease (env "+EnvNamespace+")")
	flags.StringVar(&cfg.address, "address", cfg.address, "this replica's Pod address; when stopping it serves until no EndpointSlice lists it (env "+EnvPodIP+")")
	flags.StringVar(&cfg.metricsAddr, "metrics-bind-address", ":"+strconv.Itoa(id.MetricsPort), "metrics address")
	flags.StringVar(&cfg.probeAddr, "health-probe-bind-address", ":"+strconv.Itoa(id.HealthPort), "probes address (/healthz, /readyz)")
	flags.BoolVar(&cfg.leaderElection, "leader-elect", true, "elect a leader (Lease "+module.ActivatorLeaseName+") to scale idle Functions to zero")
	flags.StringVar(&cfg.logLevel, "log-level", "info", "debug, info, warn or error")
	flags.StringVar(&cfg.logFormat, "log-format", "json", "json or text")
	flags.StringVar(&cfg.mesh, "mesh", cfg.mesh, "the service mesh the activator's sidecar belongs to: "+v1alpha1.MeshIstio+", or empty for none (env "+EnvMesh+")")
	if err := flags.Parse(args); err != nil {
		return cfg, err
	}
	if flags.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected argument %q", flags.Arg(0))
	}
	if cfg.mesh != "" && cfg.mesh != v1alpha1.MeshIstio {
		return cfg, fmt.Errorf("the mesh %q is none the activator knows: %q or empty", cfg.mesh, v1alpha1.MeshIstio)
	}
	if cfg.holdTimeout < time.Second {
		return cfg, fmt.Errorf("the hold timeout %s is shorter than 1s", cfg.holdTimeout)
	}
	if cfg.leaderElection && cfg.namespace == "" {
		return cfg, fmt.Errorf("no namespace for the leader Lease: set %s or --namespace", EnvNamespace)
	}
	return cfg, nil
}

// The leader's Lease in the activator's namespace: create (a name cannot
// bound it), and get and update on its own name only. Leader election
// records its events on the Lease through the core API (controller-runtime
// gives it the core recorder, not the events.k8s.io one the activator's
// own events use), so create and patch core events there too.
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=create,namespace=kyma-system
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;update,resourceNames=serverless-activator,namespace=kyma-system
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch,namespace=kyma-system

func main() {
	fips.RefuseUnlessEnforced(module.Activator().Binary)
	name := module.Activator().Binary
	cfg, err := parse(os.Args[1:], os.LookupEnv, os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(2)
	}
	if err := run(cfg); err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(1)
	}
}

func run(cfg config) error {
	logger, _, err := logging.New(cfg.logLevel, cfg.logFormat)
	if err != nil {
		return err
	}
	ctrl.SetLogger(logger)
	ctx := ctrl.SetupSignalHandler()
	id := module.Activator()
	restCfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("loading kubeconfig: %w", err)
	}
	restCfg.UserAgent = id.Name
	scheme, err := activator.NewScheme()
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(restCfg, managerOptions(cfg, scheme))
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	if err := activator.Setup(ctx, mgr, activator.AppOptions{
		HoldTimeout: cfg.holdTimeout, Metrics: crmetrics.Registry, Events: mgr.GetEventRecorder(id.Name),
		Address: cfg.address, Mesh: cfg.mesh,
	}); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("cache", func(r *http.Request) error {
		if !mgr.GetCache().WaitForCacheSync(r.Context()) {
			return errors.New("the cache is not synced")
		}
		return nil
	}); err != nil {
		return err
	}
	logger.Info("starting", "namespace", cfg.namespace, "address", cfg.address, "holdTimeout", cfg.holdTimeout.String(), "leaderElection", cfg.leaderElection, "mesh", cfg.mesh)
	return mgr.Start(ctx)
}

// managerOptions are the activator's controller-runtime settings.
func managerOptions(cfg config, scheme *runtime.Scheme) manager.Options {
	return manager.Options{
		Scheme:                        scheme,
		Cache:                         activator.CacheOptions(),
		Metrics:                       metricsserver.Options{BindAddress: cfg.metricsAddr},
		HealthProbeBindAddress:        cfg.probeAddr,
		LeaderElection:                cfg.leaderElection,
		LeaderElectionID:              module.ActivatorLeaseName,
		LeaderElectionNamespace:       cfg.namespace,
		LeaderElectionResourceLock:    "leases",
		LeaderElectionReleaseOnCancel: true,
		// A stopping replica serves while EndpointSlices list it, then
		// answers what it holds within the hold timeout; the Pod's
		// termination grace period is longer than both.
		GracefulShutdownTimeout: ptrTo(activator.DefaultLeave + cfg.holdTimeout + 5*time.Second),
		Client:                  client.Options{FieldOwner: module.Activator().Name},
	}
}

func ptrTo[T any](v T) *T { return &v }
