package config_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/internal/function/config"
)

func requirements(reqCPU, reqMem, limCPU, limMem string) corev1.ResourceRequirements {
	list := func(cpu, mem string) corev1.ResourceList {
		l := corev1.ResourceList{}
		if cpu != "" {
			l[corev1.ResourceCPU] = resource.MustParse(cpu)
		}
		if mem != "" {
			l[corev1.ResourceMemory] = resource.MustParse(mem)
		}
		if len(l) == 0 {
			return nil
		}
		return l
	}
	return corev1.ResourceRequirements{Requests: list(reqCPU, reqMem), Limits: list(limCPU, limMem)}
}

// docs/contributor/upstream-contract.md#resolving-resources.
func TestResolve(t *testing.T) {
	presets := config.Presets{
		DefaultPreset: "L",
		Presets: map[string]config.Preset{
			"S":  {RequestCPU: q("100m"), RequestMemory: q("128Mi"), LimitCPU: q("200m"), LimitMemory: q("256Mi")},
			"L":  {RequestCPU: q("400m"), RequestMemory: q("512Mi"), LimitCPU: q("800m"), LimitMemory: q("1024Mi")},
			"XL": {RequestCPU: q("800m"), RequestMemory: q("1Gi")}, // no limits given: none set
		},
		RuntimePresets: map[string]map[string]config.Preset{
			// Replaces the generic presets for python312: no L here, so no default either.
			"python312": {"S": {RequestCPU: q("150m"), RequestMemory: q("192Mi"), LimitCPU: q("300m"), LimitMemory: q("384Mi")}},
		},
	}
	custom := &corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("5m"), "nvidia.com/gpu": resource.MustParse("1")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("3Gi"), "nvidia.com/gpu": resource.MustParse("1")},
		Claims:   []corev1.ResourceClaim{{Name: "gpu"}},
	}
	large := requirements("400m", "512Mi", "800m", "1Gi")

	tests := []struct {
		name        string
		presets     config.Presets
		runtime     v1alpha2.Runtime
		req         *v1alpha2.ResourceRequirements
		want        corev1.ResourceRequirements
		wantProfile string
	}{
		{"no resourceConfiguration: default", presets, v1alpha2.RuntimeNodejs20, nil, large, "L"},
		{"empty block: default", presets, v1alpha2.RuntimeNodejs22, &v1alpha2.ResourceRequirements{}, large, "L"},
		{"profile found", presets, v1alpha2.RuntimeNodejs20, &v1alpha2.ResourceRequirements{Profile: "S"},
			requirements("100m", "128Mi", "200m", "256Mi"), "S"},
		{"profile with quantities left out", presets, v1alpha2.RuntimeNodejs20, &v1alpha2.ResourceRequirements{Profile: "XL"},
			requirements("800m", "1Gi", "", ""), "XL"},
		{"profile wins over resources", presets, v1alpha2.RuntimeNodejs20,
			&v1alpha2.ResourceRequirements{Profile: "S", Resources: custom}, requirements("100m", "128Mi", "200m", "256Mi"), "S"},
		{"resources verbatim", presets, v1alpha2.RuntimeNodejs20, &v1alpha2.ResourceRequirements{Resources: custom}, *custom, "custom"},
		{"empty resources verbatim", presets, v1alpha2.RuntimeNodejs20,
			&v1alpha2.ResourceRequirements{Resources: &corev1.ResourceRequirements{}}, corev1.ResourceRequirements{}, "custom"},
		{"unknown profile with resources: custom", presets, v1alpha2.RuntimeNodejs20,
			&v1alpha2.ResourceRequirements{Profile: "XS", Resources: custom}, *custom, "custom"},
		// 1.8.4 showed "XS" here although the Pods got L.
		{"unknown profile: default, named as applied", presets, v1alpha2.RuntimeNodejs20,
			&v1alpha2.ResourceRequirements{Profile: "XS"}, large, "L"},
		{"runtime presets replace the generic ones", presets, v1alpha2.RuntimePython312,
			&v1alpha2.ResourceRequirements{Profile: "S"}, requirements("150m", "192Mi", "300m", "384Mi"), "S"},
		{"runtime presets: generic-only profile and default missing: empty", presets, v1alpha2.RuntimePython312,
			&v1alpha2.ResourceRequirements{Profile: "L"}, corev1.ResourceRequirements{}, ""},
		{"runtime presets: no default: empty", presets, v1alpha2.RuntimePython312, nil, corev1.ResourceRequirements{}, ""},
		{"runtime presets: resources still verbatim", presets, v1alpha2.RuntimePython312,
			&v1alpha2.ResourceRequirements{Resources: custom}, *custom, "custom"},
		{"unknown default: empty", config.Presets{DefaultPreset: "M", Presets: presets.Presets}, v1alpha2.RuntimeNodejs20,
			nil, corev1.ResourceRequirements{}, ""},
		{"no default: empty", config.Presets{Presets: presets.Presets}, v1alpha2.RuntimeNodejs20,
			&v1alpha2.ResourceRequirements{Profile: "M"}, corev1.ResourceRequirements{}, ""},
		{"no configuration at all: empty", config.Presets{}, v1alpha2.RuntimeNodejs20, nil, corev1.ResourceRequirements{}, ""},
		{"no configuration at all: resources verbatim", config.Presets{}, v1alpha2.RuntimeNodejs20,
			&v1alpha2.ResourceRequirements{Resources: custom}, *custom, "custom"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, profile := tt.presets.Resolve(tt.runtime, tt.req)
			assert.Equal(t, tt.wantProfile, profile)
			assertResources(t, tt.want, got)
		})
	}
}

func TestResolveCopiesCustomResources(t *testing.T) {
	custom := requirements("100m", "", "", "")
	req := &v1alpha2.ResourceRequirements{Resources: &custom}
	got, _ := config.Presets{}.Resolve(v1alpha2.RuntimeNodejs20, req)
	got.Requests[corev1.ResourceMemory] = resource.MustParse("1Gi")
	assert.NotContains(t, req.Resources.Requests, corev1.ResourceMemory, "the Function's spec must not change")
}
