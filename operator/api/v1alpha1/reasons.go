package v1alpha1

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Reasons upstream's serverless-operator (1.x) sets; tools written for it
// (the Kyma dashboard, scripts) key on them, so the same situation carries
// the same reason here.
const (
	// ReasonConfigurationErr: Configured=False, the spec or what it names
	// (the registry Secret, the cluster) cannot be used.
	ReasonConfigurationErr = "ConfigurationErr"
	// ReasonInstallation: Installed not yet True, the module is rolling out.
	ReasonInstallation = "Installation"
	// ReasonInstallationErr: Installed=False, installing failed.
	ReasonInstallationErr = "InstallationErr"
	// ReasonDeletion: Deleted not yet True, the uninstall is under way.
	ReasonDeletion = "Deletion"
	// ReasonDeletionErr: Deleted=False, the uninstall cannot go on (upstream
	// also uses it while Functions exist).
	ReasonDeletionErr = "DeletionErr"
	// ReasonDeleted: Deleted=True, everything is removed.
	ReasonDeleted = "Deleted"
)

// UpstreamReason is the reason upstream's operator gives a condition of
// type condType and status in the situation named by cause. Causes upstream
// has no word for (Paused) and those it shares (ServerlessDuplicated,
// Configured, Installed) are their own reason.
func UpstreamReason(condType string, status metav1.ConditionStatus, cause string) string {
	switch cause {
	case ReasonPaused, ReasonServerlessDuplicated, ReasonConfigured, ReasonInstalled:
		return cause
	}
	switch condType {
	case ConditionConfigured:
		if status == metav1.ConditionTrue {
			return ReasonConfigured
		}
		return ReasonConfigurationErr
	case ConditionInstalled:
		switch {
		case status == metav1.ConditionTrue:
			return ReasonInstalled
		case cause == ReasonInstalling:
			return ReasonInstallation
		}
		return ReasonInstallationErr
	case ConditionDeleted:
		switch {
		case status == metav1.ConditionTrue:
			return ReasonDeleted
		case cause == ReasonDeleting:
			return ReasonDeletion
		}
		return ReasonDeletionErr
	}
	return cause
}

// NewCondition builds the condition for cause: upstream's reason, and the
// cause in front of the message when the two differ.
func NewCondition(condType string, status metav1.ConditionStatus, cause, msg string, generation int64) metav1.Condition {
	reason := UpstreamReason(condType, status, cause)
	// Deleted=True ends the uninstall: "Deleted" says all there is.
	if reason != cause && reason != ReasonDeleted {
		msg = cause + ": " + msg
	}
	return metav1.Condition{Type: condType, Status: status, Reason: reason, Message: msg, ObservedGeneration: generation}
}

// Cause is the cause a condition built by NewCondition records: the word
// in front of the message when the reason is upstream's, else the reason.
func Cause(c metav1.Condition) string {
	if before, _, ok := strings.Cut(c.Message, ": "); ok && UpstreamReason(c.Type, c.Status, before) == c.Reason && before != c.Reason && isWord(before) {
		return before
	}
	return c.Reason
}

func isWord(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z') {
			return false
		}
	}
	return true
}
