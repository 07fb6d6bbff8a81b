package main

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/kyma-project/serverless-manager/charts"
	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/render"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/scope/namespaced"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/values"
	"github.com/kyma-project/serverless-manager/operator/pkg/kinds"
	"github.com/kyma-project/serverless-manager/operator/pkg/manifest"
	"github.com/kyma-project/serverless-manager/tests/support/repo"
)

const moduleNamespace = "kyma-system"

// managerRBAC reads the generated config/rbac: the manager's ClusterRole
// (role.yaml) and its namespaced ClusterRole (role_namespaced.yaml), bound
// per module namespace.
func managerRBAC(t *testing.T) (*rbacv1.ClusterRole, *rbacv1.ClusterRole) {
	t.Helper()
	read := func(file string) *rbacv1.ClusterRole {
		objs, err := manifest.ReadFile(filepath.Join(repo.MustRoot(), "config", "rbac", file))
		require.NoError(t, err)
		require.Len(t, objs, 1, file)
		require.Equal(t, "ClusterRole", objs[0].GetKind(), file)
		cr := &rbacv1.ClusterRole{}
		require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(objs[0].Object, cr))
		return cr
	}
	cr, namespacedRole := read("role.yaml"), read("role_namespaced.yaml")
	require.Equal(t, namespaced.ClusterRole, namespacedRole.Name)
	return cr, namespacedRole
}

// rendered is every object the manager renders for the specs it is given
// most: defaults, the internal registry, NetworkPolicies.
func rendered(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	chrt, err := render.LoadChart(charts.Serverless())
	require.NoError(t, err)
	r := render.New(chrt, nil)
	specs := []v1alpha1.ServerlessSpec{
		{},
		{DockerRegistry: &v1alpha1.DockerRegistry{EnableInternal: ptr.To(true)}, EnableNetworkPolicies: true},
	}
	var out []*unstructured.Unstructured
	for _, spec := range specs {
		built, err := values.Build(spec, values.Facts{Namespace: moduleNamespace, Nodes: 3, NodePort: 32137,
			NewSecret: func(n int) string { return strings.Repeat("x", n) }})
		require.NoError(t, err)
		vals, err := built.Values.Map()
		require.NoError(t, err)
		objs, err := r.Render(moduleNamespace, vals)
		require.NoError(t, err)
		out = append(out, objs...)
	}
	return out
}

// allows tells whether one of rules grants verb on group/resource, for the
// object name (empty: any name, e.g. list or create).
func allows(rules []rbacv1.PolicyRule, group, resource, verb, name string) bool {
	for _, r := range rules {
		if slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource) && slices.Contains(r.Verbs, verb) &&
			(len(r.ResourceNames) == 0 || (name != "" && slices.Contains(r.ResourceNames, name))) {
			return true
		}
	}
	return false
}

func TestManagerRBACIsNamespacedWherePossible(t *testing.T) {
	cr, role := managerRBAC(t)
	// config/rbac binds the namespaced ClusterRole in the manager's own
	// namespace only; elsewhere the manager binds it (scope.Binder).
	objs, err := manifest.ReadFile(filepath.Join(repo.MustRoot(), "config", "rbac", "role_binding.yaml"))
	require.NoError(t, err)
	bound := 0
	for _, o := range objs {
		if o.GetKind() == "RoleBinding" {
			rb := &rbacv1.RoleBinding{}
			require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, rb))
			assert.Equal(t, moduleNamespace, rb.Namespace)
			assert.Equal(t, rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: namespaced.ClusterRole}, rb.RoleRef)
			bound++
		}
	}
	assert.Equal(t, 1, bound, "one RoleBinding of the namespaced ClusterRole")
	tests := []struct {
		group, resource string
		verbs           []string
	}{
		{"coordination.k8s.io", "leases", []string{"get", "create", "update"}},
		{"", "persistentvolumeclaims", []string{"get", "list", "watch", "create", "patch", "delete"}},
		{"networking.k8s.io", "networkpolicies", []string{"get", "list", "watch", "create", "patch", "delete"}},
		{"rbac.authorization.k8s.io", "roles", []string{"get", "list", "watch", "create", "patch", "delete"}},
		{"rbac.authorization.k8s.io", "rolebindings", []string{"get", "list", "watch", "create", "patch", "delete"}},
		// Server-side apply of the module's objects: patch in the namespace only.
		{"", "secrets", []string{"patch"}},
		{"", "configmaps", []string{"patch"}},
		{"", "services", []string{"patch"}},
		{"", "serviceaccounts", []string{"patch"}},
		{"apps", "deployments", []string{"patch"}},
	}
	for _, tt := range tests {
		t.Run(tt.resource, func(t *testing.T) {
			for _, verb := range tt.verbs {
				// Creating RoleBindings anywhere is how the manager binds its
				// namespaced role in the served CR's namespace (the create verb
				// cannot be limited by name).
				if tt.resource != "rolebindings" || verb != "create" {
					assert.False(t, allows(cr.Rules, tt.group, tt.resource, verb, "x"), "%s %s cluster-wide", verb, tt.resource)
				}
				assert.True(t, allows(role.Rules, tt.group, tt.resource, verb, "x"), "%s %s in the module namespace", verb, tt.resource)
			}
		})
	}
}

// Cluster-scoped objects are read, changed and deleted by name: the chart's.
func TestClusterScopedRulesNameTheChartsObjects(t *testing.T) {
	cr, _ := managerRBAC(t)
	clusterScoped := map[string]bool{}
	for _, k := range kinds.Managed() {
		if !k.Namespaced {
			plural, _ := meta.UnsafeGuessKindToResource(k.GVK)
			clusterScoped[k.GVK.Group+"/"+plural.Resource] = true
		}
	}
	for _, r := range cr.Rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				if !clusterScoped[g+"/"+res] {
					continue
				}
				for _, v := range r.Verbs {
					if v != "list" && v != "watch" && v != "create" {
						assert.NotEmpty(t, r.ResourceNames, "%s on %s without resourceNames", v, res)
					}
				}
			}
		}
	}
	seen := 0
	for _, o := range rendered(t) {
		gvk := o.GroupVersionKind()
		plural, _ := meta.UnsafeGuessKindToResource(gvk)
		if !clusterScoped[gvk.Group+"/"+plural.Resource] {
			continue
		}
		seen++
		for _, verb := range []string{"get", "patch", "delete", "create", "list", "watch"} {
			assert.True(t, allows(cr.Rules, gvk.Group, plural.Resource, verb, o.GetName()), "%s %s %s", verb, gvk.Kind, o.GetName())
		}
	}
	assert.Positive(t, seen)
}

// Kubernetes lets the manager create a ClusterRole or Role only with the
// permissions in it, or with escalate on it: the manager holds each rule the
// chart grants, cluster-wide for ClusterRoles, in the module namespace for
// Roles, except in the ClusterRoles it may escalate by name.
func TestManagerHoldsWhatTheChartGrants(t *testing.T) {
	cr, role := managerRBAC(t)
	grants, escalated := 0, map[string]bool{}
	for _, o := range rendered(t) {
		var rules []rbacv1.PolicyRule
		holder := cr.Rules
		switch o.GetKind() {
		case "ClusterRole":
			if allows(cr.Rules, "rbac.authorization.k8s.io", "clusterroles", "escalate", o.GetName()) {
				escalated[o.GetName()] = true
				continue
			}
			c := &rbacv1.ClusterRole{}
			require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, c))
			rules = c.Rules
		case "Role":
			r := &rbacv1.Role{}
			require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, r))
			require.Equal(t, moduleNamespace, r.Namespace)
			rules = r.Rules
			holder = append(slices.Clone(cr.Rules), role.Rules...)
		default:
			continue
		}
		for _, r := range rules {
			names := r.ResourceNames
			if len(names) == 0 {
				names = []string{""}
			}
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					for _, v := range r.Verbs {
						for _, n := range names {
							grants++
							assert.True(t, allows(holder, g, res, v, n), "%s %s grants %s on %s/%s: the manager must hold it", o.GetKind(), o.GetName(), v, g, res)
						}
					}
				}
			}
		}
	}
	assert.Positive(t, grants)
	assert.Len(t, escalated, 2, "kyma-functions-edit and kyma-functions-view")
}

// escalate lets its holder grant anything in the role it may change: only
// on named ClusterRoles whose rules are no more than the Function API, the
// user roles of the chart.
func TestManagerEscalatesOnlyTheUserRoles(t *testing.T) {
	cr, role := managerRBAC(t)
	for _, r := range role.Rules {
		assert.NotContains(t, r.Verbs, "escalate", "no escalate in the module namespace")
	}
	var names []string
	for _, r := range cr.Rules {
		if !slices.Contains(r.Verbs, "escalate") {
			continue
		}
		require.NotEmpty(t, r.ResourceNames, "escalate without resourceNames")
		assert.Equal(t, []string{"clusterroles"}, r.Resources)
		names = append(names, r.ResourceNames...)
	}
	assert.ElementsMatch(t, []string{"kyma-functions-edit", "kyma-functions-view"}, names)
	// What escalate spares the manager: writing users' Functions.
	for _, verb := range []string{"create", "update", "patch", "delete"} {
		assert.False(t, allows(cr.Rules, "serverless.kyma-project.io", "functions", verb, "x"), "the manager holds %s on functions", verb)
	}
	seen := map[string]bool{}
	for _, o := range rendered(t) {
		if o.GetKind() != "ClusterRole" || !slices.Contains(names, o.GetName()) {
			continue
		}
		seen[o.GetName()] = true
		c := &rbacv1.ClusterRole{}
		require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, c))
		for _, r := range c.Rules {
			assert.Equal(t, []string{"serverless.kyma-project.io"}, r.APIGroups, "%s grants only the Function API", c.Name)
			for _, res := range r.Resources {
				assert.True(t, res == "functions" || strings.HasPrefix(res, "functions/"), "%s grants %s", c.Name, res)
			}
		}
	}
	assert.Len(t, seen, len(names), "every escalated name is a ClusterRole the chart renders")
}

// The manager grants itself its namespaced ClusterRole in the served CR's
// namespace: it may create RoleBindings (create cannot be limited by name),
// read, release (finalizer) and delete only its own, and bind no other role.
func TestManagerBindsOnlyItsNamespacedRole(t *testing.T) {
	cr, _ := managerRBAC(t)
	assert.True(t, allows(cr.Rules, "rbac.authorization.k8s.io", "rolebindings", "create", ""))
	for _, verb := range []string{"get", "patch", "delete"} {
		assert.True(t, allows(cr.Rules, "rbac.authorization.k8s.io", "rolebindings", verb, namespaced.ClusterRole), verb)
		assert.False(t, allows(cr.Rules, "rbac.authorization.k8s.io", "rolebindings", verb, "other"), verb)
	}
	for _, verb := range []string{"patch", "update", "list", "watch"} {
		assert.False(t, allows(cr.Rules, "rbac.authorization.k8s.io", "rolebindings", verb, "x"), "%s rolebindings cluster-wide", verb)
	}
	assert.True(t, allows(cr.Rules, "rbac.authorization.k8s.io", "clusterroles", "bind", namespaced.ClusterRole))
	for _, r := range cr.Rules {
		if slices.Contains(r.Verbs, "bind") || slices.Contains(r.Verbs, "*") {
			assert.Equal(t, []string{namespaced.ClusterRole}, r.ResourceNames, "bind only on the namespaced ClusterRole")
		}
	}
}
