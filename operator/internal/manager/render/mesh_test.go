package render_test

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/values"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
)

// Mesh mode (spec.scaleToZero.mesh: istio) changes exactly what
// docs/contributor/scale-to-zero.md's Mesh Mode names and nothing else: the
// activator Pod gets Istio's sidecar (label), a native one that the
// activator waits for (annotations) and ACTIVATOR_MESH; the Function
// controller gets APP_SCALE_TO_ZERO_MESH; with NetworkPolicies the
// activator may reach istiod. Without it the render is the one of before
// (the golden renders, TestGoldenRenders).
func TestMeshModeRendersTheSidecarAndTheFlags(t *testing.T) {
	r := renderer(t)
	activator := module.Activator().Name
	for _, netpol := range []bool{false, true} {
		t.Run(map[bool]string{false: "without NetworkPolicies", true: "with NetworkPolicies"}[netpol], func(t *testing.T) {
			off := variant{spec: v1alpha1.ServerlessSpec{EnableNetworkPolicies: netpol}, facts: values.Facts{Nodes: 3}}.render(t, r)
			on := variant{spec: v1alpha1.ServerlessSpec{EnableNetworkPolicies: netpol,
				ScaleToZero: &v1alpha1.ScaleToZero{Mesh: v1alpha1.MeshIstio}}, facts: values.Facts{Nodes: 3}}.render(t, r)
			require.Equal(t, names(off), names(on), "the same objects")

			offDep := typed[appsv1.Deployment](t, find(t, off, "Deployment", activator))
			dep := typed[appsv1.Deployment](t, find(t, on, "Deployment", activator))
			tmpl := &dep.Spec.Template
			assert.Equal(t, "true", tmpl.Labels["sidecar.istio.io/inject"], "Istio injects on the Pod's label")
			assert.Equal(t, map[string]string{
				"sidecar.istio.io/nativeSidecar": "true",
				"proxy.istio.io/config":          `{ "holdApplicationUntilProxyStarts": true }`,
			}, tmpl.Annotations, "no inject: false annotation")
			assert.Equal(t, map[string]string{"sidecar.istio.io/inject": "false"}, offDep.Spec.Template.Annotations)
			assert.Equal(t, "istio", dropEnv(t, &tmpl.Spec.Containers[0], "ACTIVATOR_MESH"))
			assert.NotContains(t, tmpl.Annotations, "traffic.sidecar.istio.io/excludeInboundPorts",
				"the callers' sidecars send mutual TLS to the activator's ports: its sidecar must take them")
			delete(tmpl.Labels, "sidecar.istio.io/inject")
			tmpl.Annotations = offDep.Spec.Template.Annotations
			assert.Equal(t, offDep, dep, "nothing else of the activator changes")

			offCtrl := typed[appsv1.Deployment](t, find(t, off, "Deployment", controllerDeployment))
			ctrl := typed[appsv1.Deployment](t, find(t, on, "Deployment", controllerDeployment))
			assert.Equal(t, "istio", dropEnv(t, &ctrl.Spec.Template.Spec.Containers[0], "APP_SCALE_TO_ZERO_MESH"))
			assert.Equal(t, offCtrl, ctrl, "nothing else of the controller changes")

			skip := []string{"Deployment/" + activator, "Deployment/" + controllerDeployment}
			if netpol {
				const egress = "kyma-project.io--serverless-activator-egress"
				offPol := typed[networkingv1.NetworkPolicy](t, find(t, off, "NetworkPolicy", egress))
				pol := typed[networkingv1.NetworkPolicy](t, find(t, on, "NetworkPolicy", egress))
				require.Len(t, pol.Spec.Egress, len(offPol.Spec.Egress)+1)
				istiod := pol.Spec.Egress[len(pol.Spec.Egress)-1]
				require.Len(t, istiod.Ports, 1)
				assert.Equal(t, int32(15012), istiod.Ports[0].Port.IntVal, "the sidecar's xDS and certificates")
				pol.Spec.Egress = pol.Spec.Egress[:len(pol.Spec.Egress)-1]
				assert.Equal(t, offPol, pol)
				skip = append(skip, "NetworkPolicy/"+egress)
			}
			for i := range on {
				if slices.Contains(skip, on[i].GetKind()+"/"+on[i].GetName()) {
					continue
				}
				assert.Equal(t, off[i].Object, on[i].Object, "%s %s", on[i].GetKind(), on[i].GetName())
			}
		})
	}
}

// controllerDeployment is the chart's (and release 1.13's) name of the
// Function controller's Deployment.
const controllerDeployment = "serverless-ctrl-mngr"

func names(objs []*unstructured.Unstructured) []string {
	out := make([]string, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.GetKind()+"/"+o.GetNamespace()+"/"+o.GetName())
	}
	return out
}

// dropEnv removes the variable name from c and returns its value; the test
// fails when c has it not exactly once.
func dropEnv(t *testing.T, c *corev1.Container, name string) string {
	t.Helper()
	i := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == name })
	require.GreaterOrEqual(t, i, 0, "%s in container %s", name, c.Name)
	v := c.Env[i].Value
	c.Env = slices.Delete(c.Env, i, i+1)
	require.False(t, slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == name }), "%s once", name)
	return v
}
