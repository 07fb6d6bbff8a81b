package resources

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// ServicePortName names the Service's only port.
const ServicePortName = "http"

// prometheusAnnotations let Prometheus scrape the runtime's metrics.
func prometheusAnnotations() map[string]string {
	return map[string]string{
		"prometheus.io/port":   strconv.Itoa(FunctionPort),
		"prometheus.io/path":   "/metrics",
		"prometheus.io/scrape": "true",
	}
}

// Service exposes the Function in its namespace under the Function's name
// (docs/contributor/upstream-contract.md#service): port http 80 → 8080.
func Service(in Inputs) *corev1.Service {
	fn := in.Function
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name:            fn.Name,
			Namespace:       fn.Namespace,
			Labels:          FunctionLabels(fn),
			Annotations:     prometheusAnnotations(),
			OwnerReferences: ownerReferences(fn),
		},
		Spec: corev1.ServiceSpec{
			Ports: []corev1.ServicePort{{
				Name:       ServicePortName,
				Protocol:   corev1.ProtocolTCP,
				Port:       ServicePort,
				TargetPort: intstr.FromInt32(FunctionPort),
			}},
			Selector: SelectorLabels(fn),
		},
	}
}
