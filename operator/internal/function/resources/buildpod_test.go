package resources

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
)

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"//registry.example/:_authToken=npm_abc123":              "//registry.example/:_authToken=***",
		"_auth = dXNlcjpwYXNz":                                   "_auth = ***",
		"GET https://user:p4ss@registry.example/pkg - 404":       "GET https://***@registry.example/pkg - 404",
		"index-url = https://tok@pypi.example/simple":            "index-url = https://***@pypi.example/simple",
		"Authorization: Bearer eyJhbGciOi":                       "Authorization: ***",
		"npm error 404 'left-pad@^9' is not in this registry.":   "npm error 404 'left-pad@^9' is not in this registry.",
		"ERROR: No matching distribution found for requests==99": "ERROR: No matching distribution found for requests==99",
	} {
		assert.Equal(t, want, Redact(in), in)
	}
}

func TestReadBuildPod(t *testing.T) {
	const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	done := func(name string, exit int32, msg string) corev1.ContainerStatus {
		return corev1.ContainerStatus{Name: name, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: exit, Message: msg, Reason: "Error"}}}
	}
	running := func(name string) corev1.ContainerStatus {
		return corev1.ContainerStatus{Name: name, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
	}
	for name, tc := range map[string]struct {
		init, main []corev1.ContainerStatus
		want       BuildOutcome
	}{
		"still building":        {[]corev1.ContainerStatus{done(ContainerPrepare, 0, "")}, []corev1.ContainerStatus{running(ContainerBuild)}, BuildOutcome{}},
		"pushed":                {nil, []corev1.ContainerStatus{done(ContainerBuild, 0, digest)}, BuildOutcome{Finished: true, Digest: digest}},
		"no digest (simulated)": {nil, []corev1.ContainerStatus{done(ContainerBuild, 0, "")}, BuildOutcome{Finished: true}},
		"not a digest":          {nil, []corev1.ContainerStatus{done(ContainerBuild, 0, "pushed it")}, BuildOutcome{Finished: true}},
		"1.8.4 kaniko Job":      {nil, []corev1.ContainerStatus{done(ContainerExecutor, 0, "")}, BuildOutcome{Finished: true}},
		"init step failed": {[]corev1.ContainerStatus{done(ContainerPrepare, 0, ""), done(ContainerDependencies, 1, "l1\nl2\nl3\nl4\nl5\nl6\nl7\nl8\nl9\nl10")},
			[]corev1.ContainerStatus{{Name: ContainerBuild}},
			BuildOutcome{Finished: true, FailedStep: ContainerDependencies, Failure: "l3\nl4\nl5\nl6\nl7\nl8\nl9\nl10"}},
		"failed without a message": {nil, []corev1.ContainerStatus{done(ContainerBuild, 137, "")},
			BuildOutcome{Finished: true, FailedStep: ContainerBuild, Failure: "exit code 137 (Error)"}},
	} {
		t.Run(name, func(t *testing.T) {
			pod := &corev1.Pod{Status: corev1.PodStatus{InitContainerStatuses: tc.init, ContainerStatuses: tc.main}}
			assert.Equal(t, tc.want, ReadBuildPod(pod))
		})
	}
}
