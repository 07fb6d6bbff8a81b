package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/kyma-project/serverless-manager/charts"
	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/internal/function/config"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/render"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/values"
)

// knownVariables are all the variables Load reads; the chart must set no other.
func knownVariables() []string {
	vars := []string{config.EnvFunctionMode, config.EnvBuildlessInitImage}
	for _, rt := range v1alpha2.Runtimes() {
		vars = append(vars, config.EnvRuntimeImage(rt))
	}
	return append(vars, config.EnvMetricsAddress, config.EnvHealthzAddress, config.EnvHealthzLivenessTimeout,
		config.EnvLeaderElectionEnabled, config.EnvLeaderElectionID, config.EnvLogConfigPath, config.EnvBaseNamespace,
		config.EnvBaseDefaultSecretName, config.EnvExcludedNamespaces, config.EnvConfigMapRequeueDuration,
		config.EnvSecretRequeueDuration, config.EnvServiceAccountRequeueDuration, config.EnvPublisherProxyAddress,
		config.EnvTraceCollectorEndpoint, config.EnvImageRegistryDockerConfigSecret, config.EnvPackageRegistryConfigSecretName,
		config.EnvImagePullAccountName, config.EnvTargetCPUUtilizationPercentage, config.EnvRequeueDuration,
		config.EnvFunctionReadyRequeueDuration, config.EnvGitFetchRequeueDuration, config.EnvResourceConfig,
		config.EnvBuildExecutorArgs, config.EnvBuildRepoFetcherImage,
		config.EnvBuildMaxSimultaneousJobs, config.EnvRegistryCleanupExternal, config.EnvScaleToZeroMesh)
}

// rendered is what the chart gives the controller: its env and the log
// configuration file as the Pod sees it.
type rendered struct {
	env     map[string]string
	logFile string // path of a copy of the mounted file, under the chart's mount path
	mount   string // mountPath of the serverless-configuration volume
	image   string // the controller container's image
}

func renderChart(t *testing.T, namespace string, vals map[string]any) rendered {
	t.Helper()
	chrt, err := render.LoadChart(charts.Serverless())
	require.NoError(t, err)
	objs, err := render.New(chrt, nil).Render(namespace, vals)
	require.NoError(t, err)

	var out rendered
	var logConfig string
	for _, o := range objs {
		switch {
		case o.GetKind() == "Deployment" && o.GetName() == "serverless-ctrl-mngr":
			var d appsv1.Deployment
			require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &d))
			pod := d.Spec.Template.Spec
			volume := map[string]string{}
			for _, v := range pod.Volumes {
				if v.ConfigMap != nil {
					volume[v.Name] = v.ConfigMap.Name
				}
			}
			for _, c := range pod.Containers {
				if c.Name != "manager" {
					continue
				}
				out.env = map[string]string{}
				out.image = c.Image
				for _, e := range c.Env {
					require.Nil(t, e.ValueFrom, "%s: the controller reads plain values", e.Name)
					out.env[e.Name] = e.Value
				}
				for _, m := range c.VolumeMounts {
					if volume[m.Name] == "serverless-configuration" {
						require.Empty(t, m.SubPath, "a subPath mount never sees ConfigMap updates")
						out.mount = m.MountPath
					}
				}
			}
		case o.GetKind() == "ConfigMap" && o.GetName() == "serverless-configuration":
			var cm corev1.ConfigMap
			require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &cm))
			logConfig = cm.Data["log-config.yaml"]
		}
	}
	require.NotNil(t, out.env, "controller Deployment with container manager")
	require.NotEmpty(t, out.mount, "serverless-configuration mounted into the manager")
	require.NotEmpty(t, logConfig, "log-config.yaml in serverless-configuration")
	out.logFile = filepath.Join(t.TempDir(), "log-config.yaml")
	require.NoError(t, os.WriteFile(out.logFile, []byte(logConfig), 0o600))
	return out
}

// managerValues are the values the Serverless Manager renders the chart with.
func managerValues(t *testing.T, spec v1alpha1.ServerlessSpec, f values.Facts, extra map[string]map[string]any) map[string]any {
	t.Helper()
	f.NewSecret = func(n int) string { return strings.Repeat("s", n) }
	built, err := values.Build(spec, f)
	require.NoError(t, err)
	vals, err := built.Values.Map()
	require.NoError(t, err)
	for key, sub := range extra {
		m, ok := vals[key].(map[string]any)
		require.True(t, ok, key)
		for k, v := range sub {
			m[k] = v
		}
	}
	return vals
}

// chartEnvironment is the configuration the chart's defaults give (values.yaml).
func chartEnvironment(namespace string) config.Config {
	c := defaults()
	c.BaseNamespace = namespace
	c.ExcludedNamespaces = []string{namespace}
	c.LeaderElectionEnabled = true // one writer, also while a replaced Pod still runs
	c.ConfigMapRequeueDuration = 5 * time.Minute
	c.SecretRequeueDuration = 5 * time.Minute
	c.ServiceAccountRequeueDuration = 5 * time.Minute
	c.PublisherProxyAddress = "http://eventing-publisher-proxy.kyma-system.svc.cluster.local/publish"
	// The runtimes' images are set in both modes (`kyma function eject`).
	c.Buildless.RuntimeImages = map[v1alpha2.Runtime]string{}
	for _, rt := range v1alpha2.Runtimes() {
		c.Buildless.RuntimeImages[rt] = "europe-docker.pkg.dev/kyma-project/prod/function-runtime-" + string(rt) + ":1.13.0"
	}
	return c
}

// TestChartEnvironment loads the environment and log file the chart really
// renders, for the plain chart and for the manager's values.
func TestChartEnvironment(t *testing.T) {
	tests := []struct {
		name                          string
		namespace                     string
		values                        func(t *testing.T) map[string]any
		want                          func() config.Config
		wantLog                       config.LogConfig
		functionDefault, buildDefault string
	}{
		{
			name: "chart defaults", namespace: "kyma-system",
			values:  func(*testing.T) map[string]any { return nil },
			want:    func() config.Config { return chartEnvironment("kyma-system") },
			wantLog: config.LogConfig{Level: "info", Format: "json"}, functionDefault: "L", buildDefault: "normal",
		},
		{
			name: "chart buildless", namespace: "kyma-system",
			values: func(*testing.T) map[string]any { return map[string]any{"functionMode": "buildless"} },
			want: func() config.Config {
				c := chartEnvironment("kyma-system")
				c.Mode = config.ModeBuildless
				c.Buildless = config.BuildlessConfig{
					InitImage:     "europe-docker.pkg.dev/kyma-project/prod/function-buildless-init:1.13.0",
					RuntimeImages: map[v1alpha2.Runtime]string{},
				}
				for _, rt := range v1alpha2.Runtimes() {
					c.Buildless.RuntimeImages[rt] = "europe-docker.pkg.dev/kyma-project/prod/function-runtime-" + string(rt) + ":1.13.0"
				}
				return c
			},
			wantLog: config.LogConfig{Level: "info", Format: "json"}, functionDefault: "L", buildDefault: "normal",
		},
		{
			name: "manager defaults", namespace: "kyma-system",
			values: func(t *testing.T) map[string]any {
				return managerValues(t, v1alpha1.ServerlessSpec{}, values.Facts{Namespace: "kyma-system", Nodes: 3}, nil)
			},
			want:    func() config.Config { return chartEnvironment("kyma-system") },
			wantLog: config.LogConfig{Level: "info", Format: "json"}, functionDefault: "L", buildDefault: "normal",
		},
		{
			name: "manager small cluster", namespace: "kyma-system",
			values: func(t *testing.T) map[string]any {
				return managerValues(t, v1alpha1.ServerlessSpec{}, values.Facts{Namespace: "kyma-system", Nodes: 1, TracingServiceExists: true}, nil)
			},
			want: func() config.Config {
				c := chartEnvironment("kyma-system")
				c.TraceCollectorEndpoint = "http://telemetry-otlp-traces.kyma-system.svc.cluster.local:4318/v1/traces"
				return c
			},
			wantLog: config.LogConfig{Level: "info", Format: "json"}, functionDefault: "XS", buildDefault: "slow",
		},
		{
			name: "manager everything set", namespace: "serverless",
			values: func(t *testing.T) map[string]any {
				spec := v1alpha1.ServerlessSpec{
					DefaultBuildJobPreset: "fast", DefaultRuntimePodPreset: "XL", LogLevel: "debug", LogFormat: "text",
					TargetCPUUtilizationPercentage: ptr.To(intstr.FromInt32(70)), FunctionBuildMaxSimultaneousJobs: ptr.To(intstr.FromString("9")),
					FunctionBuildExecutorArgs: "--insecure,--cache=false", FunctionRequeueDuration: "90s", HealthzLivenessTimeout: "20s",
					Eventing:       &v1alpha1.Endpoint{Endpoint: "http://events.example/publish"},
					Tracing:        &v1alpha1.Endpoint{Endpoint: "http://otel.example:4318/v1/traces"},
					DockerRegistry: &v1alpha1.DockerRegistry{DeleteUnusedExternalImages: ptr.To(true)},
				}
				facts := values.Facts{Namespace: "serverless", Nodes: 3, ImageOverrides: map[string]string{
					"function_controller": "mirror.example/controller:v2"}}
				return managerValues(t, spec, facts, map[string]map[string]any{
					"controller": {"replicas": int64(2)},
				})
			},
			want: func() config.Config {
				c := chartEnvironment("serverless")
				c.HealthzLivenessTimeout = 20 * time.Second
				c.TargetCPUUtilizationPercentage = 70
				c.FunctionReadyRequeueDuration = 90 * time.Second
				c.PublisherProxyAddress = "http://events.example/publish"
				c.TraceCollectorEndpoint = "http://otel.example:4318/v1/traces"
				c.Build.ExecutorArgs = []string{"--insecure", "--cache=false"}
				c.Build.MaxSimultaneousJobs = 9
				c.RegistryCleanupExternal = true
				return c
			},
			wantLog: config.LogConfig{Level: "debug", Format: "text"}, functionDefault: "XL", buildDefault: "fast",
		},
		{
			name: "manager mesh mode", namespace: "kyma-system",
			values: func(t *testing.T) map[string]any {
				return managerValues(t, v1alpha1.ServerlessSpec{ScaleToZero: &v1alpha1.ScaleToZero{Mesh: v1alpha1.MeshIstio}},
					values.Facts{Namespace: "kyma-system", Nodes: 3}, nil)
			},
			want: func() config.Config {
				c := chartEnvironment("kyma-system")
				c.ScaleToZeroMesh = v1alpha1.MeshIstio
				return c
			},
			wantLog: config.LogConfig{Level: "info", Format: "json"}, functionDefault: "L", buildDefault: "normal",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := renderChart(t, tt.namespace, tt.values(t))
			for name := range r.env {
				assert.Contains(t, knownVariables(), name, "the chart sets a variable the controller does not read")
			}

			got, err := config.Load(env(r.env))
			require.NoError(t, err)
			assert.Equal(t, filepath.Join(r.mount, "log-config.yaml"), got.LogConfigPath, "the file is where the ConfigMap is mounted")
			resources := got.Resources
			got.Resources = config.ResourceConfig{}
			// The build Job's init container runs `function-controller fetch`.
			assert.Equal(t, r.image, got.Build.RepoFetcherImage, "the Git fetcher is the controller's own image")
			want := tt.want()
			want.Build.RepoFetcherImage = got.Build.RepoFetcherImage
			assert.Equal(t, want, got)

			assertChartPresets(t, resources, got.Mode, tt.functionDefault, tt.buildDefault)

			logConfig, err := config.ReadLogConfig(r.logFile)
			require.NoError(t, err)
			assert.Equal(t, tt.wantLog, logConfig)
		})
	}
}

// assertChartPresets checks the presets against 1.8.4's chart and the
// chart's minimums, which the controller now reads (1.8.4 did not); in
// buildless mode the Function presets are release 1.13's, whose XS has
// 256Mi (docs/contributor/upstream-contract.md#preset-values).
func assertChartPresets(t *testing.T, rc config.ResourceConfig, mode config.Mode, functionDefault, buildDefault string) {
	t.Helper()
	xsLimitMemory := "192Mi"
	if mode == config.ModeBuildless {
		xsLimitMemory = "256Mi"
	}
	tables := []struct {
		name           string
		presets        config.Presets
		defaultPreset  string
		minCPU, minMem string
		sizes          map[string][4]string
	}{
		{"function", rc.Function, functionDefault, "10m", "16Mi", map[string][4]string{
			"XS": {"50m", "64Mi", "150m", xsLimitMemory},
			"S":  {"100m", "128Mi", "200m", "256Mi"},
			"M":  {"200m", "256Mi", "400m", "512Mi"},
			"L":  {"400m", "512Mi", "800m", "1024Mi"},
			"XL": {"800m", "1024Mi", "1600m", "2048Mi"},
		}},
		{"buildJob", rc.BuildJob, buildDefault, "200m", "200Mi", map[string][4]string{
			"local-dev": {"200m", "200Mi", "400m", "400Mi"},
			"slow":      {"200m", "200Mi", "700m", "700Mi"},
			"normal":    {"500m", "700Mi", "1100m", "1100Mi"},
			"fast":      {"900m", "1100Mi", "1700m", "1100Mi"},
		}},
	}
	for _, tb := range tables {
		assert.Equal(t, tb.defaultPreset, tb.presets.DefaultPreset, tb.name)
		assert.Zero(t, tb.presets.MinRequestedCPU.Cmp(resource.MustParse(tb.minCPU)), "%s: minRequestedCPU %s", tb.name, tb.presets.MinRequestedCPU.String())
		assert.Zero(t, tb.presets.MinRequestedMemory.Cmp(resource.MustParse(tb.minMem)), "%s: minRequestedMemory %s", tb.name, tb.presets.MinRequestedMemory.String())
		assert.Empty(t, tb.presets.RuntimePresets, tb.name)
		assert.Len(t, tb.presets.Presets, len(tb.sizes), tb.name)
		for name, s := range tb.sizes {
			assertResources(t, requirements(s[0], s[1], s[2], s[3]), tb.presets.Presets[name].Resources())
		}
		// What a Function without resourceConfiguration gets, for every runtime.
		d := tb.sizes[tb.defaultPreset]
		for _, rt := range v1alpha2.Runtimes() {
			got, profile := tb.presets.Resolve(rt, nil)
			assert.Equal(t, tb.defaultPreset, profile, "%s %s", tb.name, rt)
			assertResources(t, requirements(d[0], d[1], d[2], d[3]), got)
		}
	}
}
