package values

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
)

func counter() func(int) string {
	i := 0
	return func(n int) string {
		i++
		return fmt.Sprintf("gen%d-%d", i, n)
	}
}

func TestBuildDefaults(t *testing.T) {
	tests := []struct {
		nodes           int
		wantBuildPreset string
		wantPodPreset   string
	}{
		{nodes: 1, wantBuildPreset: "slow", wantPodPreset: "XS"},
		{nodes: 2, wantBuildPreset: "slow", wantPodPreset: "XS"},
		{nodes: 3, wantBuildPreset: "normal", wantPodPreset: "L"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d nodes", tt.nodes), func(t *testing.T) {
			res, err := Build(v1alpha1.ServerlessSpec{}, Facts{Namespace: "kyma-system", Nodes: tt.nodes, NewSecret: counter()})
			require.NoError(t, err)
			c := res.Values.Controller
			assert.Equal(t, tt.wantBuildPreset, c.ResourcesConfiguration.BuildJob.Resources.DefaultPreset)
			assert.Equal(t, tt.wantPodPreset, c.ResourcesConfiguration.Function.Resources.DefaultPreset)
			assert.Equal(t, "info", c.LogLevel)
			assert.Equal(t, "json", c.LogFormat)
			assert.EqualValues(t, 50, c.Configuration.TargetCPUUtilizationPercentage)
			assert.Equal(t, "5m", c.Configuration.FunctionRequeueDuration)
			assert.EqualValues(t, 5, c.Configuration.FunctionBuildMaxSimultaneousJobs)
			assert.Equal(t, DefaultEventingEndpoint, c.Configuration.FunctionPublisherProxyAddress)
			assert.Empty(t, c.Configuration.FunctionTraceCollectorEndpoint)
			assert.Equal(t, FallbackRegistryAddress, res.Effective.DockerRegistry)
			assert.Equal(t, tt.wantPodPreset, res.Effective.DefaultRuntimePodPreset)
			assert.Equal(t, "False", res.Effective.NetworkPoliciesEnabled)
			assert.Empty(t, res.Warnings)
		})
	}
}

func TestBuildSpecValuesWin(t *testing.T) {
	spec := v1alpha1.ServerlessSpec{
		Eventing:                         &v1alpha1.Endpoint{Endpoint: "http://events.example:8080/p"},
		Tracing:                          &v1alpha1.Endpoint{Endpoint: "https://traces.example/v1/traces"},
		TargetCPUUtilizationPercentage:   ptr.To(intstr.FromInt32(85)),
		FunctionRequeueDuration:          "90s",
		FunctionBuildExecutorArgs:        "--insecure,--cache=false",
		FunctionBuildMaxSimultaneousJobs: ptr.To(intstr.FromString("12")),
		HealthzLivenessTimeout:           "25s",
		DefaultBuildJobPreset:            "fast",
		DefaultRuntimePodPreset:          "M",
		LogLevel:                         "debug",
		LogFormat:                        "text",
		EnableNetworkPolicies:            true,
	}
	res, err := Build(spec, Facts{Namespace: "kyma-system", Nodes: 1, TracingServiceExists: true, NewSecret: counter()})
	require.NoError(t, err)
	e := res.Effective
	assert.Equal(t, "http://events.example:8080/p", e.EventingEndpoint)
	assert.Equal(t, "https://traces.example/v1/traces", e.TracingEndpoint, "the spec wins over the discovered Service")
	assert.Equal(t, "85", e.CPUUtilizationPercentage)
	assert.Equal(t, "90s", e.RequeueDuration)
	assert.Equal(t, "--insecure,--cache=false", e.BuildExecutorArgs)
	assert.Equal(t, "12", e.BuildMaxSimultaneousJobs)
	assert.Equal(t, "25s", e.HealthzLivenessTimeout)
	assert.Equal(t, "fast", e.DefaultBuildJobPreset)
	assert.Equal(t, "M", e.DefaultRuntimePodPreset)
	assert.Equal(t, "debug", e.LogLevel)
	assert.Equal(t, "text", e.LogFormat)
	assert.Equal(t, "True", e.NetworkPoliciesEnabled)
	assert.True(t, res.Values.NetworkPolicies.Enabled)
}

func TestBuildTracingFromService(t *testing.T) {
	res, err := Build(v1alpha1.ServerlessSpec{}, Facts{Namespace: "ns1", TracingServiceExists: true, NewSecret: counter()})
	require.NoError(t, err)
	assert.Equal(t, "http://telemetry-otlp-traces.ns1.svc.cluster.local:4318/v1/traces", res.Effective.TracingEndpoint)
}

func TestBuildRegistry(t *testing.T) {
	fullSecret := map[string][]byte{"username": []byte("u"), "password": []byte("p,w=1"), "serverAddress": []byte("reg.example"), "registryAddress": []byte("reg.example/team")}
	tests := []struct {
		name        string
		registry    *v1alpha1.DockerRegistry
		facts       Facts
		wantErr     string
		wantShown   string
		wantWarning bool
		check       func(t *testing.T, v DockerRegistry, g Global)
	}{
		{
			name:      "internal with fresh credentials",
			registry:  &v1alpha1.DockerRegistry{EnableInternal: ptr.To(true)},
			wantShown: InternalRegistry,
			check: func(t *testing.T, v DockerRegistry, g Global) {
				assert.True(t, v.EnableInternal)
				assert.Equal(t, "gen1-20", v.Username)
				assert.Equal(t, "gen2-40", v.Password)
				assert.Len(t, v.HTTPSecret, 32)
				assert.EqualValues(t, DefaultRegistryNodePort, g.RegistryNodePort)
				assert.Nil(t, v.Persistence)
			},
		},
		{
			name:      "internal keeps credentials, port and volume size",
			registry:  &v1alpha1.DockerRegistry{EnableInternal: ptr.To(true)},
			facts:     Facts{InternalCredentials: &Credentials{Username: "old", Password: "secret"}, NodePort: 30111, PVCSize: "35Gi"},
			wantShown: InternalRegistry,
			check: func(t *testing.T, v DockerRegistry, g Global) {
				assert.Equal(t, "old", v.Username)
				assert.Equal(t, "secret", v.Password)
				assert.Equal(t, httpSecret("secret"), v.HTTPSecret, "the HTTP secret follows the password")
				assert.EqualValues(t, 30111, g.RegistryNodePort)
				require.NotNil(t, v.Persistence)
				assert.Equal(t, "35Gi", v.Persistence.Size)
			},
		},
		{
			name:        "internal wins over a Secret, with a warning",
			registry:    &v1alpha1.DockerRegistry{EnableInternal: ptr.To(true), SecretName: ptr.To("ext")},
			facts:       Facts{RegistrySecret: fullSecret},
			wantShown:   InternalRegistry,
			wantWarning: true,
		},
		{
			name:      "external from the Secret, values intact",
			registry:  &v1alpha1.DockerRegistry{SecretName: ptr.To("ext")},
			facts:     Facts{RegistrySecret: fullSecret},
			wantShown: "reg.example",
			check: func(t *testing.T, v DockerRegistry, _ Global) {
				assert.False(t, v.EnableInternal)
				assert.Equal(t, "p,w=1", v.Password)
				assert.Equal(t, "reg.example/team", v.RegistryAddress)
			},
		},
		{
			name:     "external Secret missing",
			registry: &v1alpha1.DockerRegistry{SecretName: ptr.To("ext")},
			wantErr:  "registry Secret kyma-system/ext not found; create it with the keys username, password, serverAddress, registryAddress",
		},
		{
			name:     "external Secret lacks keys",
			registry: &v1alpha1.DockerRegistry{SecretName: ptr.To("ext")},
			facts:    Facts{RegistrySecret: map[string][]byte{"username": []byte("u"), "serverAddress": []byte(" ")}},
			wantErr:  "registry Secret kyma-system/ext lacks the keys password, registryAddress, serverAddress",
		},
		{
			name:      "neither: k3d fallback",
			registry:  &v1alpha1.DockerRegistry{EnableInternal: ptr.To(false)},
			wantShown: FallbackRegistryAddress,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := tt.facts
			f.Namespace = "kyma-system"
			f.NewSecret = counter()
			res, err := Build(v1alpha1.ServerlessSpec{DockerRegistry: tt.registry}, f)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Equal(t, tt.wantErr, err.Error())
				var ce *ConfigError
				require.ErrorAs(t, err, &ce)
				assert.Equal(t, v1alpha1.ReasonRegistrySecretError, ce.Reason)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.wantShown, res.Effective.DockerRegistry)
			assert.Equal(t, tt.wantWarning, len(res.Warnings) > 0, res.Warnings)
			if tt.check != nil {
				tt.check(t, res.Values.DockerRegistry, res.Values.Global)
			}
		})
	}
}

func TestValuesMapKeepsTypes(t *testing.T) {
	spec := v1alpha1.ServerlessSpec{FunctionBuildExecutorArgs: "--a=1,--b=2", FunctionBuildMaxSimultaneousJobs: ptr.To(intstr.FromInt32(7))}
	res, err := Build(spec, Facts{Namespace: "ns", NewSecret: counter(), ImageOverrides: map[string]string{"registry": "mirror/reg:1"}})
	require.NoError(t, err)
	m, err := res.Values.Map()
	require.NoError(t, err)
	conf := m["controller"].(map[string]any)["configuration"].(map[string]any)
	assert.Equal(t, "--a=1,--b=2", conf["functionBuildExecutorArgs"])
	assert.Equal(t, int64(7), conf["functionBuildMaxSimultaneousJobs"])
	images := m["global"].(map[string]any)["images"].(map[string]any)
	assert.Equal(t, map[string]any{"image": "mirror/reg:1"}, images["registry"])
}

func TestChanges(t *testing.T) {
	old := v1alpha1.EffectiveConfiguration{LogLevel: "info", DockerRegistry: "internal", TracingEndpoint: ""}
	updated := old
	updated.LogLevel = "debug"
	updated.TracingEndpoint = "http://t"
	assert.Equal(t, []string{"tracingEndpoint set from \"\" to http://t", "logLevel set from info to debug"}, Changes(old, updated))
	assert.Empty(t, Changes(old, old))
	assert.Empty(t, Changes(v1alpha1.EffectiveConfiguration{}, updated), "first install reports no changes")
}

func TestPickNodePort(t *testing.T) {
	all := func(lo, hi int32) map[int32]bool {
		m := map[int32]bool{}
		for p := lo; p <= hi; p++ {
			m[p] = true
		}
		return m
	}
	custom := NodePortRange{Min: 20000, Max: 20009}
	tests := []struct {
		name string
		used map[int32]bool
		rng  NodePortRange
		want int32
	}{
		{"default free", nil, DefaultNodePortRange(), 32137},
		{"default taken", map[int32]bool{32137: true, 32138: true}, DefaultNodePortRange(), 32139},
		{"wraps around", all(32137, 32767), DefaultNodePortRange(), 30000},
		{"all taken", all(30000, 32767), DefaultNodePortRange(), 0},
		{"custom range below the default port starts at its minimum", nil, custom, 20000},
		{"custom range skips used ports", map[int32]bool{20000: true}, custom, 20001},
		{"custom range never leaves the range", all(20000, 20009), custom, 0},
		{"custom range holding the default port starts there", map[int32]bool{32137: true}, NodePortRange{Min: 32130, Max: 32140}, 32138},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { assert.Equal(t, tt.want, PickNodePort(tt.used, tt.rng)) })
	}
}

func TestParseNodePortRange(t *testing.T) {
	tests := []struct {
		in      string
		want    NodePortRange
		wantErr bool
	}{
		{"30000-32767", DefaultNodePortRange(), false},
		{" 20000 - 22767 ", NodePortRange{Min: 20000, Max: 22767}, false},
		{"32767-30000", NodePortRange{}, true},
		{"30000", NodePortRange{}, true},
		{"0-100", NodePortRange{}, true},
		{"30000-70000", NodePortRange{}, true},
		{"a-b", NodePortRange{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseNodePortRange(tt.in)
			if tt.wantErr {
				assert.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

// Kaniko flags without a meaning for the module's builder are reported in
// the status, never dropped silently.
func TestIgnoredBuildFlagsAreReported(t *testing.T) {
	for args, ignored := range map[string]string{
		"": "",
		"--insecure,--skip-tls-verify,--skip-unused-stages,--log-format=text,--cache=true,--use-new-run,--compressed-caching=false": "--skip-unused-stages,--log-format=text,--use-new-run,--compressed-caching=false",
		"--insecure,--cache=false": "",
	} {
		res, err := Build(v1alpha1.ServerlessSpec{FunctionBuildExecutorArgs: args}, Facts{Namespace: "ns", NewSecret: counter()})
		require.NoError(t, err)
		assert.Equal(t, ignored, res.Effective.BuildExecutorArgsIgnored, "%q", args)
	}
}

func TestVolumeSize(t *testing.T) {
	q := func(s string) *resource.Quantity { v := resource.MustParse(s); return &v }
	tests := []struct {
		name        string
		asked       *resource.Quantity
		facts       Facts
		want        string
		wantWarning string
		wantErr     string
	}{
		{name: "nothing asked, no claim: the chart's default", want: ""},
		{name: "asked, no claim yet", asked: q("30Gi"), want: "30Gi"},
		{name: "nothing asked keeps the claim", facts: Facts{PVCSize: "35Gi"}, want: "35Gi"},
		{name: "same size", asked: q("35Gi"), facts: Facts{PVCSize: "35Gi"}, want: "35Gi"},
		{name: "larger where the class expands", asked: q("50Gi"), facts: Facts{PVCSize: "20Gi", PVCStorageClass: "ssd", PVCExpandable: true}, want: "50Gi"},
		{name: "larger where the class does not", asked: q("50Gi"), facts: Facts{PVCSize: "20Gi", PVCStorageClass: "standard"}, want: "20Gi",
			wantWarning: `dockerRegistry.volumeSize 50Gi: the internal registry's volume stays 20Gi: its StorageClass "standard" does not allow volume expansion`},
		{name: "smaller", asked: q("10Gi"), facts: Facts{PVCSize: "20Gi", PVCExpandable: true}, want: "20Gi",
			wantWarning: "dockerRegistry.volumeSize 10Gi: the internal registry's volume stays 20Gi: a volume cannot shrink"},
		{name: "zero", asked: q("0"), wantErr: "dockerRegistry.volumeSize 0: must be larger than 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, warning, err := volumeSize(tt.asked, tt.facts)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Equal(t, tt.wantErr, err.Error())
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.wantWarning, warning)
		})
	}
}

// The opt-in to clean an external registry reaches the controller only
// for an external registry (the internal one is always cleaned).
func TestDeleteUnusedExternalImages(t *testing.T) {
	secret := map[string][]byte{"username": []byte("u"), "password": []byte("p"), "serverAddress": []byte("reg.example"), "registryAddress": []byte("reg.example/team")}
	tests := []struct {
		name     string
		registry *v1alpha1.DockerRegistry
		want     bool
	}{
		{name: "not asked", registry: &v1alpha1.DockerRegistry{SecretName: ptr.To("ext")}},
		{name: "asked off", registry: &v1alpha1.DockerRegistry{SecretName: ptr.To("ext"), DeleteUnusedExternalImages: ptr.To(false)}},
		{name: "external Secret", registry: &v1alpha1.DockerRegistry{SecretName: ptr.To("ext"), DeleteUnusedExternalImages: ptr.To(true)}, want: true},
		{name: "fallback registry", registry: &v1alpha1.DockerRegistry{DeleteUnusedExternalImages: ptr.To(true)}, want: true},
		{name: "internal: no effect", registry: &v1alpha1.DockerRegistry{EnableInternal: ptr.To(true), DeleteUnusedExternalImages: ptr.To(true)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := Build(v1alpha1.ServerlessSpec{DockerRegistry: tt.registry}, Facts{Namespace: "kyma-system", Nodes: 1, RegistrySecret: secret,
				NewSecret: counter()})
			require.NoError(t, err)
			assert.Equal(t, tt.want, res.Values.Controller.Configuration.DeleteUnusedExternalImages)
		})
	}
}
