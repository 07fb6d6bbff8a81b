package resources

import (
	"maps"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	"k8s.io/utils/ptr"
)

// UpdateHPA returns live with desired's spec and labels when the target,
// min/max replicas, the CPU target or the labels differ, else (nil, false).
func UpdateHPA(live, desired *autoscalingv1.HorizontalPodAutoscaler) (*autoscalingv1.HorizontalPodAutoscaler, bool) {
	if live.Spec.ScaleTargetRef == desired.Spec.ScaleTargetRef &&
		ptr.Equal(live.Spec.MinReplicas, desired.Spec.MinReplicas) &&
		live.Spec.MaxReplicas == desired.Spec.MaxReplicas &&
		ptr.Equal(live.Spec.TargetCPUUtilizationPercentage, desired.Spec.TargetCPUUtilizationPercentage) &&
		maps.Equal(live.Labels, desired.Labels) {
		return nil, false
	}
	out := live.DeepCopy()
	out.Spec = *desired.Spec.DeepCopy()
	out.Labels = cloneMap(desired.Labels)
	return out, true
}
