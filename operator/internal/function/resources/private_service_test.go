package resources

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
)

// The private Service is headless, selects the Function's Pods, lists them
// before they are ready, serves their port 8080 by the public Service's
// port name, and goes with the Function.
func TestPrivateService(t *testing.T) {
	fn := newFunction(v1alpha2.RuntimeNodejs24)
	svc := PrivateService(fn)
	assert.Equal(t, "hello-private", svc.Name)
	assert.Equal(t, "fn-test-1", svc.Namespace)
	assert.Equal(t, FunctionLabels(fn), svc.Labels, "the cluster copies them onto its slices, which the activator reads")
	assert.Empty(t, svc.Annotations, "Prometheus scrapes the Function's Service, not this one")
	require.Len(t, svc.OwnerReferences, 1)
	owner := svc.OwnerReferences[0]
	assert.Equal(t, "Function", owner.Kind)
	assert.Equal(t, fn.UID, owner.UID)
	assert.True(t, *owner.Controller)
	assert.True(t, IsHeadless(svc))
	assert.True(t, svc.Spec.PublishNotReadyAddresses)
	assert.Equal(t, SelectorLabels(fn), svc.Spec.Selector)
	assert.Equal(t, []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 8080, TargetPort: intstr.FromInt32(8080)}}, svc.Spec.Ports)
	assert.False(t, IsHeadless(Service(inputs(fn))), "the Function's own Service keeps its cluster IP")
}

func TestUpdatePrivateService(t *testing.T) {
	fn := newFunction(v1alpha2.RuntimeNodejs24)
	desired := PrivateService(fn)
	tests := []struct {
		name   string
		mutate func(*corev1.Service)
		want   bool
	}{
		{name: "as built", mutate: func(*corev1.Service) {}},
		{name: "an annotation of someone else's", mutate: func(s *corev1.Service) { s.Annotations = map[string]string{"x": "y"} }},
		{name: "the protocol defaulted", mutate: func(s *corev1.Service) { s.Spec.Ports[0].Protocol = "" }},
		{name: "a label changed", mutate: func(s *corev1.Service) { s.Labels["app"] = "other" }, want: true},
		{name: "another selector", mutate: func(s *corev1.Service) { s.Spec.Selector = map[string]string{"a": "b"} }, want: true},
		{name: "ready Pods only", mutate: func(s *corev1.Service) { s.Spec.PublishNotReadyAddresses = false }, want: true},
		{name: "another port", mutate: func(s *corev1.Service) { s.Spec.Ports[0].Port = 80 }, want: true},
		{name: "no port", mutate: func(s *corev1.Service) { s.Spec.Ports = nil }, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			live := PrivateService(fn)
			live.ResourceVersion = "7"
			tt.mutate(live)
			got, changed := UpdatePrivateService(live, desired)
			assert.Equal(t, tt.want, changed)
			if !tt.want {
				assert.Nil(t, got)
				return
			}
			assert.Equal(t, desired.Labels, got.Labels)
			assert.Equal(t, desired.Spec.Selector, got.Spec.Selector)
			assert.Equal(t, desired.Spec.Ports, got.Spec.Ports)
			assert.True(t, got.Spec.PublishNotReadyAddresses)
			assert.Equal(t, "7", got.ResourceVersion, "an update of the live object")
			again, changed := UpdatePrivateService(got, desired)
			assert.False(t, changed, "steady after the update")
			assert.Nil(t, again)
		})
	}
}
