package resources

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
)

// UpdateService returns live with desired's ports, selector, type and labels
// and the Prometheus annotations merged in (other annotations and the cluster
// IP kept) when selector, labels, those annotations, the number of ports or the
// first port differ (as 1.8.4, docs/contributor/upstream-contract.md#service),
// else (nil, false).
func UpdateService(live, desired *corev1.Service) (*corev1.Service, bool) {
	if !serviceDiffers(live, desired) {
		return nil, false
	}
	out := live.DeepCopy()
	out.Labels = cloneMap(desired.Labels)
	if out.Annotations == nil {
		out.Annotations = make(map[string]string, len(desired.Annotations))
	}
	maps.Copy(out.Annotations, desired.Annotations)
	out.Spec.Ports = append([]corev1.ServicePort(nil), desired.Spec.Ports...)
	out.Spec.Selector = cloneMap(desired.Spec.Selector)
	out.Spec.Type = desired.Spec.Type
	return out, true
}

func serviceDiffers(live, desired *corev1.Service) bool {
	if !maps.Equal(live.Spec.Selector, desired.Spec.Selector) || !maps.Equal(live.Labels, desired.Labels) {
		return true
	}
	for k, v := range desired.Annotations {
		if got, ok := live.Annotations[k]; !ok || got != v {
			return true
		}
	}
	if len(live.Spec.Ports) != len(desired.Spec.Ports) {
		return true
	}
	if len(desired.Spec.Ports) == 0 {
		return false
	}
	l, d := live.Spec.Ports[0], desired.Spec.Ports[0]
	return l.Name != d.Name || protocol(l.Protocol) != protocol(d.Protocol) || l.Port != d.Port || l.TargetPort != d.TargetPort
}

// protocol defaults an empty protocol to TCP, as the API server does.
func protocol(p corev1.Protocol) corev1.Protocol {
	if p == "" {
		return corev1.ProtocolTCP
	}
	return p
}
