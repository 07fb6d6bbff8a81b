// Command manager is the Serverless Manager: it installs, configures,
// upgrades and uninstalls Kyma's Serverless module from a Serverless CR.
package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/kyma-project/serverless-manager/charts"
	"github.com/kyma-project/serverless-manager/operator/internal/logging"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/app"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/reconciler"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/values"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/watch"
	"github.com/kyma-project/serverless-manager/operator/pkg/fips"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
	"github.com/kyma-project/serverless-manager/operator/pkg/registryagent"
)

// imageKeys are the chart's image values; IMAGE_<KEY> overrides one
// (e.g. IMAGE_FUNCTION_CONTROLLER=mirror.example/function-controller:1.8.4).
var imageKeys = []string{
	"function_controller", "function_buildless_init", "registry_agent", "activator",
	"function_runtime_nodejs20", "function_runtime_nodejs22", "function_runtime_nodejs24", "function_runtime_python312",
	"registry", "registry_init",
}

type config struct {
	namespace   string
	metricsAddr string
	probeAddr   string
	chartPath   string
	logLevel    string
	logFormat   string
	logConfig   string
	// registryUsageEvery is how often the internal registry is measured.
	registryUsageEvery time.Duration
	leaderElect        string
	nodePorts          string
}

func main() {
	fips.RefuseUnlessEnforced(module.Manager().Binary)
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "serverless-manager:", err)
		os.Exit(1)
	}
}

func parseFlags() config {
	var c config
	flag.StringVar(&c.namespace, "namespace", envOr("SERVERLESS_NAMESPACE", module.DefaultNamespace), "the manager's own namespace (leader election, its permissions); the module is installed into the served Serverless CR's namespace, whichever it is")
	flag.StringVar(&c.metricsAddr, "metrics-bind-address", ":8080", "metrics endpoint address; 0 disables it")
	flag.StringVar(&c.probeAddr, "health-probe-bind-address", ":8081", "health and readiness probe address")
	flag.StringVar(&c.chartPath, "chart-path", os.Getenv("CHART_PATH"), "render this chart directory instead of the embedded chart (development)")
	flag.StringVar(&c.logLevel, "log-level", envOr("LOG_LEVEL", "info"), "log level: debug, info, warn, error")
	flag.StringVar(&c.logFormat, "log-format", envOr("LOG_FORMAT", "json"), "log format: json or console")
	flag.StringVar(&c.logConfig, "log-config", os.Getenv("LOG_CONFIG"), "YAML file with logLevel, watched to change the level at run time")
	flag.StringVar(&c.leaderElect, "leader-elect", "auto", "leader election: true, false, or auto (on inside a cluster)")
	flag.DurationVar(&c.registryUsageEvery, "registry-usage-every", 5*time.Minute, "how often the internal registry's usage is measured for the status")
	flag.StringVar(&c.nodePorts, "node-port-range", envOr("NODE_PORT_RANGE", values.DefaultNodePortRange().String()), "the API server's --service-node-port-range; the internal registry's NodePort is picked from it")
	flag.Parse()
	return c
}

func run() error {
	cfg := parseFlags()
	logger, level, err := logging.New(cfg.logLevel, cfg.logFormat)
	if err != nil {
		return err
	}
	ctrl.SetLogger(logger)
	ctx := ctrl.SetupSignalHandler()
	if cfg.logConfig != "" {
		if err := logging.Watch(ctx, cfg.logConfig, level, logger); err != nil {
			return fmt.Errorf("watching %s: %w", cfg.logConfig, err)
		}
	}

	// Checked at start (fips.RefuseUnlessEnforced); here it only fails on a
	// value that is not a boolean, which the check has refused already.
	fipsMode, err := fips.Requested(os.LookupEnv)
	if err != nil {
		return err
	}

	nodePorts, err := values.ParseNodePortRange(cfg.nodePorts)
	if err != nil {
		return fmt.Errorf("--node-port-range: %w", err)
	}

	restCfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("loading kubeconfig: %w", err)
	}
	restCfg.QPS, restCfg.Burst = 50, 100
	restCfg.UserAgent = module.ManagerName

	scheme, err := watch.NewScheme()
	if err != nil {
		return err
	}
	cacheOpts, err := watch.CacheOptions(scheme)
	if err != nil {
		return err
	}
	leaderElect, err := leaderElection(cfg.leaderElect)
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(restCfg, manager.Options{
		Scheme:                  scheme,
		Cache:                   cacheOpts,
		Metrics:                 metricsserver.Options{BindAddress: cfg.metricsAddr},
		HealthProbeBindAddress:  cfg.probeAddr,
		LeaderElection:          leaderElect,
		LeaderElectionID:        module.ManagerLeaseName,
		LeaderElectionNamespace: cfg.namespace,
		// A replica that stops hands over at once instead of after the lease expires.
		LeaderElectionReleaseOnCancel: true,
		Client:                        client.Options{Cache: &client.CacheOptions{Unstructured: false}},
	})
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}

	chartFS, err := chartFiles(cfg.chartPath)
	if err != nil {
		return err
	}
	chartVersion, err := app.Setup(mgr, app.Options{
		Chart:   chartFS,
		Metrics: crmetrics.Registry,
		Options: reconciler.Options{Namespace: cfg.namespace, ImageOverrides: imageOverrides(os.LookupEnv, fipsMode), FIPSMode: fipsMode, NewSecret: randomAlphanumeric, NodePortRange: nodePorts,
			RegistryUsage: registryUsage, RegistryUsageEvery: cfg.registryUsageEvery},
	})
	if err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}
	logger.Info("starting", "namespace", cfg.namespace, "chart", chartVersion, "leaderElection", leaderElect, "fipsMode", fipsMode)
	return mgr.Start(ctx)
}

func chartFiles(path string) (fs.FS, error) {
	if path == "" {
		return charts.Serverless(), nil
	}
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("chart path: %w", err)
	}
	return os.DirFS(path), nil
}

func leaderElection(v string) (bool, error) {
	switch v {
	case "true":
		return true, nil
	case "false":
		return false, nil
	case "auto":
		return os.Getenv("KUBERNETES_SERVICE_HOST") != "", nil
	}
	return false, errors.New("--leader-elect: want true, false or auto")
}

// registryUsage asks the internal registry's agent, through its Service.
func registryUsage(ctx context.Context, namespace, username, password string) (registryagent.Usage, error) {
	c := &registryagent.Client{URL: registryagent.URL(namespace), Username: username, Password: password}
	return c.Usage(ctx)
}

// imageOverrides are the IMAGE_<KEY> variables; in FIPS mode
// IMAGE_<KEY>_FIPS wins, as release 1.13's operator reads it.
func imageOverrides(lookup func(string) (string, bool), fipsMode bool) map[string]string {
	out := map[string]string{}
	for _, k := range imageKeys {
		name := "IMAGE_" + strings.ToUpper(k)
		if v, _ := lookup(name); v != "" {
			out[k] = v
		}
		if v, _ := lookup(name + "_FIPS"); fipsMode && v != "" {
			out[k] = v
		}
	}
	return out
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

const alphanumerics = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

// randomAlphanumeric returns n characters from crypto/rand (whose Read
// never fails), without modulo bias: bytes past the last full multiple of
// the alphabet's size are dropped.
func randomAlphanumeric(n int) string {
	const limit = 256 - 256%len(alphanumerics)
	out := make([]byte, 0, n)
	buf := make([]byte, 2*n)
	for len(out) < n {
		_, _ = rand.Read(buf)
		for _, b := range buf {
			if int(b) < limit && len(out) < n {
				out = append(out, alphanumerics[int(b)%len(alphanumerics)])
			}
		}
	}
	return string(out)
}
