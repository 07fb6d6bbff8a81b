package readiness

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

type fakeGetter map[string]*unstructured.Unstructured

func (f fakeGetter) Object(_ context.Context, _ schema.GroupVersionKind, key types.NamespacedName) (*unstructured.Unstructured, error) {
	return f[key.Name], nil
}

func deployment(name string, generation, observed, available int64, conditions ...map[string]any) *unstructured.Unstructured {
	conds := make([]any, 0, len(conditions))
	for _, c := range conditions {
		conds = append(conds, c)
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": name, "namespace": "ns", "generation": generation},
		"spec":     map[string]any{"replicas": int64(1)},
		"status": map[string]any{
			"observedGeneration": observed, "replicas": int64(1), "updatedReplicas": available,
			"readyReplicas": available, "availableReplicas": available, "conditions": conds,
		},
	}}
}

var (
	available   = map[string]any{"type": "Available", "status": "True"}
	progressed  = map[string]any{"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"}
	deadlineHit = map[string]any{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded", "message": "ReplicaSet has timed out progressing"}
	updating    = map[string]any{"type": "Progressing", "status": "True", "reason": "ReplicaSetUpdated"}
	// As the Deployment controller copies it from a ReplicaSet whose Pod a ResourceQuota refused.
	quotaRefused = map[string]any{"type": "ReplicaFailure", "status": "True", "reason": "FailedCreate",
		"message": `pods "d-5d9f7c-x2k4q" is forbidden: exceeded quota: no-pods, requested: pods=1, used: pods=0, limited: pods=0`}
	replicaFailureGone = map[string]any{"type": "ReplicaFailure", "status": "False", "reason": "FailedCreate"}
)

func allHaveStatus(schema.GroupVersionKind) bool { return true }

func TestCheck(t *testing.T) {
	tests := []struct {
		name        string
		live        fakeGetter
		applied     *unstructured.Unstructured
		wantReady   bool
		wantSummary string
	}{
		{"rolled out", fakeGetter{"d": deployment("d", 2, 2, 1, available, progressed)}, nil, true, "all objects are ready"},
		{"missing", fakeGetter{}, nil, false, "waiting for Deployment ns/d"},
		{"old generation observed", fakeGetter{"d": deployment("d", 3, 2, 1, available, progressed)}, nil, false, "waiting for Deployment ns/d"},
		{"no replica available", fakeGetter{"d": deployment("d", 1, 1, 0, progressed)}, nil, false, "waiting for Deployment ns/d"},
		{"deadline exceeded", fakeGetter{"d": deployment("d", 1, 1, 0, deadlineHit)}, nil, false, "rollout failed: Deployment ns/d: Progress deadline exceeded"},
		{"cache behind the apply", fakeGetter{"d": deployment("d", 2, 2, 1, available, progressed)}, deployment("d", 3, 2, 1, available, progressed), false, "waiting for Deployment ns/d"},
		{"quota refuses the Pods", fakeGetter{"d": deployment("d", 1, 1, 0, updating, quotaRefused)}, nil, false,
			`replica failure: Deployment ns/d: FailedCreate: pods "d-5d9f7c-x2k4q" is forbidden: exceeded quota: no-pods`},
		{"quota refuses the Pods of a new template", fakeGetter{"d": deployment("d", 4, 4, 0, available, updating, quotaRefused)}, nil, false,
			"replica failure: Deployment ns/d: FailedCreate: "},
		{"replica failure wins over the deadline", fakeGetter{"d": deployment("d", 1, 1, 0, deadlineHit, quotaRefused)}, nil, false,
			"replica failure: Deployment ns/d: FailedCreate: "},
		{"replica failure of the previous generation", fakeGetter{"d": deployment("d", 3, 2, 0, updating, quotaRefused)}, nil, false, "waiting for Deployment ns/d"},
		{"replica failure resolved", fakeGetter{"d": deployment("d", 1, 1, 0, updating, replicaFailureGone)}, nil, false, "waiting for Deployment ns/d"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := tt.applied
			if obj == nil {
				obj = &unstructured.Unstructured{}
				obj.SetAPIVersion("apps/v1")
				obj.SetKind("Deployment")
				obj.SetNamespace("ns")
				obj.SetName("d")
			}
			rep, err := Check(context.Background(), tt.live, []*unstructured.Unstructured{obj}, allHaveStatus)
			require.NoError(t, err)
			assert.Equal(t, tt.wantReady, rep.Ready())
			assert.Contains(t, rep.Summary(), tt.wantSummary)
			if !tt.wantReady && len(rep.Failed) == 0 && len(rep.ReplicaFailures) == 0 {
				assert.NotContains(t, rep.Summary(), ":", "no rollout stage details in the condition")
				assert.Len(t, rep.Details, 1)
			}
		})
	}
}

func TestCheckSkipsKindsWithoutStatus(t *testing.T) {
	cm := &unstructured.Unstructured{}
	cm.SetAPIVersion("v1")
	cm.SetKind("ConfigMap")
	cm.SetName("cm")
	rep, err := Check(context.Background(), fakeGetter{}, []*unstructured.Unstructured{cm}, func(schema.GroupVersionKind) bool { return false })
	require.NoError(t, err)
	assert.True(t, rep.Ready())
}
