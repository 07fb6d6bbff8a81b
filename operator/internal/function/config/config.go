// Package config reads the Function controller's configuration: the APP_*
// environment the chart's Deployment sets, the resource presets in
// APP_FUNCTION_RESOURCE_CONFIG and the log configuration file, as 1.8.4
// reads them (docs/contributor/upstream-contract.md#controller-configuration).
package config

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/pkg/buildflags"
	"github.com/kyma-project/serverless-manager/operator/pkg/fips"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
)

// Environment variables the controller reads. Names and code
// defaults are those of the published 1.8.4 controller, so a Deployment
// written for it configures this controller the same way.
const (
	EnvMetricsAddress                  = "APP_METRICS_ADDRESS"
	EnvHealthzAddress                  = "APP_HEALTHZ_ADDRESS"
	EnvHealthzLivenessTimeout          = "APP_HEALTHZ_LIVENESS_TIMEOUT"
	EnvLeaderElectionEnabled           = "APP_LEADER_ELECTION_ENABLED"
	EnvLeaderElectionID                = "APP_LEADER_ELECTION_ID"
	EnvLogConfigPath                   = "APP_LOG_CONFIG_PATH"
	EnvBaseNamespace                   = "APP_KUBERNETES_BASE_NAMESPACE"
	EnvBaseDefaultSecretName           = "APP_KUBERNETES_BASE_DEFAULT_SECRET_NAME"
	EnvExcludedNamespaces              = "APP_KUBERNETES_EXCLUDED_NAMESPACES"
	EnvConfigMapRequeueDuration        = "APP_KUBERNETES_CONFIG_MAP_REQUEUE_DURATION"
	EnvSecretRequeueDuration           = "APP_KUBERNETES_SECRET_REQUEUE_DURATION"
	EnvServiceAccountRequeueDuration   = "APP_KUBERNETES_SERVICE_ACCOUNT_REQUEUE_DURATION"
	EnvPublisherProxyAddress           = "APP_FUNCTION_PUBLISHER_PROXY_ADDRESS"
	EnvTraceCollectorEndpoint          = "APP_FUNCTION_TRACE_COLLECTOR_ENDPOINT"
	EnvImageRegistryDockerConfigSecret = "APP_FUNCTION_IMAGE_REGISTRY_DEFAULT_DOCKER_CONFIG_SECRET_NAME"
	EnvPackageRegistryConfigSecretName = "APP_FUNCTION_PACKAGE_REGISTRY_CONFIG_SECRET_NAME"
	EnvImagePullAccountName            = "APP_FUNCTION_IMAGE_PULL_ACCOUNT_NAME"
	EnvTargetCPUUtilizationPercentage  = "APP_FUNCTION_TARGET_CPU_UTILIZATION_PERCENTAGE"
	EnvRequeueDuration                 = "APP_FUNCTION_REQUEUE_DURATION"
	EnvFunctionReadyRequeueDuration    = "APP_FUNCTION_FUNCTION_READY_REQUEUE_DURATION"
	EnvGitFetchRequeueDuration         = "APP_FUNCTION_GIT_FETCH_REQUEUE_DURATION"
	EnvResourceConfig                  = "APP_FUNCTION_RESOURCE_CONFIG"
	EnvBuildExecutorArgs               = "APP_FUNCTION_BUILD_EXECUTOR_ARGS"
	EnvBuildRepoFetcherImage           = "APP_FUNCTION_BUILD_REPO_FETCHER_IMAGE"
	EnvBuildMaxSimultaneousJobs        = "APP_FUNCTION_BUILD_MAX_SIMULTANEOUS_JOBS"
	EnvRegistryCleanupDelay            = "APP_REGISTRY_CLEANUP_DELAY"
	EnvRegistryCleanupInterval         = "APP_REGISTRY_CLEANUP_INTERVAL"
	EnvRegistryCleanupExternal         = "APP_REGISTRY_CLEANUP_EXTERNAL"
	// Buildless mode (ours; release 1.13 reads these from its config file).
	EnvFunctionMode       = "APP_FUNCTION_MODE"
	EnvBuildlessInitImage = "APP_FUNCTION_BUILDLESS_INIT_IMAGE"
	// Scale to zero in a service mesh (ours; the Serverless CR's
	// spec.scaleToZero.mesh).
	EnvScaleToZeroMesh = "APP_SCALE_TO_ZERO_MESH"
	// The CPU limit a scale-to-zero Function's Pod starts with (ours).
	EnvStartupCPULimit = "APP_FUNCTION_STARTUP_CPU_LIMIT"
)

// EnvRuntimeImage is the variable naming the runtime image of rt in
// buildless mode, e.g. APP_FUNCTION_RUNTIME_IMAGE_NODEJS24.
func EnvRuntimeImage(rt v1alpha2.Runtime) string {
	return "APP_FUNCTION_RUNTIME_IMAGE_" + strings.ToUpper(string(rt))
}

// Mode is how Functions run, for the whole module.
type Mode string

const (
	// ModeBuild builds an image per Function (Job, registry) and runs it.
	ModeBuild Mode = v1alpha1.FunctionModeBuild
	// ModeBuildless runs the runtime image with the source in the Pod's env
	// and dependencies installed at Pod start, as release 1.13 does.
	ModeBuildless Mode = v1alpha1.FunctionModeBuildless
)

// Config is the controller's whole environment configuration. Every field
// has a default, so the controller starts with no APP_* variable at all.
type Config struct {
	MetricsAddress         string        // APP_METRICS_ADDRESS
	HealthzAddress         string        // APP_HEALTHZ_ADDRESS
	HealthzLivenessTimeout time.Duration // APP_HEALTHZ_LIVENESS_TIMEOUT: bound of each step of the liveness round-trip

	LeaderElectionEnabled bool   // APP_LEADER_ELECTION_ENABLED
	LeaderElectionID      string // APP_LEADER_ELECTION_ID: name of the Lease

	LogConfigPath string // APP_LOG_CONFIG_PATH: file read by ReadLogConfig

	// BaseNamespace holds the objects copied into every other namespace.
	BaseNamespace         string // APP_KUBERNETES_BASE_NAMESPACE
	BaseDefaultSecretName string // APP_KUBERNETES_BASE_DEFAULT_SECRET_NAME
	// ExcludedNamespaces never get copies; see Excluded, which adds the base namespace.
	ExcludedNamespaces []string // APP_KUBERNETES_EXCLUDED_NAMESPACES

	ConfigMapRequeueDuration      time.Duration // APP_KUBERNETES_CONFIG_MAP_REQUEUE_DURATION
	SecretRequeueDuration         time.Duration // APP_KUBERNETES_SECRET_REQUEUE_DURATION
	ServiceAccountRequeueDuration time.Duration // APP_KUBERNETES_SERVICE_ACCOUNT_REQUEUE_DURATION

	PublisherProxyAddress  string // APP_FUNCTION_PUBLISHER_PROXY_ADDRESS → PUBLISHER_PROXY_ADDRESS of Function Pods
	TraceCollectorEndpoint string // APP_FUNCTION_TRACE_COLLECTOR_ENDPOINT → TRACE_COLLECTOR_ENDPOINT of Function Pods

	// ImageRegistryDefaultDockerConfigSecretName is the registry Secret read in the Function's namespace.
	ImageRegistryDefaultDockerConfigSecretName string // APP_FUNCTION_IMAGE_REGISTRY_DEFAULT_DOCKER_CONFIG_SECRET_NAME
	PackageRegistryConfigSecretName            string // APP_FUNCTION_PACKAGE_REGISTRY_CONFIG_SECRET_NAME
	ImagePullAccountName                       string // APP_FUNCTION_IMAGE_PULL_ACCOUNT_NAME: serviceAccountName of Function Pods

	TargetCPUUtilizationPercentage int32 // APP_FUNCTION_TARGET_CPU_UTILIZATION_PERCENTAGE: HPA target

	FunctionReadyRequeueDuration time.Duration // APP_FUNCTION_FUNCTION_READY_REQUEUE_DURATION
	GitFetchRequeueDuration      time.Duration // APP_FUNCTION_GIT_FETCH_REQUEUE_DURATION: failure backoff base

	Resources ResourceConfig // APP_FUNCTION_RESOURCE_CONFIG
	Build     BuildConfig

	// RegistryCleanupDelay is how long after a Function's image changed or
	// the Function went the internal registry is cleaned (changes in that
	// time share one clean-up); RegistryCleanupInterval the longest time
	// between clean-ups.
	RegistryCleanupDelay    time.Duration // APP_REGISTRY_CLEANUP_DELAY
	RegistryCleanupInterval time.Duration // APP_REGISTRY_CLEANUP_INTERVAL
	// RegistryCleanupExternal cleans an external Function registry too
	// (opt-in: it is the user's), in the repositories the module pushes to.
	RegistryCleanupExternal bool // APP_REGISTRY_CLEANUP_EXTERNAL

	Mode      Mode            // APP_FUNCTION_MODE
	Buildless BuildlessConfig // read in both modes, required in buildless mode

	// ScaleToZeroMesh is the service mesh the activator runs in:
	// v1alpha1.MeshIstio gives each scale-to-zero Function the headless
	// Service by which the activator's sidecar reaches its Pods
	// (docs/contributor/scale-to-zero.md, Mesh Mode); "" none.
	ScaleToZeroMesh string // APP_SCALE_TO_ZERO_MESH

	// StartupCPULimit is the CPU limit with which a scale-to-zero
	// Function's Pods start, resized in place to the Function's own once
	// ready (docs/contributor/scale-to-zero.md, Startup CPU); zero starts
	// them with their own. main sets it to zero when the API server cannot
	// resize Pods.
	StartupCPULimit resource.Quantity // APP_FUNCTION_STARTUP_CPU_LIMIT

	// FIPSMode (KYMA_FIPS_MODE_ENABLED, docs/contributor/fips.md): the
	// controller runs FIPS 140-only (checked at start), and so do the
	// containers it creates that check it, as in release 1.13.
	FIPSMode bool
}

// BuildlessConfig are the images of buildless mode. Their exact strings
// are part of every Function's Pod template: the chart pins release 1.13's,
// so its Deployments are adopted without a rollout.
type BuildlessConfig struct {
	// RuntimeImages by runtime, APP_FUNCTION_RUNTIME_IMAGE_<RUNTIME>.
	RuntimeImages map[v1alpha2.Runtime]string
	// InitImage clones Git sources in the Pod's init container
	// (APP_FUNCTION_BUILDLESS_INIT_IMAGE).
	InitImage string
}

// BuildConfig configures build Jobs.
type BuildConfig struct {
	ExecutorArgs        []string // APP_FUNCTION_BUILD_EXECUTOR_ARGS (comma list of kaniko's flags, see package buildflags)
	RepoFetcherImage    string   // APP_FUNCTION_BUILD_REPO_FETCHER_IMAGE: this controller's image, which runs the build steps
	MaxSimultaneousJobs int      // APP_FUNCTION_BUILD_MAX_SIMULTANEOUS_JOBS: cluster-wide cap on unfinished build Jobs
}

// Code defaults (1.8.4's,
// docs/contributor/upstream-contract.md#controller-configuration), except where
// a comment says otherwise.
const (
	DefaultMetricsAddress                 = ":8080"
	DefaultHealthzAddress                 = ":8090"
	DefaultHealthzLivenessTimeout         = 10 * time.Second
	DefaultLeaderElectionID               = module.FunctionControllerLeaseName
	DefaultLogConfigPath                  = "/appconfig/log-config.yaml"
	DefaultBaseNamespace                  = "kyma-system"
	DefaultRegistrySecretName             = "serverless-registry-config-default"
	DefaultRequeueDuration                = time.Minute
	DefaultPackageRegistryConfigSecret    = "serverless-package-registry-config"
	DefaultImagePullAccountName           = "serverless-function"
	DefaultTargetCPUUtilizationPercentage = 50
	DefaultFunctionReadyRequeueDuration   = 5 * time.Minute
	DefaultGitFetchRequeueDuration        = 30 * time.Second
	DefaultMaxSimultaneousJobs            = 5
	// DefaultStartupCPULimit is one CPU: a runtime's start costs about
	// 0.1 CPU-seconds, which 150m (XS) stretches to a second.
	DefaultStartupCPULimit = "1"
	// Registry clean-up (ours; 1.8.4 cleaned nothing).
	DefaultRegistryCleanupDelay    = 10 * time.Second
	DefaultRegistryCleanupInterval = time.Hour
	// DefaultRepoFetcherImage is none: the Git fetcher is this controller's
	// own image (its fetch subcommand), which only the chart knows; without
	// it Git Functions say so in their condition, inline ones work.
	DefaultRepoFetcherImage = ""
)

// DefaultExecutorArgs are the build flags when APP_FUNCTION_BUILD_EXECUTOR_ARGS is absent.
func DefaultExecutorArgs() []string { return buildflags.Split(buildflags.Default) }

// Load reads the configuration through lookup (os.LookupEnv in main). A
// variable that is absent or empty (or only blanks) takes its default, as
// with envconfig. Every invalid value is reported, each error naming its
// variable, so one failed start shows all mistakes.
func Load(lookup func(string) (string, bool)) (Config, error) {
	r := &envReader{lookup: lookup}
	c := Config{
		MetricsAddress:         r.str(EnvMetricsAddress, DefaultMetricsAddress),
		HealthzAddress:         r.str(EnvHealthzAddress, DefaultHealthzAddress),
		HealthzLivenessTimeout: r.duration(EnvHealthzLivenessTimeout, DefaultHealthzLivenessTimeout),
		LeaderElectionEnabled:  r.boolean(EnvLeaderElectionEnabled, false),
		LeaderElectionID:       r.name(EnvLeaderElectionID, DefaultLeaderElectionID, subdomain),
		LogConfigPath:          r.str(EnvLogConfigPath, DefaultLogConfigPath),

		BaseNamespace:                 r.name(EnvBaseNamespace, DefaultBaseNamespace, label),
		BaseDefaultSecretName:         r.name(EnvBaseDefaultSecretName, DefaultRegistrySecretName, subdomain),
		ExcludedNamespaces:            r.names(EnvExcludedNamespaces, []string{DefaultBaseNamespace}, label),
		ConfigMapRequeueDuration:      r.duration(EnvConfigMapRequeueDuration, DefaultRequeueDuration),
		SecretRequeueDuration:         r.duration(EnvSecretRequeueDuration, DefaultRequeueDuration),
		ServiceAccountRequeueDuration: r.duration(EnvServiceAccountRequeueDuration, DefaultRequeueDuration),

		PublisherProxyAddress:  r.str(EnvPublisherProxyAddress, ""),
		TraceCollectorEndpoint: r.str(EnvTraceCollectorEndpoint, ""),
		ImageRegistryDefaultDockerConfigSecretName: r.name(EnvImageRegistryDockerConfigSecret,
			DefaultRegistrySecretName, subdomain),
		PackageRegistryConfigSecretName: r.name(EnvPackageRegistryConfigSecretName, DefaultPackageRegistryConfigSecret, subdomain),
		ImagePullAccountName:            r.name(EnvImagePullAccountName, DefaultImagePullAccountName, subdomain),
		TargetCPUUtilizationPercentage:  r.int32(EnvTargetCPUUtilizationPercentage, DefaultTargetCPUUtilizationPercentage),

		FunctionReadyRequeueDuration: r.duration(EnvFunctionReadyRequeueDuration, DefaultFunctionReadyRequeueDuration),
		GitFetchRequeueDuration:      r.duration(EnvGitFetchRequeueDuration, DefaultGitFetchRequeueDuration),
		Resources:                    r.resources(EnvResourceConfig),
		Build: BuildConfig{
			ExecutorArgs:        r.list(EnvBuildExecutorArgs, DefaultExecutorArgs()),
			RepoFetcherImage:    r.str(EnvBuildRepoFetcherImage, DefaultRepoFetcherImage),
			MaxSimultaneousJobs: int(r.int32(EnvBuildMaxSimultaneousJobs, DefaultMaxSimultaneousJobs)),
		},
		RegistryCleanupDelay:    r.duration(EnvRegistryCleanupDelay, DefaultRegistryCleanupDelay),
		RegistryCleanupInterval: r.duration(EnvRegistryCleanupInterval, DefaultRegistryCleanupInterval),
		RegistryCleanupExternal: r.boolean(EnvRegistryCleanupExternal, false),
		Mode:                    r.mode(EnvFunctionMode),
		Buildless:               BuildlessConfig{InitImage: r.image(EnvBuildlessInitImage)},
		ScaleToZeroMesh:         r.oneOf(EnvScaleToZeroMesh, v1alpha1.MeshIstio),
		StartupCPULimit:         r.quantity(EnvStartupCPULimit, resource.MustParse(DefaultStartupCPULimit)),
		FIPSMode:                r.boolean(fips.EnvMode, false),
	}
	for _, rt := range v1alpha2.Runtimes() {
		if img := r.image(EnvRuntimeImage(rt)); img != "" {
			if c.Buildless.RuntimeImages == nil {
				c.Buildless.RuntimeImages = map[v1alpha2.Runtime]string{}
			}
			c.Buildless.RuntimeImages[rt] = img
		}
	}
	if c.Mode == ModeBuildless {
		// Without them no Function could run; say so at start, not per Pod.
		for _, rt := range v1alpha2.Runtimes() {
			if c.Buildless.RuntimeImages[rt] == "" {
				r.fail(EnvRuntimeImage(rt), "", fmt.Errorf("required in %s mode: the image Functions of runtime %s run", ModeBuildless, rt))
			}
		}
		if c.Buildless.InitImage == "" {
			r.fail(EnvBuildlessInitImage, "", fmt.Errorf("required in %s mode: the image that clones Git Functions' sources", ModeBuildless))
		}
	}
	// 1.8.4 parses this knob and uses it nowhere; a bad value still stops it,
	// so it is checked here too and then dropped (the ready requeue is
	// FunctionReadyRequeueDuration).
	r.duration(EnvRequeueDuration, DefaultRequeueDuration)
	// APP_SECRET_MUTATING_WEBHOOK_PORT is not read: 1.8.4 never starts that server.
	if err := errors.Join(r.errs...); err != nil {
		return Config{}, err
	}
	return c, nil
}

// Excluded tells whether namespace gets no copies of the base objects: the
// base namespace itself and the configured exclusions.
func (c Config) Excluded(namespace string) bool {
	return namespace == c.BaseNamespace || slices.Contains(c.ExcludedNamespaces, namespace)
}
