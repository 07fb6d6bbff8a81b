package resources

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
)

func TestUpdateConfigMap(t *testing.T) {
	fn := newFunction(v1alpha2.RuntimeNodejs20)
	desired := SourceConfigMap(inputs(fn))
	live := func(mutate func(*corev1.ConfigMap)) *corev1.ConfigMap {
		cm := desired.DeepCopy()
		cm.Name = "hello-vbrth"
		cm.Annotations = map[string]string{"foreign": "kept"}
		if mutate != nil {
			mutate(cm)
		}
		return cm
	}
	tests := []struct {
		name   string
		live   *corev1.ConfigMap
		update bool
	}{
		{"equal", live(nil), false},
		{"source differs", live(func(cm *corev1.ConfigMap) { cm.Data["source"] = "old" }), true},
		{"dependencies differ ({} vs empty)", live(func(cm *corev1.ConfigMap) { cm.Data["dependencies"] = "" }), true},
		{"extra key", live(func(cm *corev1.ConfigMap) { cm.Data["other"] = "x" }), true},
		{"labels differ", live(func(cm *corev1.ConfigMap) { cm.Labels["app"] = "old" }), true},
		{"extra label", live(func(cm *corev1.ConfigMap) { cm.Labels["extra"] = "x" }), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, changed := UpdateConfigMap(tt.live, desired)
			assert.Equal(t, tt.update, changed)
			if !tt.update {
				assert.Nil(t, got)
				return
			}
			require.NotNil(t, got)
			assert.Equal(t, desired.Data, got.Data)
			assert.Equal(t, desired.Labels, got.Labels)
			assert.Equal(t, "hello-vbrth", got.Name)
			assert.Equal(t, "kept", got.Annotations["foreign"])
			_, again := UpdateConfigMap(got, desired)
			assert.False(t, again)
		})
	}
}

func TestUpdateJob(t *testing.T) {
	fn := newFunction(v1alpha2.RuntimeNodejs20)
	desired := BuildJob(inputs(fn), "hello-vbrth")
	live := desired.DeepCopy()
	live.Name = "hello-build-2dzdz"
	live.Labels["batch.kubernetes.io/job-name"] = "hello-build-2dzdz"
	tests := []struct {
		name   string
		live   *batchv1.Job
		update bool
	}{
		{"equal", desired.DeepCopy(), false},
		{"labels differ", live, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, changed := UpdateJob(tt.live, desired)
			assert.Equal(t, tt.update, changed)
			if tt.update {
				require.NotNil(t, got)
				assert.Equal(t, desired.Labels, got.Labels)
				assert.Equal(t, tt.live.Spec, got.Spec, "only labels change")
			} else {
				assert.Nil(t, got)
			}
		})
	}
}

func TestUpdateService(t *testing.T) {
	fn := newFunction(v1alpha2.RuntimeNodejs20)
	desired := Service(inputs(fn))
	live := func(mutate func(*corev1.Service)) *corev1.Service {
		s := desired.DeepCopy()
		s.Annotations["foreign"] = "kept"
		s.Spec.Type = corev1.ServiceTypeClusterIP
		s.Spec.ClusterIP = "10.0.0.12"
		s.Spec.ClusterIPs = []string{"10.0.0.12"}
		s.Spec.SessionAffinity = corev1.ServiceAffinityNone
		if mutate != nil {
			mutate(s)
		}
		return s
	}
	tests := []struct {
		name   string
		live   *corev1.Service
		update bool
	}{
		{"stored copy: no-op", live(nil), false},
		{"protocol defaulted: no-op", live(func(s *corev1.Service) { s.Spec.Ports[0].Protocol = "" }), false},
		{"selector differs", live(func(s *corev1.Service) { s.Spec.Selector[v1alpha2.LabelUUID] = "old" }), true},
		{"labels differ", live(func(s *corev1.Service) { s.Labels["x"] = "y" }), true},
		{"prometheus annotation missing", live(func(s *corev1.Service) { delete(s.Annotations, "prometheus.io/scrape") }), true},
		{"target port differs", live(func(s *corev1.Service) { s.Spec.Ports[0].TargetPort = intstr.FromInt32(80) }), true},
		{"port name differs", live(func(s *corev1.Service) { s.Spec.Ports[0].Name = "web" }), true},
		{"extra port", live(func(s *corev1.Service) {
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "x", Port: 81})
		}), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, changed := UpdateService(tt.live, desired)
			assert.Equal(t, tt.update, changed)
			if !tt.update {
				assert.Nil(t, got)
				return
			}
			require.NotNil(t, got)
			assert.Equal(t, desired.Spec.Ports, got.Spec.Ports)
			assert.Equal(t, desired.Spec.Selector, got.Spec.Selector)
			assert.Equal(t, desired.Labels, got.Labels)
			assert.Equal(t, "kept", got.Annotations["foreign"])
			assert.Equal(t, "true", got.Annotations["prometheus.io/scrape"])
			assert.Equal(t, "10.0.0.12", got.Spec.ClusterIP)
			_, again := UpdateService(got, desired)
			assert.False(t, again)
		})
	}
}

func TestUpdateHPA(t *testing.T) {
	fn := newFunction(v1alpha2.RuntimeNodejs20, func(fn *v1alpha2.Function) {
		fn.Spec.ScaleConfig = &v1alpha2.ScaleConfig{MinReplicas: ptr.To[int32](1), MaxReplicas: ptr.To[int32](4)}
	})
	desired := HPA(inputs(fn))
	require.NotNil(t, desired)
	live := func(mutate func(*autoscalingv2.HorizontalPodAutoscaler)) *autoscalingv2.HorizontalPodAutoscaler {
		h := desired.DeepCopy()
		h.Name = "hello-abcde"
		if mutate != nil {
			mutate(h)
		}
		return h
	}
	// What the API server stores once spec.behavior is set at all: every
	// rule filled in with its defaults.
	defaulted := &autoscalingv2.HorizontalPodAutoscalerBehavior{
		ScaleUp: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](0), SelectPolicy: ptr.To(autoscalingv2.MaxChangePolicySelect),
			Policies: []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PodsScalingPolicy, Value: 4, PeriodSeconds: 15}, {Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 15}}},
		ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](300), SelectPolicy: ptr.To(autoscalingv2.MaxChangePolicySelect),
			Policies: []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 15}}},
	}
	// 1.8.4's autoscaling/v1 targetCPUUtilizationPercentage, read through autoscaling/v2.
	podCPU := autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
		Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](50)}}}
	tests := []struct {
		name   string
		live   *autoscalingv2.HorizontalPodAutoscaler
		update bool
	}{
		{"equal", live(nil), false},
		{"behavior defaulted by the API server", live(func(h *autoscalingv2.HorizontalPodAutoscaler) { h.Spec.Behavior = defaulted }), false},
		{"max differs", live(func(h *autoscalingv2.HorizontalPodAutoscaler) { h.Spec.MaxReplicas = 9 }), true},
		{"min differs", live(func(h *autoscalingv2.HorizontalPodAutoscaler) { h.Spec.MinReplicas = ptr.To[int32](2) }), true},
		{"cpu target differs", live(func(h *autoscalingv2.HorizontalPodAutoscaler) {
			h.Spec.Metrics[0].ContainerResource.Target.AverageUtilization = ptr.To[int32](80)
		}), true},
		{"another container", live(func(h *autoscalingv2.HorizontalPodAutoscaler) {
			h.Spec.Metrics[0].ContainerResource.Container = "istio-proxy"
		}), true},
		{"1.8.4's Pod CPU target", live(func(h *autoscalingv2.HorizontalPodAutoscaler) {
			h.Spec.Metrics = []autoscalingv2.MetricSpec{podCPU}
		}), true},
		{"1.8.4's Pod CPU target, behavior set", live(func(h *autoscalingv2.HorizontalPodAutoscaler) {
			h.Spec.Metrics, h.Spec.Behavior = []autoscalingv2.MetricSpec{podCPU}, defaulted
		}), true},
		{"an extra metric", live(func(h *autoscalingv2.HorizontalPodAutoscaler) { h.Spec.Metrics = append(h.Spec.Metrics, podCPU) }), true},
		{"no metric", live(func(h *autoscalingv2.HorizontalPodAutoscaler) { h.Spec.Metrics = nil }), true},
		{"target name differs", live(func(h *autoscalingv2.HorizontalPodAutoscaler) { h.Spec.ScaleTargetRef.Name = "other" }), true},
		{"labels differ", live(func(h *autoscalingv2.HorizontalPodAutoscaler) { h.Labels["x"] = "y" }), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.live.DeepCopy()
			got, changed := UpdateHPA(tt.live, desired)
			assert.Equal(t, tt.update, changed)
			assert.Equal(t, before, tt.live, "live is not modified")
			if !tt.update {
				assert.Nil(t, got)
				return
			}
			require.NotNil(t, got)
			assert.Equal(t, desired.Spec.ScaleTargetRef, got.Spec.ScaleTargetRef)
			assert.Equal(t, desired.Spec.MinReplicas, got.Spec.MinReplicas)
			assert.Equal(t, desired.Spec.MaxReplicas, got.Spec.MaxReplicas)
			assert.Equal(t, desired.Spec.Metrics, got.Spec.Metrics)
			assert.Equal(t, tt.live.Spec.Behavior, got.Spec.Behavior, "behavior kept")
			assert.Equal(t, desired.Labels, got.Labels)
			assert.Equal(t, "hello-abcde", got.Name, "updated in place")
			_, again := UpdateHPA(got, desired)
			assert.False(t, again, "settles")
		})
	}
}
