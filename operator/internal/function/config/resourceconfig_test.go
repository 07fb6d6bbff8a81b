package config_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/kyma-project/serverless-manager/operator/internal/function/config"
)

func q(s string) *resource.Quantity {
	v := resource.MustParse(s)
	return &v
}

// assertResources compares quantities by value (1024Mi equals 1Gi) and
// requires the same resource names.
func assertResources(t *testing.T, want, got corev1.ResourceRequirements) {
	t.Helper()
	for _, side := range []struct {
		name      string
		want, got corev1.ResourceList
	}{{"requests", want.Requests, got.Requests}, {"limits", want.Limits, got.Limits}} {
		require.Len(t, side.got, len(side.want), "%s: %v", side.name, side.got)
		if side.want == nil {
			assert.Nil(t, side.got, side.name)
		}
		for name, w := range side.want {
			g, ok := side.got[name]
			require.True(t, ok, "%s.%s missing", side.name, name)
			assert.Zero(t, w.Cmp(g), "%s.%s: want %s, got %s", side.name, name, w.String(), g.String())
		}
	}
	assert.Equal(t, want.Claims, got.Claims)
}

func TestParseResourceConfig(t *testing.T) {
	doc := `
function:
  resources:
    minRequestedCPU: 10m
    minRequestedMemory: 16Mi
    defaultPreset: L
    presets:
      S: {requestCpu: 100m, requestMemory: 128Mi, limitCpu: 200m, limitMemory: 256Mi}
      L: {requestCpu: 400m, requestMemory: 512Mi, limitCpu: 800m, limitMemory: 1024Mi}
    runtimePresets:
      python312:
        L: {requestCpu: 1, requestMemory: 1Gi, limitCpu: 2, limitMemory: 2Gi}
buildJob:
  resources:
    minRequestedCPU: "200m"
    minRequestedMemory: 200Mi
    defaultPreset: normal
    presets:
      normal: {requestCpu: 500m, requestMemory: 700Mi, limitCpu: 1100m, limitMemory: 1100Mi}
      partial: {requestMemory: 100Mi}
`
	rc, err := config.ParseResourceConfig([]byte(doc))
	require.NoError(t, err)

	fn := rc.Function
	assert.Equal(t, "L", fn.DefaultPreset)
	assert.Zero(t, fn.MinRequestedCPU.Cmp(resource.MustParse("10m")), fn.MinRequestedCPU.String())
	assert.Zero(t, fn.MinRequestedMemory.Cmp(resource.MustParse("16Mi")), fn.MinRequestedMemory.String())
	require.Len(t, fn.Presets, 2)
	assertResources(t, corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("400m"), corev1.ResourceMemory: resource.MustParse("512Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("800m"), corev1.ResourceMemory: resource.MustParse("1Gi")},
	}, fn.Presets["L"].Resources())
	require.Len(t, fn.RuntimePresets, 1)
	assertResources(t, corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("2Gi")},
	}, fn.RuntimePresets["python312"]["L"].Resources())

	build := rc.BuildJob
	assert.Equal(t, "normal", build.DefaultPreset)
	assert.Zero(t, build.MinRequestedCPU.Cmp(resource.MustParse("200m")))
	assert.Zero(t, build.MinRequestedMemory.Cmp(resource.MustParse("200Mi")))
	// A quantity left out stays unset instead of becoming 0 (1.8.4).
	assert.Equal(t, config.Preset{RequestMemory: q("100Mi")}, build.Presets["partial"])
	assertResources(t, corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("100Mi")},
	}, build.Presets["partial"].Resources())
}

func TestParseResourceConfigEmpty(t *testing.T) {
	for _, doc := range []string{"{}", "function: {}\nbuildJob: {}\n", "function:\n  resources: {}\n"} {
		rc, err := config.ParseResourceConfig([]byte(doc))
		require.NoError(t, err, doc)
		assert.Empty(t, rc.Function.Presets)
		assert.Empty(t, rc.Function.DefaultPreset)
		assert.True(t, rc.Function.MinRequestedCPU.IsZero())
		assert.Empty(t, rc.BuildJob.Presets)
	}
}

func TestParseResourceConfigErrors(t *testing.T) {
	tests := []struct {
		name, doc string
		want      []string // all in the message
	}{
		{"not YAML", "function: [", []string{"parsing"}},
		{"not an object", "- a\n- b\n", []string{"parsing"}},
		// The upstream chart's spelling: 1.8.4 ignored it silently and checked against 0.
		{"upstream minimum keys", "function:\n  resources:\n    minRequestCpu: 10m\n", []string{"minRequestCpu"}},
		{"unknown top-level key", "functions:\n  resources: {}\n", []string{"functions"}},
		{"unknown preset key", "buildJob:\n  resources:\n    presets:\n      fast: {requestCPUs: 1}\n", []string{"requestCPUs"}},
		{"duplicate key", "function:\n  resources:\n    defaultPreset: L\n    defaultPreset: S\n", []string{"defaultPreset"}},
		{"bad quantity", "function:\n  resources:\n    presets:\n      S: {limitCpu: lots}\n", []string{"parsing"}},
		{"negative minimum", "function:\n  resources:\n    minRequestedMemory: -1Mi\n",
			[]string{"function.resources.minRequestedMemory", "negative"}},
		{"negative preset quantity", "buildJob:\n  resources:\n    presets:\n      fast: {requestCpu: -1}\n",
			[]string{"buildJob.resources.presets.fast", "requestCpu -1 is negative"}},
		{"cpu request above limit", "function:\n  resources:\n    presets:\n      M: {requestCpu: 500m, limitCpu: 400m}\n",
			[]string{"function.resources.presets.M", "requestCpu 500m is above limitCpu 400m"}},
		{"memory request above limit in a runtime preset",
			"function:\n  resources:\n    runtimePresets:\n      nodejs22:\n        M: {requestMemory: 1Gi, limitMemory: 512Mi}\n",
			[]string{"function.resources.runtimePresets.nodejs22.M", "requestMemory 1Gi is above limitMemory 512Mi"}},
		{"unknown runtime", "function:\n  resources:\n    runtimePresets:\n      nodejs18:\n        M: {}\n",
			[]string{"function.resources.runtimePresets.nodejs18", "unknown runtime"}},
		{"every problem", "function:\n  resources:\n    presets:\n      M: {requestCpu: 2, limitCpu: 1}\nbuildJob:\n  resources:\n    minRequestedCPU: -1\n",
			[]string{"function.resources.presets.M", "buildJob.resources.minRequestedCPU"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := config.ParseResourceConfig([]byte(tt.doc))
			require.Error(t, err)
			for _, w := range tt.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestPresetResources(t *testing.T) {
	tests := []struct {
		name   string
		preset config.Preset
		want   corev1.ResourceRequirements
	}{
		{"empty", config.Preset{}, corev1.ResourceRequirements{}},
		{"full", config.Preset{RequestCPU: q("50m"), RequestMemory: q("64Mi"), LimitCPU: q("150m"), LimitMemory: q("192Mi")},
			corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
				Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("150m"), corev1.ResourceMemory: resource.MustParse("192Mi")},
			}},
		{"limits only", config.Preset{LimitCPU: q("1"), LimitMemory: q("1Gi")}, corev1.ResourceRequirements{
			Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}}},
		{"zero kept", config.Preset{RequestCPU: q("0")}, corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("0")}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.preset.Resources()
			assertResources(t, tt.want, got)
			// The preset's quantities are copied, not shared with the result.
			if tt.preset.RequestCPU != nil {
				cpu := got.Requests[corev1.ResourceCPU]
				cpu.Add(resource.MustParse("1"))
				got.Requests[corev1.ResourceCPU] = cpu
				assert.NotZero(t, tt.preset.RequestCPU.Cmp(got.Requests[corev1.ResourceCPU]))
			}
		})
	}
}
