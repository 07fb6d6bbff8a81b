package resources

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/pkg/scaletozero"
)

// PrivateService is the headless Service of a scale-to-zero Function in
// mesh mode (docs/contributor/scale-to-zero.md, Mesh Mode), named by
// scaletozero.PrivateServiceName: the Function's Pods on port http 8080.
// The activator's requests to a replica carry its name as their Host, by
// which Istio's sidecar routes them to the Pod address dialled, in mutual
// TLS. Headless: the route keeps the address (a cluster IP would have the
// sidecar choose the Pod). Every Pod is listed from the moment it has an
// address, ready or not: the activator probes starting replicas through
// it, and Istio wraps requests in mutual TLS only for the Pods it lists.
// No Prometheus annotations: the Function's Service has them already.
func PrivateService(fn *v1alpha2.Function) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name:            scaletozero.PrivateServiceName(fn.Name),
			Namespace:       fn.Namespace,
			Labels:          FunctionLabels(fn),
			OwnerReferences: ownerReferences(fn),
		},
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			Selector:                 SelectorLabels(fn),
			PublishNotReadyAddresses: true,
			Ports: []corev1.ServicePort{{
				Name:       ServicePortName,
				Protocol:   corev1.ProtocolTCP,
				Port:       FunctionPort,
				TargetPort: intstr.FromInt32(FunctionPort),
			}},
		},
	}
}

// IsHeadless reports whether svc has no cluster IP.
func IsHeadless(svc *corev1.Service) bool {
	return svc.Spec.ClusterIP == corev1.ClusterIPNone
}

// UpdatePrivateService returns live with desired's labels, selector, ports
// and publishNotReadyAddresses (annotations kept) when one of them
// differs, else (nil, false). A live Service that is not headless cannot
// become so (the cluster IP is immutable): the caller replaces it.
func UpdatePrivateService(live, desired *corev1.Service) (*corev1.Service, bool) {
	same := maps.Equal(live.Labels, desired.Labels) && maps.Equal(live.Spec.Selector, desired.Spec.Selector) &&
		live.Spec.PublishNotReadyAddresses == desired.Spec.PublishNotReadyAddresses &&
		len(live.Spec.Ports) == len(desired.Spec.Ports)
	for i := 0; same && i < len(desired.Spec.Ports); i++ {
		l, d := live.Spec.Ports[i], desired.Spec.Ports[i]
		same = l.Name == d.Name && protocol(l.Protocol) == protocol(d.Protocol) && l.Port == d.Port && l.TargetPort == d.TargetPort
	}
	if same {
		return nil, false
	}
	out := live.DeepCopy()
	out.Labels = cloneMap(desired.Labels)
	out.Spec.Selector = cloneMap(desired.Spec.Selector)
	out.Spec.PublishNotReadyAddresses = desired.Spec.PublishNotReadyAddresses
	out.Spec.Ports = append([]corev1.ServicePort(nil), desired.Spec.Ports...)
	return out, true
}
