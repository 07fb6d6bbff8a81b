package render_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/kyma-project/serverless-manager/charts"
	"github.com/kyma-project/serverless-manager/operator/pkg/manifest"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
	"github.com/kyma-project/serverless-manager/tests/support/repo"
)

// roleFile is where `make manifests` writes the Function controller's
// ClusterRole, generated from its +kubebuilder:rbac markers.
const roleFile = "charts/serverless/files/function-controller-rbac/role.yaml"

func typed[T any](t *testing.T, u *unstructured.Unstructured) *T {
	t.Helper()
	out := new(T)
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out), "%s %s", u.GetKind(), u.GetName())
	return out
}

func find(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("%s %s not rendered", kind, name)
	return nil
}

func moduleVersion(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repo.MustRoot(), "VERSION"))
	require.NoError(t, err)
	return strings.TrimSpace(string(data))
}

// The chart deploys the module's own Function controller: the image of this
// release, its entrypoint, its user, its identity's ports.
func TestChartRunsOurFunctionController(t *testing.T) {
	r := renderer(t)
	id := module.FunctionController()
	version := moduleVersion(t)

	var chartMeta struct {
		AppVersion string `json:"appVersion"`
	}
	data, err := fs.ReadFile(charts.Serverless(), "Chart.yaml")
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(data, &chartMeta))
	assert.Equal(t, version, chartMeta.AppVersion, "Chart.yaml appVersion follows VERSION")

	tests := []struct {
		variant   string
		wantImage string
	}{
		{"default", "europe-docker.pkg.dev/kyma-project/prod/serverless-function-controller:" + version},
		{"custom-presets", "mirror.example/fc:1.8.4"}, // IMAGE_FUNCTION_CONTROLLER still wins
	}
	for _, tt := range tests {
		t.Run(tt.variant, func(t *testing.T) {
			var v variant
			for _, x := range variants() {
				if x.name == tt.variant {
					v = x
				}
			}
			d := typed[appsv1.Deployment](t, find(t, v.render(t, r), "Deployment", "serverless-ctrl-mngr"))
			pod := d.Spec.Template.Spec
			require.Len(t, pod.Containers, 1)
			c := pod.Containers[0]
			assert.Equal(t, tt.wantImage, c.Image)
			assert.Equal(t, []string{"/" + id.Binary}, c.Command, "the image's entrypoint")
			assert.Empty(t, c.Args)
			assert.Equal(t, id.ServiceAccount, pod.ServiceAccountName)
			require.NotNil(t, pod.SecurityContext)
			assert.Equal(t, int64(65532), *pod.SecurityContext.RunAsUser, "the image's user")
			assert.Equal(t, int64(65532), *pod.SecurityContext.RunAsGroup)
			assert.True(t, *pod.SecurityContext.RunAsNonRoot)
			assert.True(t, *c.SecurityContext.ReadOnlyRootFilesystem)

			env := map[string]string{}
			for _, e := range c.Env {
				env[e.Name] = e.Value
			}
			ports := map[string]int32{}
			for _, p := range c.Ports {
				ports[p.Name] = p.ContainerPort
			}
			assert.Equal(t, map[string]int32{"http-metrics": int32(id.MetricsPort), "health": int32(id.HealthPort)}, ports)
			assert.Equal(t, ":8080", env["APP_METRICS_ADDRESS"])
			assert.Equal(t, ":8090", env["APP_HEALTHZ_ADDRESS"])
			assert.Equal(t, "/appconfig/log-config.yaml", env["APP_LOG_CONFIG_PATH"])
			assert.Equal(t, "kyma-system", env["APP_KUBERNETES_BASE_NAMESPACE"])
			// The selector cannot change on an installed Deployment: it is
			// serverless-operator 1.x's, so its Deployment is taken over in
			// place, and the Pods also carry the selector of this chart's
			// earlier installs, whose Deployments keep theirs.
			assert.Equal(t, map[string]string{
				"app": "serverless", "app.kubernetes.io/name": "serverless", "app.kubernetes.io/instance": "serverless",
			}, d.Spec.Selector.MatchLabels)
			for k, v := range map[string]string{"app.kubernetes.io/name": "serverless", "app.kubernetes.io/component": "controller", "app.kubernetes.io/instance": "serverless"} {
				assert.Equal(t, v, d.Spec.Template.Labels[k], "earlier selector label %s", k)
			}
		})
	}
}

// The ClusterRole the chart binds to the controller's ServiceAccount, and
// the leader election Role of several replicas, are the generated ones,
// rule for rule.
func TestChartRolesAreTheGeneratedOnes(t *testing.T) {
	generated, err := manifest.ReadFile(filepath.Join(repo.MustRoot(), roleFile))
	require.NoError(t, err)
	var wantCluster *rbacv1.ClusterRole
	var wantLeader *rbacv1.Role
	for _, o := range generated {
		switch o.GetKind() {
		case "ClusterRole":
			wantCluster = typed[rbacv1.ClusterRole](t, o)
		case "Role":
			wantLeader = typed[rbacv1.Role](t, o)
		}
	}
	require.NotNil(t, wantCluster, "a ClusterRole in %s", roleFile)
	require.NotNil(t, wantLeader, "a Role (leader election) in %s", roleFile)
	require.NotEmpty(t, wantCluster.Rules)

	r := renderer(t)
	for _, v := range variants() {
		t.Run(v.name, func(t *testing.T) {
			objs := v.render(t, r)
			role := typed[rbacv1.ClusterRole](t, find(t, objs, "ClusterRole", "serverless"))
			assert.Equal(t, wantCluster.Rules, role.Rules)
			binding := typed[rbacv1.ClusterRoleBinding](t, find(t, objs, "ClusterRoleBinding", "serverless"))
			assert.Equal(t, "serverless", binding.RoleRef.Name)
			require.Len(t, binding.Subjects, 1)
			assert.Equal(t, module.FunctionController().ServiceAccount, binding.Subjects[0].Name)
			leader := typed[rbacv1.Role](t, find(t, objs, "Role", "serverless-leader-election"))
			assert.Equal(t, wantLeader.Rules, leader.Rules)
		})
	}
}
