package config_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/internal/function/config"
)

func TestCheckCustom(t *testing.T) {
	withMinimums := config.Presets{MinRequestedCPU: resource.MustParse("10m"), MinRequestedMemory: resource.MustParse("16Mi")}
	custom := func(r corev1.ResourceRequirements) *v1alpha2.ResourceRequirements {
		return &v1alpha2.ResourceRequirements{Resources: &r}
	}
	tests := []struct {
		name    string
		presets config.Presets
		req     *v1alpha2.ResourceRequirements
		want    string // "" = no error; else the whole message
	}{
		{"no block", withMinimums, nil, ""},
		{"profile only: not checked", withMinimums, &v1alpha2.ResourceRequirements{Profile: "XS"}, ""},
		{"fine", withMinimums, custom(requirements("100m", "128Mi", "200m", "256Mi")), ""},
		{"exactly the minimums", withMinimums, custom(requirements("10m", "16Mi", "10m", "16Mi")), ""},
		{"minimums in other units", withMinimums, custom(requirements("0.01", "16777216", "", "")), ""},
		{"nothing given", withMinimums, custom(corev1.ResourceRequirements{}), ""},
		{"limits only", withMinimums, custom(requirements("", "", "1", "1Gi")), ""},
		{"requests only", withMinimums, custom(requirements("1", "1Gi", "", "")), ""},
		{"other resources ignored", withMinimums, custom(corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse("1Ki")},
			Limits:   corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse("1")}}), ""},
		{"request cpu below", withMinimums, custom(requirements("5m", "", "", "")),
			"resources.requests.cpu 5m is below the minimum 10m"},
		{"request memory below", withMinimums, custom(requirements("", "8Mi", "", "")),
			"resources.requests.memory 8Mi is below the minimum 16Mi"},
		{"limit cpu below", withMinimums, custom(requirements("", "", "1m", "")),
			"resources.limits.cpu 1m is below the minimum 10m"},
		{"limit memory below", withMinimums, custom(requirements("", "", "", "1Mi")),
			"resources.limits.memory 1Mi is below the minimum 16Mi"},
		{"cpu request above limit", withMinimums, custom(requirements("500m", "", "200m", "")),
			"resources.requests.cpu 500m is above resources.limits.cpu 200m"},
		{"memory request above limit, other units", withMinimums, custom(requirements("", "1Gi", "", "1000Mi")),
			"resources.requests.memory 1Gi is above resources.limits.memory 1000Mi"},
		{"equal request and limit", withMinimums, custom(requirements("1", "1Gi", "1000m", "1024Mi")), ""},
		{"every problem, in field order", withMinimums, custom(requirements("1m", "1Mi", "0", "2Ki")),
			"resources.requests.cpu 1m is below the minimum 10m; resources.requests.memory 1Mi is below the minimum 16Mi; " +
				"resources.limits.cpu 0 is below the minimum 10m; resources.limits.memory 2Ki is below the minimum 16Mi; " +
				"resources.requests.cpu 1m is above resources.limits.cpu 0; resources.requests.memory 1Mi is above resources.limits.memory 2Ki"},
		{"no minimums: tiny is fine", config.Presets{}, custom(requirements("1m", "1Ki", "1m", "1Ki")), ""},
		{"no minimums: request above limit still wrong", config.Presets{}, custom(requirements("", "2Mi", "", "1Mi")),
			"resources.requests.memory 2Mi is above resources.limits.memory 1Mi"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.presets.CheckCustom(tt.req)
			if tt.want == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Equal(t, tt.want, err.Error())
		})
	}
}
