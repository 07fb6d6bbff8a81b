package v1alpha1_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kyma-project/serverless-manager/tests/support/testenv"
)

// functionBuildExecutorArgs accepts the allow-listed kaniko flags and those
// the CR adds in functionBuildExecutorAdditionalFlags, never the flags the
// Function controller sets; a rejection says which flag and why.
func TestExecutorArgsAllowList(t *testing.T) {
	env := testenv.Start(t, "config/crd/bases")
	ctx := t.Context()
	require.NoError(t, env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kyma-system"}}))

	defaults := "--insecure,--skip-tls-verify,--skip-unused-stages,--log-format=text,--cache=true,--use-new-run,--compressed-caching=false"
	tests := []struct {
		name    string
		spec    string
		wantErr []string // substrings of the rejection; none = accepted
	}{
		{"the defaults", `{"functionBuildExecutorArgs":"` + defaults + `"}`, nil},
		{"allow-listed extras, spaces and values", `{"functionBuildExecutorArgs":"--cache=true, --cache-ttl=6h,--snapshot-mode=redo,--verbosity debug"}`, nil},
		{"registry mirror", `{"functionBuildExecutorArgs":"--insecure,--registry-mirror=mirror.example.com"}`,
			[]string{"spec.functionBuildExecutorArgs", "only allow-listed kaniko flags", "leak Function images", "functionBuildExecutorAdditionalFlags"}},
		{"one allowed flag does not carry an unknown one", `{"functionBuildExecutorArgs":"--cache=true,--cache-repo=evil.example/cache"}`,
			[]string{"only allow-listed kaniko flags"}},
		{"a prefix of an allowed flag is not allowed", `{"functionBuildExecutorArgs":"--cachex"}`, []string{"only allow-listed kaniko flags"}},
		{"added flags are names, not prefixes", `{"functionBuildExecutorArgs":"--registry-mirror-x=1","functionBuildExecutorAdditionalFlags":"--registry-mirror"}`,
			[]string{"only allow-listed kaniko flags"}},
		{"registry mirror added by the CR", `{"functionBuildExecutorArgs":"--insecure,--registry-mirror=mirror.example.com","functionBuildExecutorAdditionalFlags":"--registry-mirror, --insecure-registry"}`, nil},
		{"an extra destination", `{"functionBuildExecutorArgs":"--insecure,--destination=evil.example/img:1"}`,
			[]string{"spec.functionBuildExecutorArgs", "--destination", "set by the Function controller"}},
		{"destination cannot be added", `{"functionBuildExecutorArgs":"--destination=evil.example/img:1","functionBuildExecutorAdditionalFlags":"--destination"}`,
			[]string{"spec.functionBuildExecutorAdditionalFlags", "the Function controller sets them"}},
		{"context cannot be given", `{"functionBuildExecutorArgs":"--context=dir:///etc"}`, []string{"--context"}},
		{"additional flags must be flag names", `{"functionBuildExecutorAdditionalFlags":"--registry-mirror=x"}`, []string{"spec.functionBuildExecutorAdditionalFlags"}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var spec map[string]any
			require.NoError(t, json.Unmarshal([]byte(tt.spec), &spec))
			u := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "operator.kyma-project.io/v1alpha1", "kind": "Serverless",
				"metadata": map[string]any{"namespace": "kyma-system", "name": fmt.Sprintf("args-%d", i)},
				"spec":     spec,
			}}
			err := env.Client.Create(ctx, u)
			if len(tt.wantErr) == 0 {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err, "the API server must reject %s", tt.spec)
			for _, want := range tt.wantErr {
				assert.Contains(t, err.Error(), want)
			}
		})
	}
}
