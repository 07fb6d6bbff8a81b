package resources

import (
	"maps"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/utils/ptr"
)

// UpdateHPA returns live with desired's target, min/max replicas, metrics
// and labels when any of them differ, else (nil, false). The same object is
// updated in place, so an HPA 1.8.4 created (its Pod CPU target reads as a
// Resource metric through autoscaling/v2) keeps its name and its scaling
// history. spec.behavior is not ours: it is left as live has it (the API
// server fills in its defaults once it is set), so it never causes a write.
func UpdateHPA(live, desired *autoscalingv2.HorizontalPodAutoscaler) (*autoscalingv2.HorizontalPodAutoscaler, bool) {
	if live.Spec.ScaleTargetRef == desired.Spec.ScaleTargetRef &&
		ptr.Equal(live.Spec.MinReplicas, desired.Spec.MinReplicas) &&
		live.Spec.MaxReplicas == desired.Spec.MaxReplicas &&
		equality.Semantic.DeepEqual(live.Spec.Metrics, desired.Spec.Metrics) &&
		maps.Equal(live.Labels, desired.Labels) {
		return nil, false
	}
	out := live.DeepCopy()
	spec := desired.Spec.DeepCopy()
	out.Spec.ScaleTargetRef = spec.ScaleTargetRef
	out.Spec.MinReplicas = spec.MinReplicas
	out.Spec.MaxReplicas = spec.MaxReplicas
	out.Spec.Metrics = spec.Metrics
	out.Labels = cloneMap(desired.Labels)
	return out, true
}
