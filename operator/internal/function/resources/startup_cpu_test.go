package resources

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
)

// TestStartupCPU: only a scale-to-zero Function whose Pod may be resized
// back (a CPU limit below the start's, not Guaranteed) starts with the
// start's limit, and its template names its own; requests never change.
func TestStartupCPU(t *testing.T) {
	toZero := func(fn *v1alpha2.Function) {
		fn.Spec.ScaleConfig = &v1alpha2.ScaleConfig{MinReplicas: ptr.To[int32](0), MaxReplicas: ptr.To[int32](1)}
	}
	custom := func(reqCPU, limCPU, reqMem, limMem string) func(*v1alpha2.Function) {
		return func(fn *v1alpha2.Function) {
			res := corev1.ResourceRequirements{Requests: corev1.ResourceList{}, Limits: corev1.ResourceList{}}
			for _, q := range []struct {
				list corev1.ResourceList
				name corev1.ResourceName
				v    string
			}{{res.Requests, corev1.ResourceCPU, reqCPU}, {res.Limits, corev1.ResourceCPU, limCPU},
				{res.Requests, corev1.ResourceMemory, reqMem}, {res.Limits, corev1.ResourceMemory, limMem}} {
				if q.v != "" {
					q.list[q.name] = resource.MustParse(q.v)
				}
			}
			fn.Spec.ResourceConfiguration = &v1alpha2.ResourceConfiguration{Function: &v1alpha2.ResourceRequirements{Resources: &res}}
		}
	}
	tests := []struct {
		name       string
		fn         *v1alpha2.Function
		startLimit string
		wantLimit  string // the container's CPU limit in the template
		wantAfter  string // the annotation ("" absent)
	}{
		{"scale to zero, preset L", newFunction(v1alpha2.RuntimeNodejs22, toZero), "1", "1", "800m"},
		{"no scale to zero", newFunction(v1alpha2.RuntimeNodejs22), "1", "800m", ""},
		{"minReplicas 1", newFunction(v1alpha2.RuntimeNodejs22, func(fn *v1alpha2.Function) {
			fn.Spec.ScaleConfig = &v1alpha2.ScaleConfig{MinReplicas: ptr.To[int32](1), MaxReplicas: ptr.To[int32](2)}
		}), "1", "800m", ""},
		{"off", newFunction(v1alpha2.RuntimeNodejs22, toZero), "0", "800m", ""},
		{"own limit at the start's", newFunction(v1alpha2.RuntimeNodejs22, toZero, custom("100m", "1", "64Mi", "128Mi")), "1", "1", ""},
		{"own limit above the start's", newFunction(v1alpha2.RuntimeNodejs22, toZero, custom("100m", "2", "64Mi", "128Mi")), "1", "2", ""},
		{"Guaranteed", newFunction(v1alpha2.RuntimeNodejs22, toZero, custom("150m", "150m", "128Mi", "128Mi")), "1", "150m", ""},
		{"Guaranteed by limits alone", newFunction(v1alpha2.RuntimeNodejs22, toZero, custom("", "150m", "", "128Mi")), "1", "150m", ""},
		{"CPU at its limit, memory below", newFunction(v1alpha2.RuntimeNodejs22, toZero, custom("150m", "150m", "64Mi", "128Mi")), "1", "1", "150m"},
		{"no CPU limit", newFunction(v1alpha2.RuntimeNodejs22, toZero, custom("100m", "", "64Mi", "128Mi")), "1", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := inputs(tt.fn)
			in.Config.StartupCPULimit = resource.MustParse(tt.startLimit)
			bin := BuildlessInputs{Function: tt.fn, Config: in.Config}
			for mode, tmpl := range map[string]corev1.PodTemplateSpec{
				"build":     Deployment(in).Spec.Template,
				"buildless": BuildlessDeployment(bin).Spec.Template,
			} {
				c := tmpl.Spec.Containers[0]
				gotLimit := ""
				if q, ok := c.Resources.Limits[corev1.ResourceCPU]; ok {
					gotLimit = q.String()
				}
				assert.Equal(t, tt.wantLimit, gotLimit, "%s: CPU limit", mode)
				assert.Equal(t, tt.wantAfter, tmpl.Annotations[AnnotationCPULimitAfterStart], "%s: annotation", mode)
				unboosted := inputs(tt.fn)
				unboosted.Config.StartupCPULimit = resource.Quantity{}
				assert.Equal(t, Deployment(unboosted).Spec.Template.Spec.Containers[0].Resources.Requests, c.Resources.Requests, "%s: requests", mode)
			}
		})
	}
}

// TestStartupCPUAnnotationLeavesWithTheBoost: a buildless template keeps
// annotations others set, but not ours once the Function no longer scales
// to zero.
func TestStartupCPUAnnotationLeavesWithTheBoost(t *testing.T) {
	fn := newFunction(v1alpha2.RuntimeNodejs22)
	cfg := testConfig()
	cfg.StartupCPULimit = resource.MustParse("1")
	live := BuildlessDeployment(BuildlessInputs{Function: fn, Config: cfg})
	live.Spec.Template.Annotations[AnnotationCPULimitAfterStart] = "800m"
	live.Spec.Template.Annotations["team.example.com/owner"] = "a"
	got := BuildlessDeployment(BuildlessInputs{Function: fn, Config: cfg, Live: live}).Spec.Template.Annotations
	assert.NotContains(t, got, AnnotationCPULimitAfterStart)
	assert.Equal(t, "a", got["team.example.com/owner"])
}

func TestReadyPods(t *testing.T) {
	ep := func(pod string, uid types.UID, ready *bool) discoveryv1.Endpoint {
		return discoveryv1.Endpoint{Addresses: []string{"198.51.100.7"}, Conditions: discoveryv1.EndpointConditions{Ready: ready},
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Name: pod, UID: uid}}
	}
	slice := func(name, service string, eps ...discoveryv1.Endpoint) discoveryv1.EndpointSlice {
		return discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "fn-test-1",
			Labels: map[string]string{discoveryv1.LabelServiceName: service}}, Endpoints: eps}
	}
	activator := slice("hello-activator", "hello", ep("serverless-activator-1", "a1", ptr.To(true)))
	activator.Labels[discoveryv1.LabelManagedBy] = module.ActivatorSliceManagedBy
	activator.Name = ActivatorSliceName(newFunction(v1alpha2.RuntimeNodejs22))
	node := ep("node-1", "n1", ptr.To(true))
	node.TargetRef.Kind = "Node"
	all := []discoveryv1.EndpointSlice{
		slice("hello-abc", "hello", ep("hello-1", "u1", ptr.To(true)), ep("hello-2", "u2", ptr.To(false)), node),
		slice("hello-def", "hello", ep("hello-1", "u1", ptr.To(true)), ep("hello-3", "u3", nil)),
		slice("other-abc", "other", ep("other-1", "o1", ptr.To(true))),
	}
	all = append(all, activator)
	want := []types.NamespacedName{{Namespace: "fn-test-1", Name: "hello-1"}, {Namespace: "fn-test-1", Name: "hello-3"}}
	assert.Equal(t, want, ReadyPods("hello", all))
	assert.Empty(t, ReadyPods("nobody", all))
}
