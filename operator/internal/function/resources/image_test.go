package resources

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
)

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// The formula was checked against images 1.8.4 built, whose UIDs and
// sources are not at hand, so their tags cannot be recomputed here. These
// cases pin the formula instead: once as the literal string, and
// once through Go's default struct formatting, which is how 1.8.4 produced
// the "{source deps}" part.
func TestImageTag(t *testing.T) {
	type sourceAndDeps struct{ Source, Dependencies string }
	tests := []struct {
		name string
		fn   *v1alpha2.Function
		base string
		want string
	}{
		{
			name: "inline, empty dependencies: literal string",
			fn:   newFunction(v1alpha2.RuntimeNodejs20),
			base: testBase,
			want: sha(testUID + "-{" + testSrc + " }-nodejs20-" + testBase),
		},
		{
			name: "inline python: Go struct formatting of source and raw dependencies",
			fn: newFunction(v1alpha2.RuntimePython312, func(fn *v1alpha2.Function) {
				fn.Spec.Source.Inline = &v1alpha2.InlineSource{Source: "def main(event, context):\n  return 'hi'\n", Dependencies: "requests==2.31.0\n"}
			}),
			base: "europe-docker.pkg.dev/kyma-project/prod/function-runtime-python312:1.8.4",
			want: sha(fmt.Sprintf("%s-%v-%s-%s", testUID,
				sourceAndDeps{"def main(event, context):\n  return 'hi'\n", "requests==2.31.0\n"},
				"python312", "europe-docker.pkg.dev/kyma-project/prod/function-runtime-python312:1.8.4")),
		},
		{
			name: "blank Node dependencies hash raw, not as the ConfigMap's {}",
			fn: newFunction(v1alpha2.RuntimeNodejs22, func(fn *v1alpha2.Function) {
				fn.Spec.Source.Inline.Dependencies = "  "
			}),
			base: testBase,
			want: sha(testUID + "-{" + testSrc + "   }-nodejs22-" + testBase),
		},
		{
			name: "override replaces the runtime, base image stays the Dockerfile's",
			fn: newFunction(v1alpha2.RuntimeNodejs20, func(fn *v1alpha2.Function) {
				fn.Spec.RuntimeImageOverride = "my.registry/runtime:1"
			}),
			base: testBase,
			want: sha(testUID + "-{" + testSrc + " }-my.registry/runtime:1-" + testBase),
		},
		{
			name: "base image kept verbatim with its CR",
			fn:   newFunction(v1alpha2.RuntimeNodejs20),
			base: testBase + "\r",
			want: sha(testUID + "-{" + testSrc + " }-nodejs20-" + testBase + "\r"),
		},
		{
			name: "git: status commit and baseDir, not spec",
			fn: gitFunction(func(fn *v1alpha2.Function) {
				fn.Spec.Source.GitRepository.BaseDir = "/changed"
			}),
			base: testBase,
			want: sha(testUID + "-9f0c4e5a2b1d3c4e5f60718293a4b5c6d7e8f901-/orders-service/function-nodejs22-" + testBase),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := inputs(tt.fn)
			in.BaseImage = tt.base
			assert.Equal(t, tt.want, ImageTag(in))
		})
	}
}

func TestImageTagChangesWithEveryInput(t *testing.T) {
	base := inputs(newFunction(v1alpha2.RuntimeNodejs20))
	tag := ImageTag(base)
	assert.Regexp(t, "^[0-9a-f]{64}$", tag)
	changes := map[string]func(*Inputs){
		"uid":          func(in *Inputs) { in.Function.UID = "other" },
		"source":       func(in *Inputs) { in.Function.Spec.Source.Inline.Source += " " },
		"dependencies": func(in *Inputs) { in.Function.Spec.Source.Inline.Dependencies = "{}" },
		"runtime":      func(in *Inputs) { in.Function.Spec.Runtime = v1alpha2.RuntimeNodejs22 },
		"override":     func(in *Inputs) { in.Function.Spec.RuntimeImageOverride = "x" },
		"base image":   func(in *Inputs) { in.BaseImage += " " },
	}
	for name, change := range changes {
		t.Run(name, func(t *testing.T) {
			in := inputs(newFunction(v1alpha2.RuntimeNodejs20))
			change(&in)
			assert.NotEqual(t, tag, ImageTag(in))
		})
	}
	t.Run("registry does not change the tag", func(t *testing.T) {
		in := inputs(newFunction(v1alpha2.RuntimeNodejs20))
		in.Registry = Registry{PushAddress: "push:5000", PullAddress: "localhost:32137", Internal: true}
		assert.Equal(t, tag, ImageTag(in))
		assert.Equal(t, "push:5000/fn-test-1-hello:"+tag, PushImage(in))
		assert.Equal(t, "localhost:32137/fn-test-1-hello:"+tag, PullImage(in))
	})
}
