package render_test

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kyma-project/serverless-manager/operator/pkg/manifest"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
	"github.com/kyma-project/serverless-manager/tests/support/repo"
)

// activatorRoleFile is where `make manifests` writes the activator's
// ClusterRole and Lease Role, generated from its +kubebuilder:rbac markers.
const activatorRoleFile = "charts/serverless/files/activator-rbac/role.yaml"

// The chart runs the activator as docs/contributor/scale-to-zero.md says:
// two restricted replicas of its own image and identity, a
// PodDisruptionBudget, its Service, its generated permissions, bound to its
// ServiceAccount.
func TestChartRunsTheActivator(t *testing.T) {
	r := renderer(t)
	id := module.Activator()
	var def variant
	for _, v := range variants() {
		if v.name == "default" {
			def = v
		}
	}
	objs := def.render(t, r)

	d := typed[appsv1.Deployment](t, find(t, objs, "Deployment", id.Name))
	assert.Equal(t, int32(2), *d.Spec.Replicas)
	pod := d.Spec.Template.Spec
	assert.Equal(t, id.ServiceAccount, pod.ServiceAccountName)
	require.Len(t, pod.Containers, 1)
	c := pod.Containers[0]
	assert.Equal(t, []string{"/" + id.Binary}, c.Command)
	assert.Equal(t, "europe-docker.pkg.dev/kyma-project/prod/serverless-activator:"+moduleVersion(t), c.Image)
	assert.True(t, *pod.SecurityContext.RunAsNonRoot)
	assert.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, pod.SecurityContext.SeccompProfile.Type)
	assert.False(t, *c.SecurityContext.AllowPrivilegeEscalation)
	assert.True(t, *c.SecurityContext.ReadOnlyRootFilesystem)
	assert.Equal(t, []corev1.Capability{"ALL"}, c.SecurityContext.Capabilities.Drop)
	assert.Equal(t, intstr.FromInt(id.HealthPort), c.LivenessProbe.HTTPGet.Port)
	assert.Equal(t, intstr.FromInt(id.HealthPort), c.ReadinessProbe.HTTPGet.Port)
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}
	assert.Equal(t, "metadata.namespace", env["POD_NAMESPACE"].ValueFrom.FieldRef.FieldPath)
	assert.Equal(t, "1m", env["ACTIVATOR_HOLD_TIMEOUT"].Value)
	assert.Greater(t, *pod.TerminationGracePeriodSeconds, int64(60), "longer than the hold timeout")

	pdb := typed[policyv1.PodDisruptionBudget](t, find(t, objs, "PodDisruptionBudget", id.Name))
	assert.Equal(t, intstr.FromInt(1), *pdb.Spec.MinAvailable)
	assert.Equal(t, d.Spec.Selector.MatchLabels, pdb.Spec.Selector.MatchLabels)

	svc := typed[corev1.Service](t, find(t, objs, "Service", module.ActivatorServiceName))
	assert.Equal(t, corev1.ServiceTypeClusterIP, svc.Spec.Type)
	assert.Equal(t, d.Spec.Selector.MatchLabels, svc.Spec.Selector, "its EndpointSlices list the activator Pods")
	for k, v := range svc.Spec.Selector {
		assert.Equal(t, v, d.Spec.Template.Labels[k])
	}

	// The rules are the generated ones, and bound to its ServiceAccount.
	generated, err := manifest.ReadFile(repo.MustRoot() + "/" + activatorRoleFile)
	require.NoError(t, err)
	want := map[string][]rbacv1.PolicyRule{}
	for _, g := range generated {
		switch g.GetKind() {
		case "ClusterRole":
			want["ClusterRole"] = typed[rbacv1.ClusterRole](t, g).Rules
		case "Role":
			want["Role"] = typed[rbacv1.Role](t, g).Rules
		}
	}
	require.NotEmpty(t, want["ClusterRole"])
	require.NotEmpty(t, want["Role"])
	assert.Equal(t, want["ClusterRole"], typed[rbacv1.ClusterRole](t, find(t, objs, "ClusterRole", id.ServiceAccount)).Rules)
	role := typed[rbacv1.Role](t, find(t, objs, "Role", id.ServiceAccount))
	assert.Equal(t, want["Role"], role.Rules)
	for _, r := range role.Rules {
		if len(r.ResourceNames) > 0 {
			assert.Equal(t, []string{module.ActivatorLeaseName}, r.ResourceNames)
		}
	}
	subject := rbacv1.Subject{Kind: "ServiceAccount", Name: id.ServiceAccount, Namespace: "kyma-system"}
	assert.Equal(t, []rbacv1.Subject{subject}, typed[rbacv1.ClusterRoleBinding](t, find(t, objs, "ClusterRoleBinding", id.ServiceAccount)).Subjects)
	assert.Equal(t, []rbacv1.Subject{subject}, typed[rbacv1.RoleBinding](t, find(t, objs, "RoleBinding", id.ServiceAccount)).Subjects)
	find(t, objs, "ServiceAccount", id.ServiceAccount)
}

// With NetworkPolicies, requests reach the activator on the whole port
// range, and it reaches the Functions' port 8080.
func TestNetworkPoliciesAdmitTheActivator(t *testing.T) {
	r := renderer(t)
	var np variant
	for _, v := range variants() {
		if v.name == "network-policies" {
			np = v
		}
	}
	objs := np.render(t, r)
	in := typed[networkingv1.NetworkPolicy](t, find(t, objs, "NetworkPolicy", "kyma-project.io--serverless-activator-ingress"))
	require.NotEmpty(t, in.Spec.Ingress)
	open := in.Spec.Ingress[0]
	assert.Empty(t, open.From, "any client of any Function")
	require.Len(t, open.Ports, 1)
	assert.Equal(t, intstr.FromInt(module.ActivatorPortFirst), *open.Ports[0].Port)
	assert.Equal(t, int32(module.ActivatorPortLast), *open.Ports[0].EndPort)

	out := typed[networkingv1.NetworkPolicy](t, find(t, objs, "NetworkPolicy", "kyma-project.io--serverless-activator-egress"))
	require.Len(t, out.Spec.Egress, 1)
	assert.Equal(t, intstr.FromInt(8080), *out.Spec.Egress[0].Ports[0].Port)

	d := typed[appsv1.Deployment](t, find(t, objs, "Deployment", module.Activator().Name))
	for _, p := range []*networkingv1.NetworkPolicy{in, out} {
		for k, v := range p.Spec.PodSelector.MatchLabels {
			assert.Equal(t, v, d.Spec.Template.Labels[k], "%s selects the activator's Pods (%s)", p.Name, strconv.Quote(k))
		}
	}
}
