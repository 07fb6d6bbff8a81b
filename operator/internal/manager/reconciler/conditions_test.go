package reconciler

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/internal/steps"
)

// A failure's condition carries the reason upstream's operator sets there,
// with the manager's cause in front of the message; the Warning event keeps
// the cause as its reason, so neither tools keyed on upstream's reasons nor
// readers of events lose anything.
func TestFailCarriesUpstreamReasonAndCause(t *testing.T) {
	tests := []struct {
		condType   string
		cause      string
		wantReason string
	}{
		{v1alpha1.ConditionConfigured, v1alpha1.ReasonRegistrySecretError, v1alpha1.ReasonConfigurationErr},
		{v1alpha1.ConditionConfigured, v1alpha1.ReasonConfigurationInvalid, v1alpha1.ReasonConfigurationErr},
		{v1alpha1.ConditionInstalled, v1alpha1.ReasonApplyFailed, v1alpha1.ReasonInstallationErr},
		{v1alpha1.ConditionInstalled, v1alpha1.ReasonRolloutFailed, v1alpha1.ReasonInstallationErr},
		{v1alpha1.ConditionDeleted, v1alpha1.ReasonDeletionFailed, v1alpha1.ReasonDeletionErr},
	}
	for _, tt := range tests {
		t.Run(tt.cause, func(t *testing.T) {
			events := &recordEvents{}
			r := New(nil, nil, fakeLive{}, nil, nil, events, nil, Options{})
			s := newTestState(3)
			err := errors.New("applying Deployment kyma-system/x: forbidden")
			out, ferr := r.fail(s, tt.condType, tt.cause, err, false)
			assert.Equal(t, steps.Fail(tt.cause), out, "the run ends")
			assert.NoError(t, ferr, "no retry with backoff")

			c := meta.FindStatusCondition(s.cr.Status.Conditions, tt.condType)
			require.NotNil(t, c)
			assert.Equal(t, tt.wantReason, c.Reason)
			assert.Equal(t, tt.cause+": "+err.Error(), c.Message)
			assert.Equal(t, tt.cause, v1alpha1.Cause(*c))
			assert.Equal(t, v1alpha1.StateError, s.cr.Status.State)
			assert.Equal(t, []string{tt.cause}, events.reasons, "the Warning event names the cause")

			// The same failure again (the condition as written before) adds no event.
			s2 := newTestState(3)
			s2.before = s.cr.Status.DeepCopy()
			s2.cr.Status = *s.cr.Status.DeepCopy()
			r.fail(s2, tt.condType, tt.cause, err, false)
			assert.Len(t, events.reasons, 1, "a repeated failure is no new event")
		})
	}
}
