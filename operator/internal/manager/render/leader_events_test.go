package render_test

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/kyma-project/serverless-manager/operator/pkg/module"
)

// grants tells whether one of rules allows verb on group/resource for any
// object name.
func grants(rules []rbacv1.PolicyRule, group, resource, verb string) bool {
	return slices.ContainsFunc(rules, func(r rbacv1.PolicyRule) bool {
		return slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource) &&
			(slices.Contains(r.Verbs, verb) || slices.Contains(r.Verbs, rbacv1.VerbAll)) && len(r.ResourceNames) == 0
	})
}

// The binaries that elect a leader may record its events: controller-runtime's
// leader election writes core Events on the Lease (not events.k8s.io ones,
// which their own events are), in the Lease's namespace. Their Role there
// grants it; their ClusterRole does not, so they write core Events nowhere
// else.
func TestLeaderElectionMayRecordItsEvents(t *testing.T) {
	r := renderer(t)
	for _, v := range variants() {
		t.Run(v.name, func(t *testing.T) {
			objs := v.render(t, r)
			for _, tc := range []struct{ binary, role, clusterRole string }{
				{binary: "function controller", role: "serverless-leader-election", clusterRole: "serverless"},
				{binary: "activator", role: module.Activator().ServiceAccount, clusterRole: module.Activator().ServiceAccount},
			} {
				role := typed[rbacv1.Role](t, find(t, objs, "Role", tc.role))
				assert.Equal(t, "kyma-system", role.Namespace, tc.binary)
				cluster := typed[rbacv1.ClusterRole](t, find(t, objs, "ClusterRole", tc.clusterRole))
				for _, verb := range []string{"create", "patch"} {
					assert.True(t, grants(role.Rules, "", "events", verb), "%s: %s core events in its Lease's namespace", tc.binary, verb)
					assert.False(t, grants(cluster.Rules, "", "events", verb), "%s: %s core events cluster-wide", tc.binary, verb)
					assert.True(t, grants(cluster.Rules, "events.k8s.io", "events", verb), "%s: its own events", tc.binary)
				}
			}
		})
	}
}
