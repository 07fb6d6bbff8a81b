package v1alpha1_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kyma-project/serverless-manager/tests/support/testenv"
)

// The CRD's OpenAPI and CEL rules stop bad input at admission, each with a
// message that names the field.
func TestServerlessValidation(t *testing.T) {
	env := testenv.Start(t, "config/crd/bases")
	ctx := context.Background()
	require.NoError(t, env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kyma-system"}}))

	tests := []struct {
		name    string
		spec    string
		wantErr string // substring naming the field; empty = accepted
	}{
		{"empty spec", `{}`, ""},
		{"everything valid", `{"dockerRegistry":{"enableInternal":true,"secretName":"my-reg.v1"},"eventing":{"endpoint":"http://ep.kyma-system.svc:8080/publish"},"tracing":{"endpoint":"https://otel:4318/v1/traces"},"targetCPUUtilizationPercentage":100,"functionRequeueDuration":"1h30m","functionBuildExecutorArgs":"--insecure, --cache=true","functionBuildMaxSimultaneousJobs":1,"healthzLivenessTimeout":"500ms","defaultBuildJobPreset":"local-dev","defaultRuntimePodPreset":"XL","logLevel":"fatal","logFormat":"text","enableNetworkPolicies":true}`, ""},
		{"cpu 0", `{"targetCPUUtilizationPercentage":0}`, "spec.targetCPUUtilizationPercentage"},
		{"cpu above int32", `{"targetCPUUtilizationPercentage":2147483648}`, "spec.targetCPUUtilizationPercentage"},
		{"cpu text 0", `{"targetCPUUtilizationPercentage":"0"}`, "no Function autoscaler is valid"},
		{"cpu text above int32", `{"targetCPUUtilizationPercentage":"2147483648"}`, "do not fit the Function controller's setting"},
		{"cpu text not a number", `{"targetCPUUtilizationPercentage":"fifty"}`, "the Function controller cannot start with anything else"},
		{"cpu text with unit", `{"targetCPUUtilizationPercentage":"50%"}`, "spec.targetCPUUtilizationPercentage"},
		{"cpu text leading zero", `{"targetCPUUtilizationPercentage":"050"}`, "no leading zero"},
		{"cpu text negative", `{"targetCPUUtilizationPercentage":"-5"}`, "spec.targetCPUUtilizationPercentage"},
		{"cpu text spaces", `{"targetCPUUtilizationPercentage":" 50"}`, "spec.targetCPUUtilizationPercentage"},
		{"cpu fraction", `{"targetCPUUtilizationPercentage":50.5}`, "spec.targetCPUUtilizationPercentage"},
		{"jobs 0", `{"functionBuildMaxSimultaneousJobs":0}`, "spec.functionBuildMaxSimultaneousJobs"},
		{"jobs negative", `{"functionBuildMaxSimultaneousJobs":-3}`, "spec.functionBuildMaxSimultaneousJobs"},
		{"jobs text 0", `{"functionBuildMaxSimultaneousJobs":"0"}`, "no Function is ever built"},
		{"jobs text not a number", `{"functionBuildMaxSimultaneousJobs":"many"}`, "spec.functionBuildMaxSimultaneousJobs"},
		{"jobs bool", `{"functionBuildMaxSimultaneousJobs":true}`, "spec.functionBuildMaxSimultaneousJobs"},
		{"requeue zero", `{"functionRequeueDuration":"0s"}`, "spec.functionRequeueDuration"},
		{"requeue bare zero", `{"functionRequeueDuration":"0"}`, "spec.functionRequeueDuration"},
		{"liveness without unit", `{"healthzLivenessTimeout":"10"}`, "cannot start with a bare number"},
		{"requeue without unit", `{"functionRequeueDuration":"5"}`, "spec.functionRequeueDuration"},
		{"requeue words", `{"functionRequeueDuration":"five minutes"}`, "spec.functionRequeueDuration"},
		{"requeue negative", `{"functionRequeueDuration":"-5m"}`, "spec.functionRequeueDuration"},
		{"liveness timeout unit", `{"healthzLivenessTimeout":"10 seconds"}`, "spec.healthzLivenessTimeout"},
		{"build preset", `{"defaultBuildJobPreset":"turbo"}`, "spec.defaultBuildJobPreset"},
		{"build preset case", `{"defaultBuildJobPreset":"Normal"}`, "spec.defaultBuildJobPreset"},
		{"runtime preset", `{"defaultRuntimePodPreset":"XXL"}`, "spec.defaultRuntimePodPreset"},
		{"runtime preset case", `{"defaultRuntimePodPreset":"xs"}`, "spec.defaultRuntimePodPreset"},
		// Release 1.13's CRD takes any string for both log fields, and its
		// documentation prescribes console, dpanic and panic: the manager
		// maps them, and warns about the rest (not rejected, see
		// config/admission).
		{"log format console", `{"logFormat":"console"}`, ""},
		{"log level dpanic", `{"logLevel":"dpanic","logFormat":"console"}`, ""},
		{"log level panic", `{"logLevel":"panic"}`, ""},
		{"unknown log level", `{"logLevel":"verbose"}`, ""},
		{"log level case", `{"logLevel":"INFO"}`, ""},
		{"unknown log format", `{"logFormat":"xml"}`, ""},
		{"eventing not a URL", `{"eventing":{"endpoint":"not a url"}}`, "spec.eventing.endpoint"},
		{"eventing relative", `{"eventing":{"endpoint":"/publish"}}`, "spec.eventing.endpoint"},
		{"eventing scheme", `{"eventing":{"endpoint":"ftp://host/x"}}`, "spec.eventing.endpoint"},
		{"eventing missing", `{"eventing":{}}`, "spec.eventing.endpoint"},
		{"tracing not a URL", `{"tracing":{"endpoint":"otel:4318"}}`, "spec.tracing.endpoint"},
		{"secret name upper case", `{"dockerRegistry":{"secretName":"MyRegistry"}}`, "spec.dockerRegistry.secretName"},
		{"secret name underscore", `{"dockerRegistry":{"secretName":"my_registry"}}`, "spec.dockerRegistry.secretName"},
		{"secret name empty", `{"dockerRegistry":{"secretName":""}}`, "spec.dockerRegistry.secretName"},
		{"enableInternal as text", `{"dockerRegistry":{"enableInternal":"yes"}}`, "spec.dockerRegistry.enableInternal"},
		{"executor args not flags", `{"functionBuildExecutorArgs":"insecure,cache"}`, "spec.functionBuildExecutorArgs"},
		{"executor args empty item", `{"functionBuildExecutorArgs":"--insecure,,--cache=true"}`, "spec.functionBuildExecutorArgs"},
		{"network policies as text", `{"enableNetworkPolicies":"true"}`, "spec.enableNetworkPolicies"},
		{"mesh istio", `{"scaleToZero":{"mesh":"istio"}}`, ""},
		{"mesh empty", `{"scaleToZero":{"mesh":""}}`, ""},
		{"scaleToZero empty", `{"scaleToZero":{}}`, ""},
		{"a mesh the module does not know", `{"scaleToZero":{"mesh":"linkerd"}}`, "spec.scaleToZero.mesh"},
		{"mesh spelled otherwise", `{"scaleToZero":{"mesh":"Istio"}}`, "spec.scaleToZero.mesh"},
	}
	bad := 0
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var spec map[string]any
			require.NoError(t, json.Unmarshal([]byte(tt.spec), &spec))
			u := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "operator.kyma-project.io/v1alpha1", "kind": "Serverless",
				"metadata": map[string]any{"namespace": "kyma-system", "name": fmt.Sprintf("cr-%d", i)},
				"spec":     spec,
			}}
			err := env.Client.Create(ctx, u)
			if tt.wantErr == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err, "the API server must reject %s", tt.spec)
			assert.Contains(t, err.Error(), tt.wantErr)
		})
		if tt.wantErr != "" {
			bad++
		}
	}
	assert.GreaterOrEqual(t, bad, 20)
}
