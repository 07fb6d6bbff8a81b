package config_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/internal/function/config"
)

// env is a lookup over a fixed map, like os.LookupEnv over a Pod's env.
func env(vars map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		v, ok := vars[name]
		return v, ok
	}
}

// defaults is the configuration of a controller started with no APP_* at all,
// written out from 1.8.4's code defaults
// (docs/contributor/upstream-contract.md#controller-configuration), except the
// build flags (package buildflags).
func defaults() config.Config {
	return config.Config{
		MetricsAddress:                             ":8080",
		HealthzAddress:                             ":8090",
		HealthzLivenessTimeout:                     10 * time.Second,
		LeaderElectionEnabled:                      false,
		LeaderElectionID:                           "serverless-controller-leader-election-helper",
		LogConfigPath:                              "/appconfig/log-config.yaml",
		BaseNamespace:                              "kyma-system",
		BaseDefaultSecretName:                      "serverless-registry-config-default",
		ExcludedNamespaces:                         []string{"kyma-system"},
		ConfigMapRequeueDuration:                   time.Minute,
		SecretRequeueDuration:                      time.Minute,
		ServiceAccountRequeueDuration:              time.Minute,
		ImageRegistryDefaultDockerConfigSecretName: "serverless-registry-config-default",
		PackageRegistryConfigSecretName:            "serverless-package-registry-config",
		ImagePullAccountName:                       "serverless-function",
		TargetCPUUtilizationPercentage:             50,
		FunctionReadyRequeueDuration:               5 * time.Minute,
		GitFetchRequeueDuration:                    30 * time.Second,
		Build: config.BuildConfig{
			ExecutorArgs:        []string{"--insecure", "--skip-tls-verify", "--cache=true"},
			RepoFetcherImage:    "",
			MaxSimultaneousJobs: 5,
		},
		RegistryCleanupDelay:    10 * time.Second,
		RegistryCleanupInterval: time.Hour,
		Mode:                    config.ModeBuild,
		// Ours: one CPU for a scale-to-zero Function's start.
		StartupCPULimit: resource.MustParse("1"),
	}
}

func TestLoadWithoutEnvironment(t *testing.T) {
	got, err := config.Load(env(nil))
	require.NoError(t, err)
	assert.Equal(t, defaults(), got)
}

// TestLoadVariable sets one variable at a time: a valid value changes exactly
// its field, an empty or blank value is the default, an invalid value is an
// error naming the variable.
func TestLoadVariable(t *testing.T) {
	tests := []struct {
		env     string
		value   string
		want    func(*config.Config)
		invalid []string
	}{
		{env: "APP_METRICS_ADDRESS", value: ":9080", want: func(c *config.Config) { c.MetricsAddress = ":9080" }},
		{env: "APP_HEALTHZ_ADDRESS", value: "127.0.0.1:9090", want: func(c *config.Config) { c.HealthzAddress = "127.0.0.1:9090" }},
		{env: "APP_HEALTHZ_LIVENESS_TIMEOUT", value: "1m30s", want: func(c *config.Config) { c.HealthzLivenessTimeout = 90 * time.Second },
			invalid: []string{"10", "ten seconds", "0s", "-5s"}},
		{env: "APP_LEADER_ELECTION_ENABLED", value: "true", want: func(c *config.Config) { c.LeaderElectionEnabled = true },
			invalid: []string{"yes", "enabled", "2"}},
		{env: "APP_LEADER_ELECTION_ENABLED", value: "1", want: func(c *config.Config) { c.LeaderElectionEnabled = true }},
		{env: "APP_LEADER_ELECTION_ENABLED", value: "FALSE", want: func(c *config.Config) {}},
		{env: "APP_LEADER_ELECTION_ID", value: "my-lock", want: func(c *config.Config) { c.LeaderElectionID = "my-lock" },
			invalid: []string{"My_Lock"}},
		{env: "APP_LOG_CONFIG_PATH", value: "/etc/fc/log.yaml", want: func(c *config.Config) { c.LogConfigPath = "/etc/fc/log.yaml" }},
		{env: "APP_KUBERNETES_BASE_NAMESPACE", value: "serverless", want: func(c *config.Config) { c.BaseNamespace = "serverless" },
			invalid: []string{"Serverless", "a.b"}},
		{env: "APP_KUBERNETES_BASE_DEFAULT_SECRET_NAME", value: "my.registry",
			want: func(c *config.Config) { c.BaseDefaultSecretName = "my.registry" }, invalid: []string{"my_registry"}},
		{env: "APP_KUBERNETES_EXCLUDED_NAMESPACES", value: "kyma-system, kube-system,,default ",
			want:    func(c *config.Config) { c.ExcludedNamespaces = []string{"kyma-system", "kube-system", "default"} },
			invalid: []string{"kube-system;default", "Kube"}},
		{env: "APP_KUBERNETES_EXCLUDED_NAMESPACES", value: ",", want: func(c *config.Config) { c.ExcludedNamespaces = nil }},
		{env: "APP_KUBERNETES_CONFIG_MAP_REQUEUE_DURATION", value: "5m",
			want: func(c *config.Config) { c.ConfigMapRequeueDuration = 5 * time.Minute }, invalid: []string{"5", "0"}},
		{env: "APP_KUBERNETES_SECRET_REQUEUE_DURATION", value: "2h",
			want: func(c *config.Config) { c.SecretRequeueDuration = 2 * time.Hour }, invalid: []string{"2 h"}},
		{env: "APP_KUBERNETES_SERVICE_ACCOUNT_REQUEUE_DURATION", value: "45s",
			want: func(c *config.Config) { c.ServiceAccountRequeueDuration = 45 * time.Second }, invalid: []string{"-1m"}},
		{env: "APP_FUNCTION_PUBLISHER_PROXY_ADDRESS", value: "http://proxy/publish",
			want: func(c *config.Config) { c.PublisherProxyAddress = "http://proxy/publish" }},
		{env: "APP_FUNCTION_TRACE_COLLECTOR_ENDPOINT", value: "http://otel:4318/v1/traces",
			want: func(c *config.Config) { c.TraceCollectorEndpoint = "http://otel:4318/v1/traces" }},
		{env: "APP_FUNCTION_IMAGE_REGISTRY_DEFAULT_DOCKER_CONFIG_SECRET_NAME", value: "registry",
			want: func(c *config.Config) { c.ImageRegistryDefaultDockerConfigSecretName = "registry" }, invalid: []string{"-registry"}},
		{env: "APP_FUNCTION_PACKAGE_REGISTRY_CONFIG_SECRET_NAME", value: "npmrc",
			want: func(c *config.Config) { c.PackageRegistryConfigSecretName = "npmrc" }, invalid: []string{"NPMRC"}},
		{env: "APP_FUNCTION_IMAGE_PULL_ACCOUNT_NAME", value: "puller",
			want: func(c *config.Config) { c.ImagePullAccountName = "puller" }, invalid: []string{"pull er"}},
		{env: "APP_FUNCTION_TARGET_CPU_UTILIZATION_PERCENTAGE", value: "150",
			want: func(c *config.Config) { c.TargetCPUUtilizationPercentage = 150 }, invalid: []string{"50%", "0", "-1", "2147483648", "1.5"}},
		// Parsed as 1.8.4 does and dropped: no field changes.
		{env: "APP_FUNCTION_REQUEUE_DURATION", value: "5m", want: func(c *config.Config) {}, invalid: []string{"5"}},
		{env: "APP_FUNCTION_FUNCTION_READY_REQUEUE_DURATION", value: "90s",
			want: func(c *config.Config) { c.FunctionReadyRequeueDuration = 90 * time.Second }, invalid: []string{"1d"}},
		{env: "APP_FUNCTION_GIT_FETCH_REQUEUE_DURATION", value: "1s",
			want: func(c *config.Config) { c.GitFetchRequeueDuration = time.Second }, invalid: []string{"0ms"}},
		{env: "APP_FUNCTION_RESOURCE_CONFIG", value: "function:\n  resources:\n    defaultPreset: S\n",
			want:    func(c *config.Config) { c.Resources.Function.DefaultPreset = "S" },
			invalid: []string{"function: [", "function:\n  resources:\n    minRequestCpu: 10m\n", "buildJob:\n  resources:\n    presets:\n      x: {limitCpu: lots}\n"}},
		{env: "APP_FUNCTION_RESOURCE_CONFIG", value: "  buildJob:\n    resources:\n      defaultPreset: fast\n  function: {}\n",
			want: func(c *config.Config) { c.Resources.BuildJob.DefaultPreset = "fast" }},
		{env: "APP_FUNCTION_BUILD_EXECUTOR_ARGS", value: "--insecure,--cache=false",
			want: func(c *config.Config) { c.Build.ExecutorArgs = []string{"--insecure", "--cache=false"} }},
		{env: "APP_FUNCTION_BUILD_REPO_FETCHER_IMAGE", value: "mirror.example/init:v1",
			want: func(c *config.Config) { c.Build.RepoFetcherImage = "mirror.example/init:v1" }},
		{env: "APP_FUNCTION_BUILD_MAX_SIMULTANEOUS_JOBS", value: "12",
			want: func(c *config.Config) { c.Build.MaxSimultaneousJobs = 12 }, invalid: []string{"five", "0", "-3"}},
		{env: "APP_REGISTRY_CLEANUP_DELAY", value: "1s",
			want: func(c *config.Config) { c.RegistryCleanupDelay = time.Second }, invalid: []string{"soon"}},
		{env: "APP_REGISTRY_CLEANUP_INTERVAL", value: "10m",
			want: func(c *config.Config) { c.RegistryCleanupInterval = 10 * time.Minute }, invalid: []string{"hourly"}},
		{env: "APP_FUNCTION_MODE", value: "build", want: func(c *config.Config) {}, invalid: []string{"Build", "buildless-mode", "enabled"}},
		// In build mode the buildless images are read, not required.
		{env: "APP_FUNCTION_RUNTIME_IMAGE_NODEJS24", value: "europe-docker.pkg.dev/kyma-project/prod/function-runtime-nodejs24:1.13.0",
			want: func(c *config.Config) {
				c.Buildless.RuntimeImages = map[v1alpha2.Runtime]string{
					v1alpha2.RuntimeNodejs24: "europe-docker.pkg.dev/kyma-project/prod/function-runtime-nodejs24:1.13.0"}
			}, invalid: []string{"function-runtime nodejs24:1.13.0"}},
		{env: "APP_FUNCTION_BUILDLESS_INIT_IMAGE", value: "europe-docker.pkg.dev/kyma-project/prod/function-buildless-init:1.13.0",
			want: func(c *config.Config) {
				c.Buildless.InitImage = "europe-docker.pkg.dev/kyma-project/prod/function-buildless-init:1.13.0"
			}, invalid: []string{"init\timage"}},
		{env: "APP_REGISTRY_CLEANUP_EXTERNAL", value: "true",
			want: func(c *config.Config) { c.RegistryCleanupExternal = true }, invalid: []string{"yes please"}},
		{env: "APP_SCALE_TO_ZERO_MESH", value: "istio",
			want: func(c *config.Config) { c.ScaleToZeroMesh = "istio" }, invalid: []string{"Istio", "linkerd", "true"}},
		{env: "APP_FUNCTION_STARTUP_CPU_LIMIT", value: "500m",
			want: func(c *config.Config) { c.StartupCPULimit = resource.MustParse("500m") }, invalid: []string{"one", "-1"}},
		{env: "APP_FUNCTION_STARTUP_CPU_LIMIT", value: "0",
			want: func(c *config.Config) { c.StartupCPULimit = resource.MustParse("0") }},
	}
	for _, tt := range tests {
		t.Run(tt.env+"="+tt.value, func(t *testing.T) {
			want := defaults()
			tt.want(&want)
			got, err := config.Load(env(map[string]string{tt.env: tt.value}))
			require.NoError(t, err)
			assert.Equal(t, want, got)

			for _, empty := range []string{"", "  "} {
				got, err := config.Load(env(map[string]string{tt.env: empty}))
				require.NoError(t, err, "empty means absent")
				assert.Equal(t, defaults(), got, "empty means absent")
			}
			for _, bad := range tt.invalid {
				_, err := config.Load(env(map[string]string{tt.env: bad}))
				require.Error(t, err, "value %q", bad)
				assert.Contains(t, err.Error(), tt.env, "the error names the variable")
			}
		})
	}
}

func TestLoadReportsEveryBadVariable(t *testing.T) {
	bad := map[string]string{
		"APP_HEALTHZ_LIVENESS_TIMEOUT":             "soon",
		"APP_LEADER_ELECTION_ENABLED":              "maybe",
		"APP_FUNCTION_BUILD_MAX_SIMULTANEOUS_JOBS": "many",
		"APP_FUNCTION_RESOURCE_CONFIG":             "function: [",
		"APP_METRICS_ADDRESS":                      ":9999", // valid: not in the error
	}
	_, err := config.Load(env(bad))
	require.Error(t, err)
	for name, value := range bad {
		if name == "APP_METRICS_ADDRESS" {
			assert.NotContains(t, err.Error(), name)
			continue
		}
		assert.Contains(t, err.Error(), name)
		if name != "APP_FUNCTION_RESOURCE_CONFIG" {
			assert.Contains(t, err.Error(), value, "the error shows the bad value")
		}
	}
}

func TestLoadDoesNotReadOtherVariables(t *testing.T) {
	// envconfig's other spellings are not read: the chart writes the split names.
	got, err := config.Load(env(map[string]string{
		"APP_FUNCTION_BUILD_MAXSIMULTANEOUSJOBS": "9",
		"app_metrics_address":                    ":1",
		"APP_SECRET_MUTATING_WEBHOOK_PORT":       "not a port",
	}))
	require.NoError(t, err)
	assert.Equal(t, defaults(), got)
}

// buildlessEnv is a complete buildless configuration, as the chart renders it.
func buildlessEnv() map[string]string {
	vars := map[string]string{
		"APP_FUNCTION_MODE":                 "buildless",
		"APP_FUNCTION_BUILDLESS_INIT_IMAGE": "europe-docker.pkg.dev/kyma-project/prod/function-buildless-init:1.13.0",
	}
	for _, rt := range []string{"nodejs20", "nodejs22", "nodejs24", "python312"} {
		vars["APP_FUNCTION_RUNTIME_IMAGE_"+strings.ToUpper(rt)] = "europe-docker.pkg.dev/kyma-project/prod/function-runtime-" + rt + ":1.13.0"
	}
	return vars
}

func TestLoadBuildless(t *testing.T) {
	got, err := config.Load(env(buildlessEnv()))
	require.NoError(t, err)
	want := defaults()
	want.Mode = config.ModeBuildless
	want.Buildless = config.BuildlessConfig{
		InitImage: "europe-docker.pkg.dev/kyma-project/prod/function-buildless-init:1.13.0",
		RuntimeImages: map[v1alpha2.Runtime]string{
			v1alpha2.RuntimeNodejs20:  "europe-docker.pkg.dev/kyma-project/prod/function-runtime-nodejs20:1.13.0",
			v1alpha2.RuntimeNodejs22:  "europe-docker.pkg.dev/kyma-project/prod/function-runtime-nodejs22:1.13.0",
			v1alpha2.RuntimeNodejs24:  "europe-docker.pkg.dev/kyma-project/prod/function-runtime-nodejs24:1.13.0",
			v1alpha2.RuntimePython312: "europe-docker.pkg.dev/kyma-project/prod/function-runtime-python312:1.13.0",
		},
	}
	assert.Equal(t, want, got)
}

// In buildless mode every image is required; a missing one is named at start.
func TestLoadBuildlessNeedsEveryImage(t *testing.T) {
	for name := range buildlessEnv() {
		if name == "APP_FUNCTION_MODE" {
			continue
		}
		t.Run(name, func(t *testing.T) {
			vars := buildlessEnv()
			delete(vars, name)
			_, err := config.Load(env(vars))
			require.Error(t, err)
			assert.Contains(t, err.Error(), name)
			assert.Contains(t, err.Error(), "required in buildless mode")
		})
	}
}

func TestExcluded(t *testing.T) {
	c := defaults()
	c.BaseNamespace = "serverless"
	c.ExcludedNamespaces = []string{"kube-system", "kyma-system"}
	for ns, want := range map[string]bool{"serverless": true, "kube-system": true, "kyma-system": true, "default": false, "": false} {
		assert.Equal(t, want, c.Excluded(ns), ns)
	}
}
