// Command function-controller builds and runs Functions
// (serverless.kyma-project.io/v1alpha2): source ConfigMap → build Job →
// Deployment, Service and HPA, plus the per-namespace copies of the
// registry Secret, the runtime Dockerfiles and the Function ServiceAccount;
// or, with APP_FUNCTION_MODE=buildless, release 1.13's Deployment and
// Service per Function (no build).
// It is configured exactly like the published 1.8.4 controller: APP_*
// environment variables and the log configuration file.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/internal/function/app"
	"github.com/kyma-project/serverless-manager/operator/internal/function/config"
	"github.com/kyma-project/serverless-manager/operator/internal/function/eject"
	"github.com/kyma-project/serverless-manager/operator/internal/logging"
	"github.com/kyma-project/serverless-manager/operator/pkg/fips"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
)

// Leader election uses a Lease in the base namespace, and records its
// events on the Lease through the core API (controller-runtime gives it the
// core recorder, not the events.k8s.io one the controller's own events use).
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;patch;delete,namespace=kyma-system
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch,namespace=kyma-system

func main() {
	// Before the subcommands: the build Job's steps run this binary too.
	fips.RefuseUnlessEnforced(module.FunctionController().Binary)
	// The build Job's init container runs this image as `fetch`.
	if len(os.Args) > 1 && os.Args[1] == "fetch" {
		os.Exit(runFetch(context.Background(), os.LookupEnv, os.Stdout, os.Stderr, terminationLog))
	}
	// Its other init container and its main container run it as `build`.
	if len(os.Args) > 1 && os.Args[1] == "build" {
		os.Exit(runBuild(context.Background(), os.Args[2:], os.LookupEnv, os.Stdout, os.Stderr, terminationLog))
	}
	flags := flag.NewFlagSet(module.FunctionController().Binary, flag.ExitOnError)
	flags.Usage = func() { usage(flags) }
	// No flags: the configuration is the environment (as 1.8.4); --help
	// still prints it and exits 0.
	_ = flags.Parse(os.Args[1:])
	// An unknown subcommand (say `registry-agent`, now its own binary) must
	// not start the controller.
	if flags.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "%s: unknown subcommand %q\n", flags.Name(), flags.Arg(0))
		flags.Usage()
		os.Exit(2)
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, module.FunctionController().Binary+":", err)
		os.Exit(1)
	}
}

func usage(flags *flag.FlagSet) {
	out := flags.Output()
	fmt.Fprintf(out, "Usage: %s\n       %s fetch   (build Job init container: writes APP_REPOSITORY_COMMIT of\n"+
		"                 APP_REPOSITORY_URL into APP_MOUNT_PATH; see APP_REPOSITORY_*)\n"+
		"       %s build prepare|image   (build Job steps: dependency key and cache;\n"+
		"                 layers pushed to APP_BUILD_DESTINATION; see APP_BUILD_*)\n\n", flags.Name(), flags.Name(), flags.Name())
	fmt.Fprintln(out, "Builds and runs Functions (serverless.kyma-project.io/v1alpha2). Configured by environment")
	fmt.Fprintln(out, "variables (empty = default) and the log configuration file (logLevel, logFormat json|text;")
	fmt.Fprintln(out, "the level is re-read when the file changes). Kubernetes access: KUBECONFIG or in-cluster.")
	fmt.Fprintln(out, "\nEnvironment:")
	names := envNames()
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintln(out, "  "+n)
	}
}

func envNames() []string {
	names := []string{
		config.EnvMetricsAddress, config.EnvHealthzAddress, config.EnvHealthzLivenessTimeout,
		config.EnvLeaderElectionEnabled, config.EnvLeaderElectionID, config.EnvLogConfigPath,
		config.EnvBaseNamespace, config.EnvBaseDefaultSecretName, config.EnvExcludedNamespaces,
		config.EnvConfigMapRequeueDuration, config.EnvSecretRequeueDuration, config.EnvServiceAccountRequeueDuration,
		config.EnvPublisherProxyAddress, config.EnvTraceCollectorEndpoint, config.EnvImageRegistryDockerConfigSecret,
		config.EnvPackageRegistryConfigSecretName, config.EnvImagePullAccountName, config.EnvTargetCPUUtilizationPercentage,
		config.EnvRequeueDuration, config.EnvFunctionReadyRequeueDuration, config.EnvGitFetchRequeueDuration,
		config.EnvResourceConfig, config.EnvBuildExecutorArgs,
		config.EnvBuildRepoFetcherImage, config.EnvBuildMaxSimultaneousJobs,
		config.EnvRegistryCleanupDelay, config.EnvRegistryCleanupInterval,
		config.EnvFunctionMode, config.EnvBuildlessInitImage, fips.EnvMode,
	}
	for _, rt := range v1alpha2.Runtimes() {
		names = append(names, config.EnvRuntimeImage(rt))
	}
	return names
}

func run() error {
	cfg, err := config.Load(os.LookupEnv)
	if err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	logCfg, err := config.ReadLogConfig(cfg.LogConfigPath)
	if err != nil {
		return err
	}
	logger, level, err := logging.New(logCfg.Level, logCfg.ZapFormat())
	if err != nil {
		return err
	}
	ctrl.SetLogger(logger)
	ctx := ctrl.SetupSignalHandler()
	if err := logging.Watch(ctx, cfg.LogConfigPath, level, logger); err != nil {
		return fmt.Errorf("watching %s: %w", cfg.LogConfigPath, err)
	}

	id := module.FunctionController()
	restCfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("loading kubeconfig: %w", err)
	}
	// A burst of new Functions costs about seven writes each; the API
	// server's own flow control protects it beyond that.
	restCfg.QPS, restCfg.Burst = 200, 400
	restCfg.UserAgent = id.Name

	scheme, err := app.NewScheme()
	if err != nil {
		return err
	}
	cacheOpts, err := app.CacheOptions(&cfg)
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(restCfg, manager.Options{
		Scheme:                  scheme,
		Cache:                   cacheOpts,
		Metrics:                 metricsserver.Options{BindAddress: cfg.MetricsAddress},
		HealthProbeBindAddress:  cfg.HealthzAddress,
		LeaderElection:          cfg.LeaderElectionEnabled,
		LeaderElectionID:        cfg.LeaderElectionID,
		LeaderElectionNamespace: cfg.BaseNamespace,
		// A replica that stops hands over at once instead of after the lease expires.
		LeaderElectionReleaseOnCancel: true,
		Client: client.Options{
			Cache:      &client.CacheOptions{Unstructured: false},
			FieldOwner: id.Name,
		},
	})
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	inflight, err := app.Setup(mgr, app.Options{Config: cfg, Metrics: crmetrics.Registry})
	if err != nil {
		return err
	}
	// Every replica answers `kyma function eject` (the CLI picks any Pod).
	if err := mgr.Add(&eject.Server{Reader: mgr.GetAPIReader(), Config: &cfg, Log: logger.WithName("eject")}); err != nil {
		return fmt.Errorf("adding the eject endpoint: %w", err)
	}
	// Liveness fails while a reconcile hangs; readiness is a ping. Both are
	// served with and without the trailing slash (the chart probes /healthz/).
	if err := mgr.AddHealthzCheck("reconciles", inflight.Check(cfg.HealthzLivenessTimeout)); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	logger.Info("starting", "mode", cfg.Mode, "baseNamespace", cfg.BaseNamespace, "leaderElection", cfg.LeaderElectionEnabled,
		"maxSimultaneousBuilds", cfg.Build.MaxSimultaneousJobs, "excluded", strings.Join(cfg.ExcludedNamespaces, ","))
	return mgr.Start(ctx)
}
