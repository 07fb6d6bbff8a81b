package values_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kyma-project/serverless-manager/charts"
	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/internal/function/config"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/render"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/values"
	"github.com/kyma-project/serverless-manager/tests/support/testenv"
)

// upstreamDefaultArgs are the build flags our chart sets where upstream's
// (config/serverless/values.yaml, 1.8.4) set its kaniko arguments, which
// its operator keeps when the spec leaves functionBuildExecutorArgs empty:
// its flags that mean something to our builder, the kaniko-only ones gone
// with kaniko (a spec that sets them keeps them, reported as ignored).
var upstreamDefaultArgs = []string{"--insecure", "--skip-tls-verify", "--cache=true"}

// upstreamConfig is the Function controller configuration upstream's
// operator 1.8.4 produces for a spec, worked out by hand from its rules
// (components/operator/internal/state and chart/flags.go): a spec string is
// handed to Helm as given (an empty one keeps the chart default: 50, 5m,
// 5, 10s), the presets default by node count (≤ 2 nodes slow/XS, else
// normal/L), the endpoints are the spec's when the spec has the block
// (empty included), else the default publisher proxy and the discovered
// telemetry Service or none.
type upstreamConfig struct {
	cpu, jobs, requeue, liveness string // raw env values
	args                         []string
	publisher, tracer            string
	buildPreset, podPreset       string
	logLevel, logFormat          string
	netpol                       bool
}

func defaults(nodes int) upstreamConfig {
	c := upstreamConfig{cpu: "50", jobs: "5", requeue: "5m", liveness: "10s", args: upstreamDefaultArgs,
		publisher:   "http://eventing-publisher-proxy.kyma-system.svc.cluster.local/publish",
		buildPreset: "slow", podPreset: "XS", logLevel: "info", logFormat: "json"}
	if nodes > 2 {
		c.buildPreset, c.podPreset = "normal", "L"
	}
	return c
}

func with(c upstreamConfig, f func(*upstreamConfig)) upstreamConfig { f(&c); return c }

// Serverless CRs as upstream's users write them (its CRD types every number
// as a string, its docs show numbers as integers) are admitted by the CRD
// here, and the Function controller gets the configuration upstream's
// operator would give it.
func TestUpstreamShapedCRs(t *testing.T) {
	env := testenv.Start(t, "config/crd/bases")
	ctx := context.Background()
	require.NoError(t, env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kyma-system"}}))
	r, err := render.LoadChart(charts.Serverless())
	require.NoError(t, err)
	renderer := render.New(r, nil)
	registrySecret := map[string][]byte{"username": []byte("robot"), "password": []byte("pw"),
		"serverAddress": []byte("registry.example.com"), "registryAddress": []byte("registry.example.com/team")}

	tests := []struct {
		name      string
		spec      string // YAML
		nodes     int
		telemetry bool // the telemetry-otlp-traces Service exists
		want      upstreamConfig
	}{
		{name: "no spec", spec: `{}`, nodes: 1, want: defaults(1)},
		{name: "upstream's default CR (internal registry), big cluster", spec: `{dockerRegistry: {enableInternal: true}}`, nodes: 3, want: defaults(3)},
		{name: "upstream's k3d sample", spec: `{dockerRegistry: {enableInternal: false}}`, nodes: 1, want: defaults(1)},
		{name: "upstream's network policies sample", spec: `{dockerRegistry: {enableInternal: true}, enableNetworkPolicies: true}`, nodes: 3,
			want: with(defaults(3), func(c *upstreamConfig) { c.netpol = true })},
		{name: "every string empty", nodes: 3, spec: `{targetCPUUtilizationPercentage: "", functionRequeueDuration: "", functionBuildExecutorArgs: "",
			functionBuildMaxSimultaneousJobs: "", healthzLivenessTimeout: "", defaultBuildJobPreset: "", defaultRuntimePodPreset: "", logLevel: "", logFormat: ""}`,
			want: defaults(3)},
		{name: "numbers as strings, as upstream's CRD types them", nodes: 1,
			spec: `{targetCPUUtilizationPercentage: "75", functionBuildMaxSimultaneousJobs: "10"}`,
			want: with(defaults(1), func(c *upstreamConfig) { c.cpu, c.jobs = "75", "10" })},
		{name: "numbers as integers, as upstream's docs show them", nodes: 1,
			spec: `{targetCPUUtilizationPercentage: 50, functionBuildMaxSimultaneousJobs: 5}`, want: defaults(1)},
		{name: "CPU target above 100 (relative to the request)", nodes: 1, spec: `{targetCPUUtilizationPercentage: "150"}`,
			want: with(defaults(1), func(c *upstreamConfig) { c.cpu = "150" })},
		{name: "upstream's documented sample CR, numbers as strings", nodes: 1, spec: `
dockerRegistry: {enableInternal: false, secretName: my-secret}
eventing: {endpoint: "http://eventing-publisher-proxy.kyma-system.svc.cluster.local/publish"}
tracing: {endpoint: "http://telemetry-otlp-traces.kyma-system.svc.cluster.local:4318/v1/traces"}
targetCPUUtilizationPercentage: "50"
functionRequeueDuration: 5m
functionBuildExecutorArgs: "--insecure,--skip-tls-verify,--skip-unused-stages,--log-format=text,--cache=true,--use-new-run,--compressed-caching=false"
functionBuildMaxSimultaneousJobs: "5"
healthzLivenessTimeout: "10s"
defaultBuildJobPreset: "normal"
defaultRuntimePodPreset: "M"
logLevel: "info"
logFormat: "json"`,
			want: with(defaults(1), func(c *upstreamConfig) {
				c.tracer = "http://telemetry-otlp-traces.kyma-system.svc.cluster.local:4318/v1/traces"
				c.buildPreset, c.podPreset = "normal", "M"
				c.args = []string{"--insecure", "--skip-tls-verify", "--skip-unused-stages", "--log-format=text",
					"--cache=true", "--use-new-run", "--compressed-caching=false"}
			})},
		{name: "every field", nodes: 3, spec: `
dockerRegistry: {secretName: my-secret}
eventing: {endpoint: "http://events.example:8080/publish"}
tracing: {endpoint: "https://otel.example/v1/traces"}
targetCPUUtilizationPercentage: "80"
functionRequeueDuration: 1h30m
functionBuildExecutorArgs: "--insecure,--cache=false,--verbosity=debug"
functionBuildMaxSimultaneousJobs: "12"
healthzLivenessTimeout: 500ms
defaultBuildJobPreset: fast
defaultRuntimePodPreset: XL
logLevel: debug
logFormat: text
enableNetworkPolicies: true`,
			want: upstreamConfig{cpu: "80", jobs: "12", requeue: "1h30m", liveness: "500ms",
				args:      []string{"--insecure", "--cache=false", "--verbosity=debug"},
				publisher: "http://events.example:8080/publish", tracer: "https://otel.example/v1/traces",
				buildPreset: "fast", podPreset: "XL", logLevel: "debug", logFormat: "text", netpol: true}},
		{name: "1.13's logging page: console and dpanic", nodes: 1, spec: `{logLevel: dpanic, logFormat: console}`,
			want: with(defaults(1), func(c *upstreamConfig) { c.logLevel, c.logFormat = "error", "text" })},
		{name: "1.13's CRD took any string: the defaults apply", nodes: 1, spec: `{logLevel: Verbose, logFormat: pretty}`,
			want: defaults(1)},
		{name: "Go duration spellings", nodes: 1, spec: `{functionRequeueDuration: "+90s", healthzLivenessTimeout: ".5s"}`,
			want: with(defaults(1), func(c *upstreamConfig) { c.requeue, c.liveness = "+90s", ".5s" })},
		{name: "telemetry Service found", nodes: 1, telemetry: true, spec: `{}`,
			want: with(defaults(1), func(c *upstreamConfig) {
				c.tracer = "http://telemetry-otlp-traces.kyma-system.svc.cluster.local:4318/v1/traces"
			})},
		{name: "empty endpoints switch tracing and eventing off", nodes: 1, telemetry: true,
			spec: `{tracing: {endpoint: ""}, eventing: {endpoint: ""}}`,
			want: with(defaults(1), func(c *upstreamConfig) { c.publisher, c.tracer = "", "" })},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var spec map[string]any
			require.NoError(t, yaml.Unmarshal([]byte(tt.spec), &spec))
			u := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "operator.kyma-project.io/v1alpha1", "kind": "Serverless",
				"metadata": map[string]any{"namespace": "kyma-system", "name": fmt.Sprintf("upstream-%d", i)},
				"spec":     spec,
			}}
			require.NoError(t, env.Client.Create(ctx, u), "the CRD admits what upstream's admits")
			cr := &v1alpha1.Serverless{}
			require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(u), cr))

			built, err := values.Build(cr.Spec, values.Facts{Namespace: "kyma-system", Nodes: tt.nodes,
				TracingServiceExists: tt.telemetry, RegistrySecret: registrySecret,
				NewSecret: func(n int) string { return strings.Repeat("s", n) }})
			require.NoError(t, err)
			vals, err := built.Values.Map()
			require.NoError(t, err)
			objs, err := renderer.Render("kyma-system", vals)
			require.NoError(t, err)

			envs, logConfig, netpols := controllerConfig(t, objs)
			w := tt.want
			// Raw values as upstream's chart renders them ("50", not 50.0 or "050").
			assert.Equal(t, w.cpu, envs[config.EnvTargetCPUUtilizationPercentage])
			assert.Equal(t, w.jobs, envs[config.EnvBuildMaxSimultaneousJobs])
			assert.Equal(t, w.liveness, envs[config.EnvHealthzLivenessTimeout])
			// Upstream passes functionRequeueDuration to APP_FUNCTION_REQUEUE_DURATION, which its
			// controller parses and never uses; here it is the requeue of ready Functions.
			assert.Equal(t, w.requeue, envs[config.EnvFunctionReadyRequeueDuration])
			assert.Equal(t, strings.Join(w.args, ","), envs[config.EnvBuildExecutorArgs])
			assert.Equal(t, w.publisher, envs["APP_FUNCTION_PUBLISHER_PROXY_ADDRESS"])
			assert.Equal(t, w.tracer, envs["APP_FUNCTION_TRACE_COLLECTOR_ENDPOINT"])
			assert.Equal(t, map[string]string{"logLevel": w.logLevel, "logFormat": w.logFormat}, logConfig)
			assert.Equal(t, w.netpol, netpols > 0, "NetworkPolicies rendered")

			// And the controller reads them as the numbers and durations they mean.
			cfg, err := config.Load(func(k string) (string, bool) { v, ok := envs[k]; return v, ok && v != "" })
			require.NoError(t, err, "the Function controller starts with this configuration")
			assert.Equal(t, w.cpu, fmt.Sprint(cfg.TargetCPUUtilizationPercentage))
			assert.Equal(t, w.jobs, fmt.Sprint(cfg.Build.MaxSimultaneousJobs))
			assert.Equal(t, mustDuration(t, w.liveness), cfg.HealthzLivenessTimeout)
			assert.Equal(t, mustDuration(t, w.requeue), cfg.FunctionReadyRequeueDuration)
			assert.Equal(t, w.args, cfg.Build.ExecutorArgs)
			assert.Equal(t, w.buildPreset, cfg.Resources.BuildJob.DefaultPreset)
			assert.Equal(t, w.podPreset, cfg.Resources.Function.DefaultPreset)

			// The status shows what upstream's status would, with the defaults filled in.
			e := built.Effective
			assert.Equal(t, w.cpu, e.CPUUtilizationPercentage)
			assert.Equal(t, w.jobs, e.BuildMaxSimultaneousJobs)
			assert.Equal(t, map[bool]string{true: "True", false: "False"}[w.netpol], e.NetworkPoliciesEnabled)
		})
	}
}

func mustDuration(t *testing.T, s string) time.Duration {
	t.Helper()
	d, err := time.ParseDuration(s)
	require.NoError(t, err)
	return d
}

// controllerConfig returns the Function controller Deployment's env, its log
// configuration file and the number of NetworkPolicies rendered.
func controllerConfig(t *testing.T, objs []*unstructured.Unstructured) (map[string]string, map[string]string, int) {
	t.Helper()
	envs := map[string]string{}
	logConfig := map[string]string{}
	netpols := 0
	found := false
	for _, o := range objs {
		switch {
		case o.GetKind() == "NetworkPolicy":
			netpols++
		case o.GetKind() == "ConfigMap" && o.GetName() == "serverless-configuration":
			data, _, _ := unstructured.NestedStringMap(o.Object, "data")
			require.NoError(t, yaml.Unmarshal([]byte(data["log-config.yaml"]), &logConfig))
		case o.GetKind() == "Deployment" && o.GetName() == "serverless-ctrl-mngr":
			found = true
			containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			require.NotEmpty(t, containers)
			list, _, _ := unstructured.NestedSlice(containers[0].(map[string]any), "env")
			for _, item := range list {
				m := item.(map[string]any)
				v, _ := m["value"].(string)
				envs[m["name"].(string)] = v
			}
		}
	}
	require.True(t, found, "the chart renders the controller Deployment")
	return envs, logConfig, netpols
}

// upstreamStatus holds the status fields of upstream's Serverless CRD with
// their types, written from its documentation
// (docs/user/resources/06-20-serverless-cr.md and the CRD of 1.8.4): every
// value a string, served and networkPoliciesEnabled "True"/"False".
type upstreamStatus struct {
	Conditions               []metav1.Condition `json:"conditions"`
	DockerRegistry           string             `json:"dockerRegistry"`
	EventingEndpoint         string             `json:"eventingEndpoint"`
	TracingEndpoint          string             `json:"tracingEndpoint"`
	Served                   string             `json:"served"`
	State                    string             `json:"state"`
	CPUUtilizationPercentage string             `json:"targetCPUUtilizationPercentage"`
	RequeueDuration          string             `json:"functionRequeueDuration"`
	BuildExecutorArgs        string             `json:"functionBuildExecutorArgs"`
	BuildMaxSimultaneousJobs string             `json:"functionBuildMaxSimultaneousJobs"`
	HealthzLivenessTimeout   string             `json:"healthzLivenessTimeout"`
	DefaultBuildJobPreset    string             `json:"defaultBuildJobPreset"`
	DefaultRuntimePodPreset  string             `json:"defaultRuntimePodPreset"`
	LogLevel                 string             `json:"logLevel"`
	LogFormat                string             `json:"logFormat"`
	NetworkPoliciesEnabled   string             `json:"networkPoliciesEnabled"`
}

// A client built on upstream's status types decodes the status the manager
// writes, as stored by the API server, and reads the values it expects.
func TestStatusDecodesAsUpstreams(t *testing.T) {
	env := testenv.Start(t, "config/crd/bases")
	ctx := context.Background()
	c := env.Client
	require.NoError(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kyma-system"}}))

	tests := []struct {
		name        string
		spec        v1alpha1.ServerlessSpec
		state       v1alpha1.State
		conditions  []metav1.Condition
		want        upstreamStatus
		wantReasons map[string]string
	}{
		{
			name:  "ready with network policies",
			spec:  v1alpha1.ServerlessSpec{EnableNetworkPolicies: true, LogLevel: "debug"},
			state: v1alpha1.StateReady,
			conditions: []metav1.Condition{
				v1alpha1.NewCondition(v1alpha1.ConditionConfigured, metav1.ConditionTrue, v1alpha1.ReasonConfigured, "configuration is valid", 1),
				v1alpha1.NewCondition(v1alpha1.ConditionInstalled, metav1.ConditionTrue, v1alpha1.ReasonInstalled, "installed", 1),
			},
			want: upstreamStatus{Served: "True", State: "Ready", DockerRegistry: values.FallbackRegistryAddress,
				EventingEndpoint: values.DefaultEventingEndpoint, CPUUtilizationPercentage: "50", RequeueDuration: "5m",
				BuildExecutorArgs: strings.Join(upstreamDefaultArgs, ","), BuildMaxSimultaneousJobs: "5", HealthzLivenessTimeout: "10s",
				DefaultBuildJobPreset: "normal", DefaultRuntimePodPreset: "L", LogLevel: "debug", LogFormat: "json", NetworkPoliciesEnabled: "True"},
			wantReasons: map[string]string{"Configured": "Configured", "Installed": "Installed"},
		},
		{
			name:  "apply failed",
			state: v1alpha1.StateError,
			conditions: []metav1.Condition{
				v1alpha1.NewCondition(v1alpha1.ConditionConfigured, metav1.ConditionTrue, v1alpha1.ReasonConfigured, "configuration is valid", 1),
				v1alpha1.NewCondition(v1alpha1.ConditionInstalled, metav1.ConditionFalse, v1alpha1.ReasonApplyFailed, "applying Deployment kyma-system/x: forbidden", 1),
			},
			want: upstreamStatus{Served: "True", State: "Error", DockerRegistry: values.FallbackRegistryAddress,
				EventingEndpoint: values.DefaultEventingEndpoint, CPUUtilizationPercentage: "50", RequeueDuration: "5m",
				BuildExecutorArgs: strings.Join(upstreamDefaultArgs, ","), BuildMaxSimultaneousJobs: "5", HealthzLivenessTimeout: "10s",
				DefaultBuildJobPreset: "normal", DefaultRuntimePodPreset: "L", LogLevel: "info", LogFormat: "json", NetworkPoliciesEnabled: "False"},
			wantReasons: map[string]string{"Configured": "Configured", "Installed": "InstallationErr"},
		},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cr := &v1alpha1.Serverless{ObjectMeta: metav1.ObjectMeta{Namespace: "kyma-system", Name: fmt.Sprintf("status-%d", i)}, Spec: tt.spec}
			require.NoError(t, c.Create(ctx, cr))
			built, err := values.Build(cr.Spec, values.Facts{Namespace: "kyma-system", Nodes: 3, NewSecret: func(n int) string { return strings.Repeat("s", n) }})
			require.NoError(t, err)
			for i := range tt.conditions {
				tt.conditions[i].LastTransitionTime = metav1.Now().Rfc3339Copy()
			}
			cr.Status = v1alpha1.ServerlessStatus{State: tt.state, Served: metav1.ConditionTrue, ObservedGeneration: cr.Generation,
				Conditions: tt.conditions, ChartVersion: "1.2.3", EffectiveConfiguration: built.Effective,
				Inventory: []v1alpha1.InventoryEntry{{ID: "/ConfigMap/kyma-system/serverless-configuration", Digest: "abc", Version: "1"}}}
			require.NoError(t, c.Status().Update(ctx, cr), "the API server stores the status")

			stored := &unstructured.Unstructured{}
			stored.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("Serverless"))
			require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(cr), stored))
			data, err := json.Marshal(stored.Object["status"])
			require.NoError(t, err)
			var got upstreamStatus
			require.NoError(t, json.Unmarshal(data, &got), "upstream's types decode our status: %s", data)
			reasons := map[string]string{}
			for _, cond := range got.Conditions {
				reasons[cond.Type] = cond.Reason
			}
			assert.Equal(t, tt.wantReasons, reasons)
			got.Conditions = nil
			assert.Equal(t, tt.want, got)
		})
	}
}
