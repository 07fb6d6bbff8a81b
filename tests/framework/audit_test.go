package framework

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/kyma-project/serverless-manager/operator/pkg/module"
	"github.com/kyma-project/serverless-manager/tests/support/repo"
)

func auditLine(id, stage, user, verb, name string) string {
	return `{"kind":"Event","level":"Metadata","auditID":"` + id + `","stage":"` + stage + `","verb":"` + verb +
		`","user":{"username":"` + user + `","groups":["system:serviceaccounts"]},"objectRef":{"resource":"configmaps","namespace":"kyma-system","name":"` + name + `"}}` + "\n"
}

func TestAuditUser(t *testing.T) {
	assert.Equal(t, "system:serviceaccount:kyma-system:serverless-manager", AuditUser(module.Manager()))
	assert.Equal(t, "system:serviceaccount:kyma-system:serverless-controller-manager", AuditUser(module.FunctionController()))
}

func TestCountAudit(t *testing.T) {
	manager, controller := AuditUser(module.Manager()), AuditUser(module.FunctionController())
	c := &Cluster{root: t.TempDir()}
	require.NoError(t, os.MkdirAll(filepath.Dir(c.AuditLogPath()), 0o755))
	_, err := c.CountAudit(0, manager)
	require.Error(t, err, "no audit log is a broken cluster, not zero requests")

	before := auditLine("0", "ResponseComplete", manager, "delete", "old")
	require.NoError(t, os.WriteFile(c.AuditLogPath(), []byte(before), 0o644))
	mark, err := c.MarkAudit()
	require.NoError(t, err)
	require.Equal(t, AuditMark(len(before)), mark)

	log := before + strings.Join([]string{
		auditLine("1", "ResponseComplete", manager, "get", "a"),
		auditLine("2", "ResponseStarted", manager, "watch", ""),
		auditLine("2", "ResponseComplete", manager, "watch", ""), // same request, second stage
		auditLine("3", "ResponseComplete", manager, "patch", "a"),
		auditLine("4", "ResponseComplete", controller, "create", "b"),
		auditLine("5", "ResponseComplete", "admin", "list", ""),
	}, "") + `{"kind":"Event","auditID":"6","user":{"usern` // still being written
	require.NoError(t, os.WriteFile(c.AuditLogPath(), []byte(log), 0o644))

	for _, tc := range []struct {
		name  string
		users []string
		want  AuditCounts
	}{
		{"one user", []string{manager}, AuditCounts{manager: {"get": 1, "watch": 1, "patch": 1}}},
		{"both binaries", []string{manager, controller}, AuditCounts{
			manager:    {"get": 1, "watch": 1, "patch": 1},
			controller: {"create": 1},
		}},
		{"a user without requests", []string{"system:serviceaccount:kyma-system:nobody"}, AuditCounts{
			"system:serviceaccount:kyma-system:nobody": {},
		}},
		{"every user", nil, AuditCounts{
			manager:    {"get": 1, "watch": 1, "patch": 1},
			controller: {"create": 1},
			"admin":    {"list": 1},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := c.CountAudit(mark, tc.users...)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}

	counts, err := c.CountAudit(0, manager)
	require.NoError(t, err)
	assert.Equal(t, 1, counts[manager]["delete"], "from the start, the request before the mark counts")
	assert.Equal(t, 2, counts[manager].Reads())
	assert.Equal(t, 2, counts[manager].Writes())
	assert.Equal(t, "delete=1 get=1 patch=1 watch=1", counts[manager].String())

	events, err := c.ReadAudit(mark)
	require.NoError(t, err)
	require.Len(t, events, 6, "one event per complete line, stages included")
	assert.Equal(t, "Metadata", events[0].Level)
	assert.Equal(t, "ResponseStarted", events[1].Stage)
	assert.Equal(t, "a", events[0].ObjectRef.Name)
	assert.Equal(t, "configmaps", events[0].ObjectRef.Resource)
	assert.Equal(t, "kyma-system", events[0].ObjectRef.Namespace)
	assert.Equal(t, controller, events[4].User.Username)
}

// The local cluster audits the ServiceAccount of every binary of the module
// that talks to the API server (module.APIClients())
// and nothing else. Decoded strictly: a field this test does not know (say a
// rule narrowed to some resources) fails it.
func TestAuditPolicyRecordsEveryModuleBinary(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repo.MustRoot(), "hack", "cluster", "audit-policy.yaml"))
	require.NoError(t, err)
	type rule struct {
		Level string   `json:"level"`
		Users []string `json:"users"`
	}
	var policy struct {
		APIVersion string   `json:"apiVersion"`
		Kind       string   `json:"kind"`
		OmitStages []string `json:"omitStages"`
		Rules      []rule   `json:"rules"`
	}
	require.NoError(t, yaml.UnmarshalStrict(data, &policy))

	var want []string
	for _, id := range module.APIClients() {
		want = append(want, AuditUser(id))
	}
	assert.Equal(t, "audit.k8s.io/v1", policy.APIVersion)
	assert.Equal(t, "Policy", policy.Kind)
	assert.Equal(t, []string{"RequestReceived"}, policy.OmitStages, "one event per request (watches: two)")
	require.Len(t, policy.Rules, 2)
	assert.Equal(t, "Metadata", policy.Rules[0].Level)
	assert.ElementsMatch(t, want, policy.Rules[0].Users)
	assert.Equal(t, rule{Level: "None"}, policy.Rules[1], "everyone else: nothing")
}
