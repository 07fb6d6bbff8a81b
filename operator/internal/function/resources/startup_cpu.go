package resources

import (
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/pkg/scaletozero"
)

// AnnotationCPULimitAfterStart names the limit a boosted Pod is resized to
// (docs/contributor/scale-to-zero.md#startup-cpu).
const AnnotationCPULimitAfterStart = v1alpha2.AnnotationCPULimitAfterStart

// startupCPU returns the function container's resources at its start and,
// when they differ from res, the CPU limit to resize to once the Pod is
// ready. Only scale-to-zero Functions start boosted: their start is what a
// waiting request sees, and they are the module's own (no Function that
// 1.8.4 or 1.13 made rolls). Requests stay, so the scheduler places the Pod
// as before. No boost when startLimit is zero (off, or Pods cannot be
// resized), when the Function has no CPU limit or one at least startLimit,
// or when its Pod is Guaranteed (requests equal limits): raising the limit
// would make it Burstable, and a resize may not change a Pod's QoS class.
func startupCPU(fn *v1alpha2.Function, startLimit resource.Quantity, res corev1.ResourceRequirements) (corev1.ResourceRequirements, string) {
	limit, ok := res.Limits[corev1.ResourceCPU]
	if !scaletozero.Enabled(fn) || startLimit.IsZero() || !ok || limit.Cmp(startLimit) >= 0 || guaranteed(res) {
		return res, ""
	}
	boosted := *res.DeepCopy()
	boosted.Limits[corev1.ResourceCPU] = startLimit
	return boosted, limit.String()
}

// guaranteed reports whether a container with res makes its Pod
// Guaranteed: CPU and memory limits set and requests equal to them (a
// request left out defaults to its limit).
func guaranteed(res corev1.ResourceRequirements) bool {
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		limit, ok := res.Limits[name]
		if !ok {
			return false
		}
		if req, ok := res.Requests[name]; ok && req.Cmp(limit) != 0 {
			return false
		}
	}
	return true
}

// withCPULimitAfterStart sets or removes AnnotationCPULimitAfterStart in
// annotations (not nil) by after ("" removes it).
func withCPULimitAfterStart(annotations map[string]string, after string) map[string]string {
	delete(annotations, AnnotationCPULimitAfterStart)
	if after != "" {
		annotations[AnnotationCPULimitAfterStart] = after
	}
	return annotations
}

// ReadyPods are the Pods listed ready in the slices of a Function's Service
// (the activator's slice and those of other Services aside), each once.
func ReadyPods(service string, all []discoveryv1.EndpointSlice) []types.NamespacedName {
	var out []types.NamespacedName
	seen := map[types.UID]bool{}
	for i := range all {
		s := &all[i]
		if IsActivatorSlice(s) || s.Labels[discoveryv1.LabelServiceName] != service {
			continue
		}
		for _, ep := range s.Endpoints {
			ref := ep.TargetRef
			if ref == nil || ref.Kind != "Pod" || !endpointReady(ep) || seen[ref.UID] {
				continue
			}
			seen[ref.UID] = true
			out = append(out, types.NamespacedName{Namespace: s.Namespace, Name: ref.Name})
		}
	}
	return out
}
