package resources

import (
	"maps"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/utils/ptr"
)

// UpdateDeployment returns live with desired applied when something this
// controller owns differs, else (nil, false).
//
//   - metadata labels (exact) and the AnnotationPodAnnotationKeys record
//     (a missing record alone is no change: adopted 1.8.4 Deployments);
//   - replicas and revisionHistoryLimit — changed alone they leave the Pod
//     template untouched, so scaling never rolls the Pods;
//   - the Pod template: labels (exact), annotations (exact, after merging),
//     the function container's image, env (order included) and resources
//     (semantic quantities), the Pod's and the container's security context
//     (exact), and every other field desired sets (probes, volumes, mounts,
//     service account, …) compared with live after API defaulting, 1.8.4's
//     startup probe counting as ours. When it differs the whole Pod spec is
//     replaced, as 1.8.4 does.
//
// Template annotations: live's are kept (kubectl.kubernetes.io/restartedAt
// and other foreign keys), except keys this controller set from
// spec.annotations and that are gone from it (1.8.4 kept them) and, as in
// 1.8.4, sidecar.istio.io/nativeSidecar unless spec.annotations sets it;
// desired's are laid over them.
func UpdateDeployment(live, desired *appsv1.Deployment) (*appsv1.Deployment, bool) {
	out := live.DeepCopy()
	changed := false

	if !maps.Equal(live.Labels, desired.Labels) {
		out.Labels = cloneMap(desired.Labels)
		changed = true
	}
	// The record of the spec.annotations keys: a Deployment made by 1.8.4
	// has none; it gets one with the next real change, not on its own, as a
	// metadata-only update would still bump the Deployment's generation and
	// adopting it is to write nothing.
	if want, wanted := desired.Annotations[AnnotationPodAnnotationKeys]; wanted {
		got, ok := live.Annotations[AnnotationPodAnnotationKeys]
		if got != want {
			if out.Annotations == nil {
				out.Annotations = map[string]string{}
			}
			out.Annotations[AnnotationPodAnnotationKeys] = want
			changed = changed || ok
		}
	}
	if !ptr.Equal(live.Spec.Replicas, desired.Spec.Replicas) {
		out.Spec.Replicas = ptr.To(ptr.Deref(desired.Spec.Replicas, 1))
		changed = true
	}
	if !ptr.Equal(live.Spec.RevisionHistoryLimit, desired.Spec.RevisionHistoryLimit) {
		out.Spec.RevisionHistoryLimit = ptr.To(ptr.Deref(desired.Spec.RevisionHistoryLimit, 0))
		changed = true
	}

	annotations := templateAnnotations(live, desired)
	if !maps.Equal(live.Spec.Template.Labels, desired.Spec.Template.Labels) ||
		!maps.Equal(live.Spec.Template.Annotations, annotations) ||
		podSpecDiffers(&live.Spec.Template.Spec, &desired.Spec.Template.Spec) {
		out.Spec.Template = *desired.Spec.Template.DeepCopy()
		out.Spec.Template.Annotations = annotations
		changed = true
	}

	if !changed {
		return nil, false
	}
	return out, true
}

// templateAnnotations merges live's template annotations with desired's.
func templateAnnotations(live, desired *appsv1.Deployment) map[string]string {
	ours := annotationKeys(desired.Annotations[AnnotationPodAnnotationKeys])
	out := make(map[string]string, len(live.Spec.Template.Annotations)+len(desired.Spec.Template.Annotations))
	maps.Copy(out, live.Spec.Template.Annotations)
	for k := range annotationKeys(live.Annotations[AnnotationPodAnnotationKeys]) {
		if !ours[k] {
			delete(out, k)
		}
	}
	if !ours[AnnotationIstioNativeSidecar] {
		delete(out, AnnotationIstioNativeSidecar)
	}
	maps.Copy(out, desired.Spec.Template.Annotations)
	return out
}

func annotationKeys(record string) map[string]bool {
	out := map[string]bool{}
	for _, k := range strings.Split(record, ",") {
		if k != "" {
			out[k] = true
		}
	}
	return out
}

// podSpecDiffers compares the function container exactly where 1.8.4 does
// (image, env, resources), both security contexts exactly, and everything
// else desired sets by coverage.
func podSpecDiffers(live, desired *corev1.PodSpec) bool {
	if len(live.Containers) != len(desired.Containers) {
		return true
	}
	for i := range desired.Containers {
		l, d := &live.Containers[i], &desired.Containers[i]
		if l.Image != d.Image ||
			!equality.Semantic.DeepEqual(l.Env, d.Env) ||
			!equality.Semantic.DeepEqual(l.Resources.Requests, d.Resources.Requests) ||
			!equality.Semantic.DeepEqual(l.Resources.Limits, d.Resources.Limits) {
			return true
		}
	}
	// A field removed from spec.podSecurityContext or
	// spec.containerSecurityContext must leave the Pods, which coverage
	// would not see: both are compared exactly.
	if !equality.Semantic.DeepEqual(live.SecurityContext, desired.SecurityContext) {
		return true
	}
	for i := range desired.Containers {
		l, d := live.Containers[i].SecurityContext, desired.Containers[i].SecurityContext
		if !equality.Semantic.DeepEqual(withoutProcMount(l, l), withoutProcMount(d, l)) {
			return true
		}
	}
	d := desired.DeepCopy()
	d.SecurityContext = nil
	for i := range d.Containers {
		d.Containers[i].SecurityContext = nil
		if legacyStartupProbe(live.Containers[i].StartupProbe) {
			d.Containers[i].StartupProbe = live.Containers[i].StartupProbe
		}
	}
	return !coveredBy(d, live)
}

// withoutProcMount is sc without procMount when live has none: API servers
// with the ProcMountType gate off drop it, and comparing it would update
// forever.
func withoutProcMount(sc, live *corev1.SecurityContext) *corev1.SecurityContext {
	if sc == nil || (live != nil && live.ProcMount != nil) {
		return sc
	}
	sc = sc.DeepCopy()
	sc.ProcMount = nil
	return sc
}
