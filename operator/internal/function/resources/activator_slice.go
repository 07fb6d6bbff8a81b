package resources

import (
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
)

// ActivatorSliceName is the name of the EndpointSlice that points fn's
// Service at the activator: <service><module.ActivatorSliceSuffix> (the
// Service is named after the Function).
func ActivatorSliceName(fn *v1alpha2.Function) string {
	return fn.Name + module.ActivatorSliceSuffix
}

// IsActivatorSlice reports whether s is an EndpointSlice the controller
// made for a scale-to-zero Function.
func IsActivatorSlice(s *discoveryv1.EndpointSlice) bool {
	return s.Labels[discoveryv1.LabelManagedBy] == module.ActivatorSliceManagedBy
}

// ActivatorSlice is fn's EndpointSlice: the Service's port http on the given
// activator port of the endpoints (the activator's ready Pods while the
// Function is parked, none while it is served). The labels tie it to the
// Service (kubernetes.io/service-name), keep the cluster's EndpointSlice
// controller off it (managed-by) and let the controller find it with the
// Function's other children (its child labels).
func ActivatorSlice(fn *v1alpha2.Function, port int32, family discoveryv1.AddressType, endpoints []discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	labels := FunctionLabels(fn)
	labels[discoveryv1.LabelServiceName] = fn.Name
	labels[discoveryv1.LabelManagedBy] = module.ActivatorSliceManagedBy
	if family == "" {
		family = discoveryv1.AddressTypeIPv4
	}
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name:            ActivatorSliceName(fn),
			Namespace:       fn.Namespace,
			Labels:          labels,
			OwnerReferences: ownerReferences(fn),
		},
		AddressType: family,
		Ports: []discoveryv1.EndpointPort{{
			Name:     ptr.To(ServicePortName),
			Protocol: ptr.To(corev1.ProtocolTCP),
			Port:     ptr.To(port),
		}},
		Endpoints: slices.Clone(endpoints),
	}
}

// ActivatorSlicePort is the activator port a slice of ours gives its
// Function; false when it has none in the range.
func ActivatorSlicePort(s *discoveryv1.EndpointSlice) (int32, bool) {
	for _, p := range s.Ports {
		if p.Port != nil && *p.Port >= module.ActivatorPortFirst && *p.Port <= module.ActivatorPortLast {
			return *p.Port, true
		}
	}
	return 0, false
}

// FreeActivatorPort is the lowest port of the activator's range that none
// of the given slices (all the controller made, cluster-wide) uses; false
// when the range is used up.
func FreeActivatorPort(made []discoveryv1.EndpointSlice) (int32, bool) {
	used := make(map[int32]bool, len(made))
	for i := range made {
		if p, ok := ActivatorSlicePort(&made[i]); ok {
			used[p] = true
		}
	}
	for p := int32(module.ActivatorPortFirst); p <= module.ActivatorPortLast; p++ {
		if !used[p] {
			return p, true
		}
	}
	return 0, false
}

// ActivatorEndpoints are the ready addresses in the activator Service's
// EndpointSlices, of one address family (IPv4 when there is any, else the
// first family found), sorted and without duplicates, as endpoints of a
// Function's slice. Only the address and the topology are copied: the
// activator's Pods are in another namespace than the Function's slice.
func ActivatorEndpoints(activator []discoveryv1.EndpointSlice) (discoveryv1.AddressType, []discoveryv1.Endpoint) {
	family := discoveryv1.AddressType("")
	for i := range activator {
		if t := activator[i].AddressType; t == discoveryv1.AddressTypeIPv4 || (family == "" && t == discoveryv1.AddressTypeIPv6) {
			family = t
		}
	}
	seen := map[string]bool{}
	var out []discoveryv1.Endpoint
	for i := range activator {
		if activator[i].AddressType != family {
			continue
		}
		for _, ep := range activator[i].Endpoints {
			if !endpointReady(ep) || len(ep.Addresses) == 0 || seen[ep.Addresses[0]] {
				continue
			}
			seen[ep.Addresses[0]] = true
			out = append(out, discoveryv1.Endpoint{
				Addresses:  []string{ep.Addresses[0]},
				Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)},
				NodeName:   ep.NodeName,
				Zone:       ep.Zone,
			})
		}
	}
	slices.SortFunc(out, func(a, b discoveryv1.Endpoint) int {
		if a.Addresses[0] < b.Addresses[0] {
			return -1
		}
		if a.Addresses[0] > b.Addresses[0] {
			return 1
		}
		return 0
	})
	return family, out
}

// endpointReady reads an endpoint's ready condition; unset means ready
// (the EndpointSlice API's rule).
func endpointReady(ep discoveryv1.Endpoint) bool {
	return ep.Conditions.Ready == nil || *ep.Conditions.Ready
}

// ClusterSliceManager is the endpointslice.kubernetes.io/managed-by value
// of the slices the cluster's EndpointSlice controller makes for a Service
// with a selector.
const ClusterSliceManager = "endpointslice-controller.k8s.io"

// MirroredSliceManager is that label's value on the slices the cluster
// copies from a Service's Endpoints object when the Service has no selector.
const MirroredSliceManager = "endpointslicemirroring-controller.k8s.io"

// ServiceHasReadyEndpoint reports whether the EndpointSlices of the
// Service named service that the cluster's EndpointSlice controller made
// (not ours) show a ready endpoint: a ready Pod serves it (a Function's,
// the internal registry's).
func ServiceHasReadyEndpoint(service string, all []discoveryv1.EndpointSlice) bool {
	return slices.ContainsFunc(all, func(s discoveryv1.EndpointSlice) bool { return servesReady(&s, service) })
}

// ReadyAgainAfter reports whether such a slice with a ready endpoint was
// last changed by a Pod whose readiness changed after t. The EndpointSlice
// controller stamps each slice it changes with that time
// (corev1.EndpointsLastChangeTriggerTime: the Ready condition's transition
// time of the Pods that changed it); a slice without the stamp says
// nothing.
func ReadyAgainAfter(service string, all []discoveryv1.EndpointSlice, t time.Time) bool {
	return slices.ContainsFunc(all, func(s discoveryv1.EndpointSlice) bool {
		changed, err := time.Parse(time.RFC3339Nano, s.Annotations[corev1.EndpointsLastChangeTriggerTime])
		return servesReady(&s, service) && err == nil && changed.After(t)
	})
}

// servesReady reports whether s is a slice of service made by the
// cluster's EndpointSlice controller with a ready endpoint.
func servesReady(s *discoveryv1.EndpointSlice, service string) bool {
	return !IsActivatorSlice(s) && s.Labels[discoveryv1.LabelServiceName] == service &&
		slices.ContainsFunc(s.Endpoints, func(ep discoveryv1.Endpoint) bool { return len(ep.Addresses) > 0 && endpointReady(ep) })
}

// UpdateActivatorSlice returns live with desired's labels, ports, address
// type and endpoints when any of them differs, else (nil, false). The
// address type is immutable: a change of family needs a new slice (the
// caller deletes live then).
func UpdateActivatorSlice(live, desired *discoveryv1.EndpointSlice) (*discoveryv1.EndpointSlice, bool) {
	if maps.Equal(live.Labels, desired.Labels) && equality.Semantic.DeepEqual(live.Ports, desired.Ports) &&
		equality.Semantic.DeepEqual(normalEndpoints(live.Endpoints), normalEndpoints(desired.Endpoints)) {
		return nil, false
	}
	out := live.DeepCopy()
	out.Labels = cloneMap(desired.Labels)
	out.Ports = slices.Clone(desired.Ports)
	out.Endpoints = slices.Clone(desired.Endpoints)
	return out, true
}

// normalEndpoints treats no endpoints and an empty list alike.
func normalEndpoints(eps []discoveryv1.Endpoint) []discoveryv1.Endpoint {
	if len(eps) == 0 {
		return nil
	}
	return eps
}
