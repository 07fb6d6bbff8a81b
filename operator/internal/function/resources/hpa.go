package resources

import (
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
)

// HPA scales the Function through its scale subresource
// (docs/contributor/upstream-contract.md#hpa);
// nil when spec.scaleConfig is unset or fixes the replica count.
//
// Name, labels, target and bounds are 1.8.4's. The metric is not: 1.8.4's
// targetCPUUtilizationPercentage averages the whole Pod, so a sidecar (Istio's
// proxy) moves it; a ContainerResource metric counts the function container
// alone, against that container's CPU request (docs/contributor/architecture.md,
// Function Controller).
func HPA(in Inputs) *autoscalingv2.HorizontalPodAutoscaler {
	fn := in.Function
	sc := fn.Spec.ScaleConfig
	if sc == nil {
		return nil
	}
	lowest := int32(1)
	if sc.MinReplicas != nil && *sc.MinReplicas > 0 {
		lowest = *sc.MinReplicas
	}
	highest := lowest
	if sc.MaxReplicas != nil && *sc.MaxReplicas > lowest {
		highest = *sc.MaxReplicas
	}
	if lowest == highest {
		return nil
	}
	return &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: childMeta(fn, "-"),
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{
				APIVersion: v1alpha2.GroupVersion.String(),
				Kind:       "Function",
				Name:       fn.Name,
			},
			MinReplicas: ptr.To(lowest),
			MaxReplicas: highest,
			Metrics:     []autoscalingv2.MetricSpec{functionCPUMetric(in.Config.TargetCPUUtilizationPercentage)},
		},
	}
}

// functionCPUMetric is the HPA's only metric: the CPU use of the function
// container (ContainerFunction, the name both Deployment builders give it)
// in percent of its request.
func functionCPUMetric(percent int32) autoscalingv2.MetricSpec {
	return autoscalingv2.MetricSpec{
		Type: autoscalingv2.ContainerResourceMetricSourceType,
		ContainerResource: &autoscalingv2.ContainerResourceMetricSource{
			Name:      corev1.ResourceCPU,
			Container: ContainerFunction,
			Target: autoscalingv2.MetricTarget{
				Type:               autoscalingv2.UtilizationMetricType,
				AverageUtilization: ptr.To(percent),
			},
		},
	}
}
