package manifests

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/kyma-project/serverless-manager/operator/pkg/fips"
	"github.com/kyma-project/serverless-manager/operator/pkg/manifest"
	"github.com/kyma-project/serverless-manager/tests/support/repo"
)

func build(t *testing.T, image string) []*unstructured.Unstructured {
	t.Helper()
	out, err := Build(filepath.Join(repo.MustRoot(), "config", "default"), image)
	require.NoError(t, err)
	objs, err := manifest.Decode(out)
	require.NoError(t, err)
	return objs
}

func find[T any](t *testing.T, objs []*unstructured.Unstructured, kind string) *T {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind {
			var typed T
			require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &typed))
			return &typed
		}
	}
	t.Fatalf("no %s rendered", kind)
	return nil
}

func TestInstallManifestsFollowTheRules(t *testing.T) {
	objs := build(t, "example.com/serverless-manager:dev")

	d := find[appsv1.Deployment](t, objs, "Deployment")
	assert.Equal(t, "kyma-system", d.Namespace)
	pod := d.Spec.Template.Spec
	c := pod.Containers[0]
	assert.Equal(t, "example.com/serverless-manager:dev", c.Image)
	require.NotNil(t, pod.SecurityContext.RunAsNonRoot)
	assert.True(t, *pod.SecurityContext.RunAsNonRoot)
	assert.Equal(t, "RuntimeDefault", string(pod.SecurityContext.SeccompProfile.Type))
	assert.False(t, *c.SecurityContext.AllowPrivilegeEscalation)
	assert.True(t, *c.SecurityContext.ReadOnlyRootFilesystem)
	assert.Equal(t, "ALL", string(c.SecurityContext.Capabilities.Drop[0]))
	assert.LessOrEqual(t, c.Resources.Limits.Memory().Cmp(resource.MustParse("160Mi")), 0)
	assert.LessOrEqual(t, c.Resources.Limits.Cpu().Cmp(resource.MustParse("500m")), 0)
	assert.Contains(t, c.Args, "--leader-elect=true")
	assert.NotNil(t, c.LivenessProbe)
	assert.NotNil(t, c.ReadinessProbe)

	// The manager is scheduled before user workloads, and its NetworkPolicies
	// select its Pods.
	pc := find[schedulingv1.PriorityClass](t, objs, "PriorityClass")
	assert.Equal(t, pc.Name, pod.PriorityClassName)
	assert.Greater(t, pc.Value, int32(1000000), "above user workloads")
	policies := 0
	for _, o := range objs {
		if o.GetKind() != "NetworkPolicy" {
			continue
		}
		policies++
		var np networkingv1.NetworkPolicy
		require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &np))
		sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
		require.NoError(t, err)
		assert.True(t, sel.Matches(labels.Set(d.Spec.Template.Labels)), "NetworkPolicy %s selects the manager's Pods", np.Name)
	}
	assert.Equal(t, 3, policies, "API server, DNS, metrics")

	binding := find[rbacv1.ClusterRoleBinding](t, objs, "ClusterRoleBinding")
	role := find[rbacv1.ClusterRole](t, objs, "ClusterRole")
	assert.Equal(t, role.Name, binding.RoleRef.Name)
	assert.Equal(t, pod.ServiceAccountName, binding.Subjects[0].Name, "the Deployment runs as the bound ServiceAccount")
	assert.Equal(t, d.Namespace, binding.Subjects[0].Namespace)
	for _, rule := range role.Rules {
		assert.NotContains(t, rule.Verbs, "*")
		assert.NotContains(t, rule.Resources, "*")
		assert.NotContains(t, rule.APIGroups, "*")
	}
	for _, o := range objs {
		assert.NotEqual(t, "Namespace", o.GetKind(), "deleting the manifest must not delete %s", o.GetName())
		assert.Equal(t, "serverless", o.GetLabels()["kyma-project.io/module"], "%s %s", o.GetKind(), o.GetName())
		assert.NotContains(t, o.GetLabels(), "app.kubernetes.io/managed-by", "that label marks what the manager applies")
	}
}

// Kubernetes itself validates the install manifests (server-side dry run).
func TestInstallManifestsPassServerSideDryRun(t *testing.T) {
	env := &envtest.Environment{BinaryAssetsDirectory: filepath.Join(repo.MustRoot(), "bin", "assets")}
	cfg, err := env.Start()
	require.NoError(t, err, "run `make tools` first")
	t.Cleanup(func() { _ = env.Stop() })
	c, err := client.New(cfg, client.Options{})
	require.NoError(t, err)
	ctx := context.Background()
	// The manifest carries no Namespace: the module namespace exists first.
	require.NoError(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kyma-system"}}))
	for _, o := range build(t, "") {
		assert.NoError(t, c.Create(ctx, o, client.DryRunAll), "%s %s", o.GetKind(), o.GetName())
	}
}

// Users get the Serverless CR through the built-in roles: edit may change
// it, view may only read it.
func TestUserRolesAggregateIntoBuiltInRoles(t *testing.T) {
	objs := build(t, "")
	tests := []struct {
		name, aggregateTo string
		verbs, notVerbs   []string
	}{
		{"kyma-serverless-edit", "edit", []string{"get", "list", "watch", "create", "update", "patch", "delete"}, nil},
		{"kyma-serverless-view", "view", []string{"get", "list", "watch"}, []string{"create", "update", "patch", "delete"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var role *rbacv1.ClusterRole
			for _, o := range objs {
				if o.GetKind() == "ClusterRole" && o.GetName() == tt.name {
					role = &rbacv1.ClusterRole{}
					require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, role))
				}
			}
			require.NotNil(t, role, "ClusterRole %s rendered", tt.name)
			assert.Equal(t, "true", role.Labels["rbac.authorization.k8s.io/aggregate-to-"+tt.aggregateTo])
			granted := map[string]bool{}
			for _, r := range role.Rules {
				if slices.Contains(r.APIGroups, "operator.kyma-project.io") && slices.Contains(r.Resources, "serverlesses") {
					for _, v := range r.Verbs {
						granted[v] = true
					}
				}
			}
			for _, v := range tt.verbs {
				assert.True(t, granted[v], "%s grants %s", tt.name, v)
			}
			for _, v := range tt.notVerbs {
				assert.False(t, granted[v], "%s must not grant %s", tt.name, v)
			}
		})
	}
}

// The install manifest brings the admission policy that warns about the
// Serverless CR's log settings: it must exist before any CR, which the
// module's chart cannot do. It only warns (never denies) and fails open.
func TestInstallManifestsWarnAboutServerlessCRs(t *testing.T) {
	objs := build(t, "")
	policy := find[admissionregistrationv1.ValidatingAdmissionPolicy](t, objs, "ValidatingAdmissionPolicy")
	binding := find[admissionregistrationv1.ValidatingAdmissionPolicyBinding](t, objs, "ValidatingAdmissionPolicyBinding")
	assert.Equal(t, "serverless-cr-warnings", policy.Name)
	assert.Equal(t, policy.Name, binding.Spec.PolicyName)
	assert.Equal(t, []admissionregistrationv1.ValidationAction{admissionregistrationv1.Warn}, binding.Spec.ValidationActions)
	require.NotNil(t, policy.Spec.FailurePolicy)
	assert.Equal(t, admissionregistrationv1.Ignore, *policy.Spec.FailurePolicy)
	rules := policy.Spec.MatchConstraints.ResourceRules
	require.Len(t, rules, 1)
	assert.Equal(t, []string{"operator.kyma-project.io"}, rules[0].APIGroups)
	assert.Equal(t, []string{"serverlesses"}, rules[0].Resources)
}

// The manager runs FIPS 140-only always, as release 1.13's operator does,
// and asks Kyma's runtime bootstrapper for KYMA_FIPS_MODE_ENABLED, which
// switches the installation to FIPS mode (docs/contributor/fips.md). An
// added env (the local cluster's images, FIPS mode in tests) keeps both.
func TestInstallManifestsRunTheManagerFIPSOnly(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  []string
	}{
		{name: "as released"},
		{name: "with FIPS mode switched on", env: []string{fips.EnvMode + "=true"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := Build(filepath.Join(repo.MustRoot(), "config", "default"), "", tc.env...)
			require.NoError(t, err)
			objs, err := manifest.Decode(out)
			require.NoError(t, err)
			d := find[appsv1.Deployment](t, objs, "Deployment")
			assert.Equal(t, "true", d.Spec.Template.Annotations["rt-cfg.kyma-project.io/set-fips-mode"])
			env := map[string]string{}
			for _, e := range d.Spec.Template.Spec.Containers[0].Env {
				env[e.Name] = e.Value
			}
			assert.Equal(t, fips.GODEBUG, env[fips.EnvGODEBUG])
			for _, kv := range tc.env {
				name, value, _ := strings.Cut(kv, "=")
				assert.Equal(t, value, env[name])
			}
		})
	}
}
