package values

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
)

// A CR stored before this CRD (upstream's accepted any string) can hold
// values the Function controller cannot start with: Build refuses them with
// a ConfigError naming the field, and takes every upstream spelling it can.
func TestBuildChecksStoredSpecs(t *testing.T) {
	num := func(s string) *intstr.IntOrString { return ptr.To(intstr.FromString(s)) }
	tests := []struct {
		name     string
		spec     v1alpha1.ServerlessSpec
		wantErr  string // substring; empty = accepted
		wantCPU  int32
		wantJobs int32
	}{
		{name: "unset", wantCPU: 50, wantJobs: 5},
		{name: "empty strings", spec: v1alpha1.ServerlessSpec{TargetCPUUtilizationPercentage: num(""), FunctionBuildMaxSimultaneousJobs: num("")}, wantCPU: 50, wantJobs: 5},
		{name: "strings", spec: v1alpha1.ServerlessSpec{TargetCPUUtilizationPercentage: num("150"), FunctionBuildMaxSimultaneousJobs: num("2147483647")}, wantCPU: 150, wantJobs: 2147483647},
		{name: "integers", spec: v1alpha1.ServerlessSpec{TargetCPUUtilizationPercentage: ptr.To(intstr.FromInt32(1)), FunctionBuildMaxSimultaneousJobs: ptr.To(intstr.FromInt32(9))}, wantCPU: 1, wantJobs: 9},
		{name: "cpu not a number", spec: v1alpha1.ServerlessSpec{TargetCPUUtilizationPercentage: num("fifty")}, wantErr: `spec.targetCPUUtilizationPercentage is "fifty"`},
		{name: "cpu leading zero", spec: v1alpha1.ServerlessSpec{TargetCPUUtilizationPercentage: num("050")}, wantErr: "spec.targetCPUUtilizationPercentage"},
		{name: "cpu with sign", spec: v1alpha1.ServerlessSpec{TargetCPUUtilizationPercentage: num("+50")}, wantErr: "spec.targetCPUUtilizationPercentage"},
		{name: "cpu zero", spec: v1alpha1.ServerlessSpec{TargetCPUUtilizationPercentage: num("0")}, wantErr: "1 to 2147483647"},
		{name: "jobs negative integer", spec: v1alpha1.ServerlessSpec{FunctionBuildMaxSimultaneousJobs: ptr.To(intstr.FromInt32(-1))}, wantErr: "spec.functionBuildMaxSimultaneousJobs"},
		{name: "jobs above int32", spec: v1alpha1.ServerlessSpec{FunctionBuildMaxSimultaneousJobs: num("2147483648")}, wantErr: "1 to 2147483647"},
		{name: "requeue without unit", spec: v1alpha1.ServerlessSpec{FunctionRequeueDuration: "5"}, wantErr: `spec.functionRequeueDuration is "5"`},
		{name: "liveness zero", spec: v1alpha1.ServerlessSpec{HealthzLivenessTimeout: "0s"}, wantErr: "spec.healthzLivenessTimeout"},
		{name: "liveness negative", spec: v1alpha1.ServerlessSpec{HealthzLivenessTimeout: "-10s"}, wantErr: "spec.healthzLivenessTimeout"},
		// Log settings the controller cannot take get the default and a
		// warning instead (TestLogSettings).
		{name: "unknown log settings", spec: v1alpha1.ServerlessSpec{LogLevel: "INFO", LogFormat: "yaml"}, wantCPU: 50, wantJobs: 5},
		{name: "unknown preset", spec: v1alpha1.ServerlessSpec{DefaultRuntimePodPreset: "XXL"}, wantErr: "spec.defaultRuntimePodPreset"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := Build(tt.spec, Facts{Namespace: "kyma-system", NewSecret: counter()})
			if tt.wantErr != "" {
				var ce *ConfigError
				require.ErrorAs(t, err, &ce)
				assert.Equal(t, v1alpha1.ReasonConfigurationInvalid, ce.Reason)
				assert.Contains(t, err.Error(), tt.wantErr)
				assert.Contains(t, err.Error(), "the Function controller cannot work with it")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.wantCPU, res.Values.Controller.Configuration.TargetCPUUtilizationPercentage)
			assert.Equal(t, tt.wantJobs, res.Values.Controller.Configuration.FunctionBuildMaxSimultaneousJobs)
		})
	}
}
