package reconciler

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
)

// refusedMessage is what the Installed and DeploymentFailure conditions say
// about withReplicaFailure's Deployment.
const refusedMessage = `replica failure: Deployment kyma-system/ctrl: FailedCreate: pods "ctrl-7c9d-abcde" is forbidden: ` +
	`exceeded quota: no-pods, requested: pods=1, used: pods=0, limited: pods=0`

// withReplicaFailure adds the ReplicaFailure condition the Deployment
// controller copies from a ReplicaSet whose Pod a ResourceQuota refused.
func withReplicaFailure(d *unstructured.Unstructured) *unstructured.Unstructured {
	conds, _, _ := unstructured.NestedSlice(d.Object, "status", "conditions")
	conds = append(conds, map[string]any{"type": "ReplicaFailure", "status": "True", "reason": "FailedCreate",
		"message": `pods "ctrl-7c9d-abcde" is forbidden: exceeded quota: no-pods, requested: pods=1, used: pods=0, limited: pods=0`})
	_ = unstructured.SetNestedSlice(d.Object, conds, "status", "conditions")
	return d
}

// A Deployment that cannot create its Pods is an error at once (not after
// the rollout timeout), named with Kubernetes' reason, also in upstream's
// DeploymentFailure condition, which goes once the Pods can be created.
func TestStepVerifyReportsReplicaFailuresAtOnce(t *testing.T) {
	tests := []struct {
		name string
		live *unstructured.Unstructured
		// failingBefore: the previous reconcile reported the replica failure.
		failingBefore   bool
		wantState       v1alpha1.State
		wantReason      string
		wantMessage     string
		wantFailureCond bool
	}{
		{name: "quota refuses the Pods of a fresh install", live: withReplicaFailure(deployment("ctrl", 2, 2, false, "ReplicaSetUpdated")),
			wantState: v1alpha1.StateError, wantReason: v1alpha1.ReasonDeploymentReplicaFailure,
			wantMessage: refusedMessage, wantFailureCond: true},
		{name: "still refused", live: withReplicaFailure(deployment("ctrl", 2, 2, false, "ReplicaSetUpdated")), failingBefore: true,
			wantState: v1alpha1.StateError, wantReason: v1alpha1.ReasonDeploymentReplicaFailure, wantMessage: refusedMessage, wantFailureCond: true},
		{name: "refused for the previous generation: wait for the controller", live: withReplicaFailure(deployment("ctrl", 2, 1, false, "ReplicaSetUpdated")),
			failingBefore: true, wantState: v1alpha1.StateProcessing, wantReason: v1alpha1.ReasonInstalling, wantMessage: "waiting for Deployment kyma-system/ctrl"},
		{name: "quota lifted, Pod starting", live: deployment("ctrl", 2, 2, false, "ReplicaSetUpdated"), failingBefore: true,
			wantState: v1alpha1.StateProcessing, wantReason: v1alpha1.ReasonInstalling, wantMessage: "waiting for Deployment kyma-system/ctrl"},
		{name: "quota lifted, rolled out", live: deployment("ctrl", 2, 2, true, "NewReplicaSetAvailable"), failingBefore: true,
			wantState: v1alpha1.StateReady, wantReason: v1alpha1.ReasonInstalled, wantMessage: "installed and ready"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, events := newTestReconciler(fakeLive{"Deployment/ctrl": tt.live}, &fakeRenderer{}, &fakeApplier{})
			s := newTestState(3)
			s.cr.Status.ChartVersion = "1.2.3"
			s.applied = []*unstructured.Unstructured{deployment("ctrl", 2, 0, false, "")}
			s.setCondition(v1alpha1.ConditionInstalled, metav1.ConditionFalse, v1alpha1.ReasonInstalling, "applying")
			if tt.failingBefore {
				s.setCondition(v1alpha1.ConditionDeploymentFailure, metav1.ConditionTrue, v1alpha1.ReasonDeploymentReplicaFailure, refusedMessage)
				s.setCondition(v1alpha1.ConditionInstalled, metav1.ConditionFalse, v1alpha1.ReasonDeploymentReplicaFailure, refusedMessage)
				s.before = s.cr.Status.DeepCopy()
			}

			_, res, err := runStep(context.Background(), s, r.stepVerify)
			assert.Equal(t, tt.wantState, s.cr.Status.State)
			installed := meta.FindStatusCondition(s.cr.Status.Conditions, v1alpha1.ConditionInstalled)
			require.NotNil(t, installed)
			assert.Equal(t, tt.wantReason, v1alpha1.Cause(*installed))
			assert.Equal(t, v1alpha1.UpstreamReason(v1alpha1.ConditionInstalled, metav1.ConditionFalse, tt.wantReason), installed.Reason)
			if tt.wantFailureCond {
				assert.Equal(t, tt.wantReason+": "+tt.wantMessage, installed.Message)
			} else {
				assert.Contains(t, installed.Message, tt.wantMessage)
			}
			failure := meta.FindStatusCondition(s.cr.Status.Conditions, v1alpha1.ConditionDeploymentFailure)
			if !tt.wantFailureCond {
				assert.Nil(t, failure, "DeploymentFailure goes once the Pods can be created")
				return
			}
			require.NotNil(t, failure)
			assert.Equal(t, metav1.ConditionTrue, failure.Status)
			assert.Equal(t, v1alpha1.ReasonDeploymentReplicaFailure, failure.Reason)
			assert.Equal(t, tt.wantMessage, failure.Message, "upstream's own condition keeps its reason and message")
			assert.NoError(t, err, "no backoff retry: the Deployment's status changes bring the next reconcile")
			assert.Zero(t, res.RequeueAfter, "no rollout-timeout requeue")
			if tt.failingBefore {
				assert.Zero(t, events.n, "the same failure again is no new event")
			} else {
				assert.Equal(t, 1, events.n, "one Warning event")
			}
		})
	}
}
