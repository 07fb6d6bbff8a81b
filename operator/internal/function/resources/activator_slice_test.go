package resources

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
)

func stzFunction(min *int32) *v1alpha2.Function {
	fn := &v1alpha2.Function{
		ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: "team", UID: types.UID("uid-1"), Labels: map[string]string{"app": "shop"}},
	}
	if min != nil {
		fn.Spec.ScaleConfig = &v1alpha2.ScaleConfig{MinReplicas: min, MaxReplicas: ptr.To[int32](3)}
	}
	return fn
}

func TestActivatorSlice(t *testing.T) {
	fn := stzFunction(ptr.To[int32](0))
	eps := []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.7"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}}
	s := ActivatorSlice(fn, 20003, "", eps)

	assert.Equal(t, "hello-activator", s.Name)
	assert.Equal(t, "team", s.Namespace)
	assert.Equal(t, map[string]string{
		"app":                        "shop",
		v1alpha2.LabelFunctionName:   "hello",
		v1alpha2.LabelManagedBy:      v1alpha2.ManagedByController,
		v1alpha2.LabelUUID:           "uid-1",
		discoveryv1.LabelServiceName: "hello",
		discoveryv1.LabelManagedBy:   module.ActivatorSliceManagedBy,
	}, s.Labels)
	require.Len(t, s.OwnerReferences, 1)
	assert.Equal(t, "Function", s.OwnerReferences[0].Kind)
	assert.Equal(t, types.UID("uid-1"), s.OwnerReferences[0].UID)
	assert.Equal(t, discoveryv1.AddressTypeIPv4, s.AddressType, "IPv4 when the activator has no slice to tell")
	require.Len(t, s.Ports, 1)
	assert.Equal(t, "http", *s.Ports[0].Name, "matched to the Service's port by name")
	assert.EqualValues(t, "TCP", *s.Ports[0].Protocol)
	assert.EqualValues(t, 20003, *s.Ports[0].Port)
	assert.Equal(t, eps, s.Endpoints)
	assert.True(t, IsActivatorSlice(s))

	port, ok := ActivatorSlicePort(s)
	assert.True(t, ok)
	assert.EqualValues(t, 20003, port)
}

func madeSlices(ports ...int32) []discoveryv1.EndpointSlice {
	var out []discoveryv1.EndpointSlice
	for _, p := range ports {
		out = append(out, *ActivatorSlice(stzFunction(ptr.To[int32](0)), p, discoveryv1.AddressTypeIPv4, nil))
	}
	return out
}

func TestFreeActivatorPort(t *testing.T) {
	full := make([]int32, 0, module.ActivatorPortLast-module.ActivatorPortFirst+1)
	for p := int32(module.ActivatorPortFirst); p <= module.ActivatorPortLast; p++ {
		full = append(full, p)
	}
	tests := []struct {
		name   string
		made   []discoveryv1.EndpointSlice
		want   int32
		wantOK bool
	}{
		{"none made", nil, module.ActivatorPortFirst, true},
		{"the first taken", madeSlices(20000), 20001, true},
		{"a gap is reused", madeSlices(20000, 20002, 20001, 20004), 20003, true},
		{"ports out of the range do not count", madeSlices(80, 30000), module.ActivatorPortFirst, true},
		{"all taken", madeSlices(full...), 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := FreeActivatorPort(tt.made)
			assert.Equal(t, tt.wantOK, ok)
			assert.Equal(t, tt.want, got)
		})
	}
}

func activatorSlice(family discoveryv1.AddressType, eps ...discoveryv1.Endpoint) discoveryv1.EndpointSlice {
	return discoveryv1.EndpointSlice{AddressType: family, Endpoints: eps}
}

func endpoint(addr string, ready *bool) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{Addresses: []string{addr}, Conditions: discoveryv1.EndpointConditions{Ready: ready}, NodeName: ptr.To("node-" + addr)}
}

func TestActivatorEndpoints(t *testing.T) {
	ready := func(addr string) discoveryv1.Endpoint {
		return discoveryv1.Endpoint{Addresses: []string{addr}, NodeName: ptr.To("node-" + addr),
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)}}
	}
	tests := []struct {
		name       string
		slices     []discoveryv1.EndpointSlice
		wantFamily discoveryv1.AddressType
		want       []discoveryv1.Endpoint
	}{
		{"no slice", nil, "", nil},
		{"ready ones, sorted, unset readiness is ready", []discoveryv1.EndpointSlice{
			activatorSlice(discoveryv1.AddressTypeIPv4, endpoint("10.0.0.9", ptr.To(true)), endpoint("10.0.0.2", nil), endpoint("10.0.0.5", ptr.To(false))),
		}, discoveryv1.AddressTypeIPv4, []discoveryv1.Endpoint{ready("10.0.0.2"), ready("10.0.0.9")}},
		{"across slices without duplicates", []discoveryv1.EndpointSlice{
			activatorSlice(discoveryv1.AddressTypeIPv4, endpoint("10.0.0.2", nil)),
			activatorSlice(discoveryv1.AddressTypeIPv4, endpoint("10.0.0.2", nil), endpoint("10.0.0.1", nil)),
		}, discoveryv1.AddressTypeIPv4, []discoveryv1.Endpoint{ready("10.0.0.1"), ready("10.0.0.2")}},
		{"dual stack: IPv4 only", []discoveryv1.EndpointSlice{
			activatorSlice(discoveryv1.AddressTypeIPv6, endpoint("fd00::2", nil)),
			activatorSlice(discoveryv1.AddressTypeIPv4, endpoint("10.0.0.2", nil)),
		}, discoveryv1.AddressTypeIPv4, []discoveryv1.Endpoint{ready("10.0.0.2")}},
		{"IPv6 only", []discoveryv1.EndpointSlice{
			activatorSlice(discoveryv1.AddressTypeIPv6, endpoint("fd00::2", nil)),
		}, discoveryv1.AddressTypeIPv6, []discoveryv1.Endpoint{ready("fd00::2")}},
		{"none ready", []discoveryv1.EndpointSlice{
			activatorSlice(discoveryv1.AddressTypeIPv4, endpoint("10.0.0.5", ptr.To(false))),
		}, discoveryv1.AddressTypeIPv4, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			family, got := ActivatorEndpoints(tt.slices)
			assert.Equal(t, tt.wantFamily, family)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestServiceHasReadyEndpoint(t *testing.T) {
	own := func(service string, eps ...discoveryv1.Endpoint) discoveryv1.EndpointSlice {
		s := activatorSlice(discoveryv1.AddressTypeIPv4, eps...)
		s.Labels = map[string]string{discoveryv1.LabelServiceName: service, discoveryv1.LabelManagedBy: ClusterSliceManager}
		return s
	}
	ours := *ActivatorSlice(stzFunction(ptr.To[int32](0)), 20000, "", []discoveryv1.Endpoint{endpoint("10.0.0.1", nil)})
	tests := []struct {
		name   string
		slices []discoveryv1.EndpointSlice
		want   bool
	}{
		{"none", nil, false},
		{"ours does not count", []discoveryv1.EndpointSlice{ours}, false},
		{"the Service's own, ready", []discoveryv1.EndpointSlice{ours, own("hello", endpoint("10.1.0.1", nil))}, true},
		{"the Service's own, not ready", []discoveryv1.EndpointSlice{own("hello", endpoint("10.1.0.1", ptr.To(false)))}, false},
		{"the Service's own, empty", []discoveryv1.EndpointSlice{own("hello")}, false},
		{"another Service's", []discoveryv1.EndpointSlice{own("other", endpoint("10.1.0.1", nil))}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { assert.Equal(t, tt.want, ServiceHasReadyEndpoint("hello", tt.slices)) })
	}
}

func TestReadyAgainAfter(t *testing.T) {
	failed := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	own := func(service, changed string, eps ...discoveryv1.Endpoint) discoveryv1.EndpointSlice {
		s := activatorSlice(discoveryv1.AddressTypeIPv4, eps...)
		s.Labels = map[string]string{discoveryv1.LabelServiceName: service, discoveryv1.LabelManagedBy: ClusterSliceManager}
		if changed != "" {
			s.Annotations = map[string]string{corev1.EndpointsLastChangeTriggerTime: changed}
		}
		return s
	}
	after, before := "2026-11-29T12:00:04Z", "2026-11-29T11:59:58.5Z"
	ours := *ActivatorSlice(stzFunction(ptr.To[int32](0)), 20000, "", []discoveryv1.Endpoint{endpoint("10.0.0.1", nil)})
	ours.Annotations = map[string]string{corev1.EndpointsLastChangeTriggerTime: after}
	tests := []struct {
		name   string
		slices []discoveryv1.EndpointSlice
		want   bool
	}{
		{"none", nil, false},
		{"ready since after the failure", []discoveryv1.EndpointSlice{own("hello", after, endpoint("10.1.0.1", nil))}, true},
		{"ready since before it", []discoveryv1.EndpointSlice{own("hello", before, endpoint("10.1.0.1", nil))}, false},
		{"changed at the same instant", []discoveryv1.EndpointSlice{own("hello", failed.Format(time.RFC3339Nano), endpoint("10.1.0.1", nil))}, false},
		{"changed after it, not ready", []discoveryv1.EndpointSlice{own("hello", after, endpoint("10.1.0.1", ptr.To(false)))}, false},
		{"no stamp", []discoveryv1.EndpointSlice{own("hello", "", endpoint("10.1.0.1", nil))}, false},
		{"a stamp that is no time", []discoveryv1.EndpointSlice{own("hello", "yesterday", endpoint("10.1.0.1", nil))}, false},
		{"ours does not count", []discoveryv1.EndpointSlice{ours}, false},
		{"another Service's", []discoveryv1.EndpointSlice{own("other", after, endpoint("10.1.0.1", nil))}, false},
		{"one of two slices", []discoveryv1.EndpointSlice{own("hello", before, endpoint("10.1.0.1", nil)), own("hello", after, endpoint("10.1.0.2", nil))}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { assert.Equal(t, tt.want, ReadyAgainAfter("hello", tt.slices, failed)) })
	}
}

func TestUpdateActivatorSlice(t *testing.T) {
	fn := stzFunction(ptr.To[int32](0))
	eps := []discoveryv1.Endpoint{endpoint("10.0.0.1", ptr.To(true))}
	live := ActivatorSlice(fn, 20001, "", eps)
	live.ResourceVersion = "7"

	_, changed := UpdateActivatorSlice(live, ActivatorSlice(fn, 20001, "", eps))
	assert.False(t, changed, "the same")

	emptied := ActivatorSlice(fn, 20001, "", nil)
	out, changed := UpdateActivatorSlice(live, emptied)
	require.True(t, changed, "endpoints dropped")
	assert.Empty(t, out.Endpoints)
	assert.Equal(t, "7", out.ResourceVersion, "an update of the live slice")
	assert.Len(t, live.Endpoints, 1, "live untouched")

	live.Endpoints = []discoveryv1.Endpoint{}
	_, changed = UpdateActivatorSlice(live, emptied)
	assert.False(t, changed, "an empty list is no endpoint")

	relabelled := stzFunction(ptr.To[int32](0))
	relabelled.Labels = map[string]string{"app": "other"}
	out, changed = UpdateActivatorSlice(live, ActivatorSlice(relabelled, 20001, "", nil))
	require.True(t, changed, "labels follow the Function")
	assert.Equal(t, "other", out.Labels["app"])
}
