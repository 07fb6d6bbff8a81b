package reconciler

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
)

// setCondition sets a condition in st. lastTransitionTime moves only when
// the status changes (1.8.4 moved it on every write); a new type
// is appended, so the order of existing conditions never changes.
func setCondition(st *v1alpha2.FunctionStatus, t string, status corev1.ConditionStatus, reason, message string, now metav1.Time) {
	if c := st.Condition(t); c != nil {
		if c.Status != status {
			c.LastTransitionTime = now
		}
		c.Status, c.Reason, c.Message = status, reason, message
		return
	}
	st.Conditions = append(st.Conditions, v1alpha2.Condition{
		Type: t, Status: status, Reason: reason, Message: message, LastTransitionTime: now,
	})
}

// isTrue reports whether condition t is True.
func isTrue(st *v1alpha2.FunctionStatus, t string) bool {
	c := st.Condition(t)
	return c != nil && c.Status == corev1.ConditionTrue
}
