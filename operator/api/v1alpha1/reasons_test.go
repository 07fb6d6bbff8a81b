package v1alpha1_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
)

// Every cause the manager sets lands on the reason upstream's operator
// (1.8.4, components/operator/internal/state) sets in the same situation,
// and the cause stays readable from the message.
func TestUpstreamReasons(t *testing.T) {
	var (
		cfg, inst, del = v1alpha1.ConditionConfigured, v1alpha1.ConditionInstalled, v1alpha1.ConditionDeleted
		yes, no, unk   = metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionUnknown
	)
	tests := []struct {
		condType   string
		status     metav1.ConditionStatus
		cause      string
		wantReason string
		wantPrefix bool // the cause leads the message
	}{
		{cfg, yes, v1alpha1.ReasonConfigured, "Configured", false},
		{cfg, yes, v1alpha1.ReasonBothRegistries, "Configured", true},
		{cfg, no, v1alpha1.ReasonServerlessDuplicated, "ServerlessDuplicated", false},
		{cfg, no, v1alpha1.ReasonConfigurationInvalid, "ConfigurationErr", true},
		{cfg, no, v1alpha1.ReasonRegistrySecretError, "ConfigurationErr", true},
		{cfg, no, v1alpha1.ReasonClusterReadFailed, "ConfigurationErr", true},
		{inst, yes, v1alpha1.ReasonInstalled, "Installed", false},
		{inst, no, v1alpha1.ReasonInstalling, "Installation", true},
		{inst, unk, v1alpha1.ReasonInstalling, "Installation", true},
		{inst, no, v1alpha1.ReasonApplyFailed, "InstallationErr", true},
		{inst, no, v1alpha1.ReasonRenderFailed, "InstallationErr", true},
		{inst, no, v1alpha1.ReasonRolloutFailed, "InstallationErr", true},
		{inst, no, v1alpha1.ReasonFinalizerFailed, "InstallationErr", true},
		{inst, no, v1alpha1.ReasonClusterReadFailed, "InstallationErr", true},
		{inst, no, v1alpha1.ReasonDeploymentReplicaFailure, "InstallationErr", true},
		{inst, unk, v1alpha1.ReasonPaused, "Paused", false},
		{del, no, v1alpha1.ReasonDeleting, "Deletion", true},
		{del, unk, v1alpha1.ReasonDeleting, "Deletion", true},
		{del, no, v1alpha1.ReasonFunctionsExist, "DeletionErr", true},
		{del, no, v1alpha1.ReasonDeletionFailed, "DeletionErr", true},
		{del, yes, v1alpha1.ReasonDeleting, "Deleted", false},
		{v1alpha1.ConditionDeploymentFailure, yes, v1alpha1.ReasonDeploymentReplicaFailure, "DeploymentReplicaFailure", false},
	}
	for _, tt := range tests {
		t.Run(tt.condType+"/"+string(tt.status)+"/"+tt.cause, func(t *testing.T) {
			c := v1alpha1.NewCondition(tt.condType, tt.status, tt.cause, "what happened: details", 7)
			assert.Equal(t, tt.wantReason, c.Reason)
			assert.Equal(t, tt.condType, c.Type)
			assert.Equal(t, tt.status, c.Status)
			assert.EqualValues(t, 7, c.ObservedGeneration)
			if tt.wantPrefix {
				assert.Equal(t, tt.cause+": what happened: details", c.Message)
				assert.Equal(t, tt.cause, v1alpha1.Cause(c))
			} else {
				assert.Equal(t, "what happened: details", c.Message)
				assert.Equal(t, tt.wantReason, v1alpha1.Cause(c))
			}
		})
	}
}

// A message that merely contains a colon is no cause.
func TestCauseNeedsAWordMatchingTheReason(t *testing.T) {
	tests := []struct {
		name string
		c    metav1.Condition
		want string
	}{
		{"upstream-written condition", metav1.Condition{Type: v1alpha1.ConditionInstalled, Status: metav1.ConditionFalse,
			Reason: "InstallationErr", Message: "could not render manifest from chart: boom"}, "InstallationErr"},
		{"upstream-written single word", metav1.Condition{Type: v1alpha1.ConditionDeleted, Status: metav1.ConditionFalse,
			Reason: "DeletionErr", Message: "found 2 items with VersionKind serverless.kyma-project.io/v1alpha2: x"}, "DeletionErr"},
		{"cause that maps elsewhere", metav1.Condition{Type: v1alpha1.ConditionInstalled, Status: metav1.ConditionFalse,
			Reason: "InstallationErr", Message: "Installing: x"}, "InstallationErr"},
		{"own cause", metav1.Condition{Type: v1alpha1.ConditionInstalled, Status: metav1.ConditionFalse,
			Reason: "InstallationErr", Message: "ApplyFailed: applying Deployment kyma-system/x: forbidden"}, "ApplyFailed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { assert.Equal(t, tt.want, v1alpha1.Cause(tt.c)) })
	}
}
