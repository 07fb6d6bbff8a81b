package values

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
)

func TestFunctionMode(t *testing.T) {
	const build, buildless = v1alpha1.FunctionModeBuild, v1alpha1.FunctionModeBuildless
	tests := []struct {
		name string
		spec string
		f    ModeFacts
		want string
	}{
		{name: "nothing said: build", want: build},
		{name: "the spec wins over everything", spec: build, f: ModeFacts{Annotation: "enabled", InEffect: buildless, TakenOver: buildless}, want: build},
		{name: "the spec asks for buildless", spec: buildless, f: ModeFacts{InEffect: build}, want: buildless},
		{name: "1.8's opt-in annotation", f: ModeFacts{Annotation: "enabled", InEffect: build}, want: buildless},
		{name: "1.9–1.11's opt-out annotation", f: ModeFacts{Annotation: "disabled", TakenOver: buildless}, want: build},
		{name: "another annotation value means nothing", f: ModeFacts{Annotation: "yes"}, want: build},
		{name: "the mode in effect stays", f: ModeFacts{InEffect: buildless}, want: buildless},
		{name: "the mode in effect wins over the installation taken over", f: ModeFacts{InEffect: build, TakenOver: buildless}, want: build},
		{name: "a buildless installation taken over stays buildless", f: ModeFacts{TakenOver: buildless}, want: buildless},
		{name: "a build installation taken over stays build", f: ModeFacts{TakenOver: build}, want: build},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, FunctionMode(tc.spec, tc.f))
		})
	}
}
