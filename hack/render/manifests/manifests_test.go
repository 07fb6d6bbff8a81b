package manifests

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/kyma-project/serverless-manager/operator/pkg/manifest"
	"github.com/kyma-project/serverless-manager/operator/pkg/repo"
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
	for _, o := range build(t, "") {
		opts := []client.CreateOption{client.DryRunAll}
		if o.GetKind() == "Namespace" {
			opts = nil // the namespaced objects need it for real
		}
		assert.NoError(t, c.Create(ctx, o, opts...), "%s %s", o.GetKind(), o.GetName())
	}
}
