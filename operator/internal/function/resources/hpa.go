package resources

import (
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	"k8s.io/utils/ptr"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
)

// HPA scales the Function through its scale subresource
// (docs/contributor/upstream-contract.md#hpa); nil when spec.scaleConfig is
// unset or fixes the replica count.
func HPA(in Inputs) *autoscalingv1.HorizontalPodAutoscaler {
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
	return &autoscalingv1.HorizontalPodAutoscaler{
		ObjectMeta: childMeta(fn, "-"),
		Spec: autoscalingv1.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv1.CrossVersionObjectReference{
				APIVersion: v1alpha2.GroupVersion.String(),
				Kind:       "Function",
				Name:       fn.Name,
			},
			MinReplicas:                    ptr.To(lowest),
			MaxReplicas:                    highest,
			TargetCPUUtilizationPercentage: ptr.To(in.Config.TargetCPUUtilizationPercentage),
		},
	}
}
