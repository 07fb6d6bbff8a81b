package render_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/tests/support/testenv"
)

// Users get Functions through the built-in roles: edit may change them and
// scale them, view may only read.
func TestFunctionUserRolesAggregateIntoBuiltInRoles(t *testing.T) {
	objs := variants()[0].render(t, renderer(t))
	tests := []struct {
		name, aggregateTo string
		verbs, notVerbs   []string
	}{
		{"kyma-functions-edit", "edit", []string{"get", "list", "watch", "create", "update", "patch", "delete"}, nil},
		{"kyma-functions-view", "view", []string{"get", "list", "watch"}, []string{"create", "update", "patch", "delete"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			role := typed[rbacv1.ClusterRole](t, find(t, objs, "ClusterRole", tt.name))
			assert.Equal(t, "true", role.Labels["rbac.authorization.k8s.io/aggregate-to-"+tt.aggregateTo])
			granted := map[string]map[string]bool{}
			for _, r := range role.Rules {
				require.Equal(t, []string{"serverless.kyma-project.io"}, r.APIGroups)
				for _, res := range r.Resources {
					if granted[res] == nil {
						granted[res] = map[string]bool{}
					}
					for _, v := range r.Verbs {
						granted[res][v] = true
					}
				}
			}
			for _, v := range tt.verbs {
				assert.True(t, granted["functions"][v], "%s grants %s on functions", tt.name, v)
			}
			for _, v := range tt.notVerbs {
				assert.False(t, granted["functions"][v], "%s must not grant %s on functions", tt.name, v)
				assert.False(t, granted["functions/scale"][v], "%s must not grant %s on functions/scale", tt.name, v)
			}
			assert.True(t, granted["functions/status"]["get"])
			assert.True(t, granted["functions/scale"]["get"])
		})
	}
}

// dataOf returns a ConfigMap's data entry parsed as YAML.
func dataOf(t *testing.T, cm *unstructured.Unstructured, key string) any {
	t.Helper()
	raw, ok, err := unstructured.NestedString(cm.Object, "data", key)
	require.NoError(t, err)
	require.True(t, ok, "%s has data.%s", cm.GetName(), key)
	var out any
	require.NoError(t, yaml.Unmarshal([]byte(raw), &out), "data.%s is YAML", key)
	return out
}

// The dashboard extension has a create form, presets and a status; every
// preset is a Function the API server accepts.
func TestDashboardExtensionForFunctions(t *testing.T) {
	objs := variants()[0].render(t, renderer(t))
	cm := find(t, objs, "ConfigMap", "functions")
	assert.Equal(t, "resource", cm.GetLabels()["busola.io/extension"])
	for _, key := range []string{"general", "list", "details", "form", "presets"} {
		assert.NotEmpty(t, dataOf(t, cm, key), key)
	}
	hasStatus := func(items any) bool {
		for _, it := range items.([]any) {
			if m := it.(map[string]any); m["name"] == "Status" && m["widget"] == "Badge" {
				return true
			}
		}
		return false
	}
	assert.True(t, hasStatus(dataOf(t, cm, "list")), "the list shows a status")
	details := dataOf(t, cm, "details").(map[string]any)
	assert.True(t, hasStatus(details["header"]), "the details show a status")
	assert.NotEmpty(t, details["status"], "the details have a status section (conditions)")

	formPaths := map[string]bool{}
	for _, f := range dataOf(t, cm, "form").([]any) {
		if p, ok := f.(map[string]any)["path"].(string); ok {
			formPaths[p] = true
		}
	}
	for _, p := range []string{"spec.runtime", "spec.source.inline.source", "spec.source.gitRepository", "spec.resourceConfiguration.function.profile", "spec.resourceConfiguration.build.profile"} {
		assert.True(t, formPaths[p], "the form edits %s", p)
	}

	env := testenv.Start(t, filepath.Join("charts", "serverless", "crds"))
	c := env.Client
	ctx := context.Background()
	require.NoError(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "presets"}}))
	runtimes := map[string]bool{}
	defaults := 0
	var defaultRuntime any
	for _, p := range dataOf(t, cm, "presets").([]any) {
		preset := p.(map[string]any)
		if preset["default"] == true {
			defaults++
			defaultRuntime, _, _ = unstructured.NestedFieldNoCopy(preset, "value", "spec", "runtime")
		}
		t.Run(preset["name"].(string), func(t *testing.T) {
			fn := &unstructured.Unstructured{Object: preset["value"].(map[string]any)}
			fn.SetAPIVersion(v1alpha2.GroupVersion.String())
			fn.SetKind("Function")
			fn.SetNamespace("presets")
			fn.SetName("preset")
			assert.NoError(t, c.Create(ctx, fn, client.DryRunAll), "the API server accepts the preset")
			rt, _, _ := unstructured.NestedString(fn.Object, "spec", "runtime")
			runtimes[rt] = true
		})
	}
	assert.Equal(t, 1, defaults, "one default preset")
	assert.Equal(t, string(v1alpha2.RuntimeNodejs24), defaultRuntime, "the default preset is Node.js 24, release 1.13's `kyma function create` default")
	create, err := cliExtension(t).Command("create")
	require.NoError(t, err)
	runtimeFlag, ok := create.Flag("runtime")
	require.True(t, ok)
	require.NotNil(t, runtimeFlag.Default)
	assert.Equal(t, *runtimeFlag.Default, defaultRuntime, "the dashboard's default runtime is `kyma function create`'s")
	for _, rt := range v1alpha2.Runtimes() {
		assert.True(t, runtimes[string(rt)], "a preset for %s", rt)
	}
}

// The kyma CLI finds the Function commands by the ConfigMap's labels; its
// commands create Functions of the runtimes the controller serves.
func TestCLIExtensionForFunctions(t *testing.T) {
	objs := variants()[0].render(t, renderer(t))
	cm := find(t, objs, "ConfigMap", "serverless.function.cli")
	assert.Equal(t, "commands", cm.GetLabels()["kyma-cli/extension"])
	assert.Equal(t, "v1", cm.GetLabels()["kyma-cli/extension-version"])
	root := dataOf(t, cm, "kyma-commands.yaml").(map[string]any)
	assert.Equal(t, "function", root["metadata"].(map[string]any)["name"])
	uses := map[string]map[string]any{}
	for _, sc := range root["subCommands"].([]any) {
		m := sc.(map[string]any)
		uses[m["uses"].(string)] = m
	}
	for _, u := range []string{"resource_get", "resource_create", "resource_delete", "resource_explain", "function_init"} {
		assert.Contains(t, uses, u)
	}
	res := uses["resource_create"]["with"].(map[string]any)["resource"].(map[string]any)
	assert.Equal(t, v1alpha2.GroupVersion.String(), res["apiVersion"])
	assert.Equal(t, "Function", res["kind"])
	var runtimeDefault string
	for _, f := range uses["resource_create"]["flags"].([]any) {
		if m := f.(map[string]any); m["name"] == "runtime" {
			runtimeDefault = m["default"].(string)
		}
	}
	assert.Contains(t, v1alpha2.Runtimes(), v1alpha2.Runtime(runtimeDefault))
	initRuntimes := uses["function_init"]["with"].(map[string]any)["runtimes"].(map[string]any)
	for _, rt := range v1alpha2.Runtimes() {
		assert.Contains(t, initRuntimes, string(rt), "init writes files for every runtime")
	}
}
