package resources

import (
	"regexp"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
)

// LabelJobName is the label the Job controller puts on a Job's Pods.
const LabelJobName = batchv1.JobNameLabel

// BuildPodSelector selects the Pods of this controller's build Jobs (and
// not the Functions' own Pods, which no Job owns).
func BuildPodSelector() labels.Selector {
	managed, _ := labels.NewRequirement(v1alpha2.LabelManagedBy, selection.Equals, []string{v1alpha2.ManagedByController})
	job, _ := labels.NewRequirement(LabelJobName, selection.Exists, nil)
	return labels.NewSelector().Add(*managed, *job)
}

// BuildOutcome is what a build Pod's steps reported in their termination
// messages, the way a kubelet records them.
type BuildOutcome struct {
	// Finished: every step has terminated, or one has failed.
	Finished bool
	// Digest is the build step's termination message when it succeeded
	// and names a digest; "" when it reported none (a simulated Pod, a
	// 1.8.4 kaniko Job).
	Digest string
	// FailedStep and Failure name the first step that failed and its
	// message (for the dependency step, the last lines of npm's or pip's
	// output), credentials removed.
	FailedStep, Failure string
}

var digestPattern = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// ReadBuildPod reads the outcome of a build Pod from its container statuses.
func ReadBuildPod(pod *corev1.Pod) BuildOutcome {
	var out BuildOutcome
	statuses := append(append([]corev1.ContainerStatus(nil), pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...)
	for _, s := range statuses {
		t := s.State.Terminated
		if t != nil && t.ExitCode != 0 {
			out.Finished, out.FailedStep = true, s.Name
			out.Failure = lastLines(Redact(strings.TrimSpace(t.Message)), failureLines)
			if out.Failure == "" {
				out.Failure = "exit code " + strconv.Itoa(int(t.ExitCode)) + " (" + t.Reason + ")"
			}
			return out
		}
	}
	for _, s := range pod.Status.ContainerStatuses {
		if s.Name != ContainerBuild && len(pod.Status.ContainerStatuses) > 1 {
			continue
		}
		t := s.State.Terminated
		if t == nil {
			return out
		}
		out.Finished = true
		if msg := strings.TrimSpace(t.Message); digestPattern.MatchString(msg) {
			out.Digest = msg
		}
	}
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		out.Finished = true
	}
	return out
}

// failureLines is how many lines of a step's message a condition keeps:
// npm and pip put the cause at the end.
const failureLines = 8

func lastLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

var (
	// key = value pairs of .npmrc and pip.conf that hold credentials, and
	// HTTP Authorization headers.
	secretSetting = regexp.MustCompile(`(?i)((?:_authToken|_auth|_password|password|token|authorization)\s*[=:]\s*)(?:(?:Bearer|Basic)\s+)?\S+`)
	// Credentials in URLs: scheme://user:password@host.
	urlCredentials = regexp.MustCompile(`(://)[^/@\s:]+(?::[^/@\s]*)?@`)
)

// Redact removes credentials a package manager may print (a registry URL
// with user and password, a token setting) from a message.
func Redact(s string) string {
	s = secretSetting.ReplaceAllString(s, "${1}***")
	return urlCredentials.ReplaceAllString(s, "${1}***@")
}
