package resources

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
)

func TestService(t *testing.T) {
	fn := newFunction(v1alpha2.RuntimeNodejs20)
	svc := Service(inputs(fn))
	assert.Equal(t, "hello", svc.Name)
	assert.Empty(t, svc.GenerateName)
	assert.Equal(t, "fn-test-1", svc.Namespace)
	assert.Equal(t, FunctionLabels(fn), svc.Labels)
	assert.Equal(t, map[string]string{"prometheus.io/port": "8080", "prometheus.io/path": "/metrics", "prometheus.io/scrape": "true"}, svc.Annotations)
	require.Len(t, svc.OwnerReferences, 1)
	assert.Empty(t, svc.Spec.Type)
	assert.Equal(t, []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)}}, svc.Spec.Ports)
	assert.Equal(t, SelectorLabels(fn), svc.Spec.Selector)
}

func TestHPA(t *testing.T) {
	scale := func(lo, hi *int32) func(*v1alpha2.Function) {
		return func(fn *v1alpha2.Function) {
			fn.Spec.ScaleConfig = &v1alpha2.ScaleConfig{MinReplicas: lo, MaxReplicas: hi}
		}
	}
	tests := []struct {
		name     string
		fn       *v1alpha2.Function
		target   int32 // the Serverless CR's targetCPUUtilizationPercentage
		min, max int32
		none     bool
	}{
		{name: "no scaleConfig", fn: newFunction(v1alpha2.RuntimeNodejs20), none: true},
		{name: "min equals max", fn: newFunction(v1alpha2.RuntimeNodejs20, scale(ptr.To[int32](2), ptr.To[int32](2))), none: true},
		{name: "range", fn: newFunction(v1alpha2.RuntimeNodejs20, scale(ptr.To[int32](2), ptr.To[int32](5))), target: 50, min: 2, max: 5},
		{name: "no min means 1", fn: newFunction(v1alpha2.RuntimeNodejs20, scale(nil, ptr.To[int32](3))), target: 50, min: 1, max: 3},
		{name: "target above 100", fn: newFunction(v1alpha2.RuntimePython312, scale(ptr.To[int32](1), ptr.To[int32](2))), target: 150, min: 1, max: 2},
		{name: "max below min means min, no HPA", fn: newFunction(v1alpha2.RuntimeNodejs20, scale(ptr.To[int32](4), ptr.To[int32](2))), none: true},
		{name: "no max means min, no HPA", fn: newFunction(v1alpha2.RuntimeNodejs20, scale(ptr.To[int32](3), nil)), none: true},
		// Scale to zero: the HPA never goes below 1 (an HPA with
		// minReplicas 0 needs an alpha feature gate); it rests at zero.
		{name: "min 0 scales from 1", fn: newFunction(v1alpha2.RuntimeNodejs20, scale(ptr.To[int32](0), ptr.To[int32](4))), target: 50, min: 1, max: 4},
		{name: "min 0, max 1: no HPA", fn: newFunction(v1alpha2.RuntimeNodejs20, scale(ptr.To[int32](0), ptr.To[int32](1))), none: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := inputs(tt.fn)
			if tt.target != 0 {
				in.Config.TargetCPUUtilizationPercentage = tt.target
			}
			hpa := HPA(in)
			if tt.none {
				assert.Nil(t, hpa)
				return
			}
			require.NotNil(t, hpa)
			assert.Equal(t, "hello-", hpa.GenerateName)
			assert.Equal(t, FunctionLabels(tt.fn), hpa.Labels)
			require.Len(t, hpa.OwnerReferences, 1)
			assert.Equal(t, autoscalingv2.CrossVersionObjectReference{APIVersion: "serverless.kyma-project.io/v1alpha2", Kind: "Function", Name: "hello"}, hpa.Spec.ScaleTargetRef)
			assert.Equal(t, tt.min, *hpa.Spec.MinReplicas)
			assert.Equal(t, tt.max, hpa.Spec.MaxReplicas)
			// The function container's CPU alone, so a sidecar's does not count.
			assert.Equal(t, []autoscalingv2.MetricSpec{{
				Type: autoscalingv2.ContainerResourceMetricSourceType,
				ContainerResource: &autoscalingv2.ContainerResourceMetricSource{Name: corev1.ResourceCPU, Container: "function",
					Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To(tt.target)}},
			}}, hpa.Spec.Metrics)
			assert.Nil(t, hpa.Spec.Behavior, "the API server's default scaling behaviour")
			assert.Equal(t, hpa.Spec.Metrics[0].ContainerResource.Container, Deployment(in).Spec.Template.Spec.Containers[0].Name,
				"the metric names the Deployment's function container")
		})
	}
}
