package v1alpha2_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/kyma-project/serverless-manager/operator/internal/testenv"
	"github.com/kyma-project/serverless-manager/operator/pkg/repo"
)

const inline = `"source":{"inline":{"source":"module.exports = { main: () => 'hi' }"}}`

// The Function CRD the chart installs rejects bad Functions at admission,
// each with a message that names the field.
func TestFunctionValidation(t *testing.T) {
	env := testenv.Start(t, "charts/serverless/crds")
	ctx := context.Background()

	tests := []struct {
		name    string
		spec    string
		wantErr string // substring; empty = accepted
	}{
		{"inline nodejs22", `{"runtime":"nodejs22",` + inline + `}`, ""},
		{"git python312", `{"runtime":"python312","source":{"gitRepository":{"url":"https://github.com/example/fn.git","baseDir":"/fn","reference":"main","auth":{"type":"basic","secretName":"git-creds"}}}}`, ""},
		{"profile and env", `{"runtime":"nodejs20",` + inline + `,"env":[{"name":"MY_VAR","value":"1"}],"resourceConfiguration":{"function":{"profile":"M"},"build":{"profile":"fast"}},"scaleConfig":{"minReplicas":1,"maxReplicas":3},"labels":{"team":"a"}}`, ""},
		{"custom resources", `{"runtime":"nodejs22",` + inline + `,"resourceConfiguration":{"function":{"resources":{"limits":{"cpu":"200m","memory":"128Mi"}}}}}`, ""},
		{"runtime missing", `{` + inline + `}`, "spec.runtime"},
		{"runtime unknown", `{"runtime":"nodejs12",` + inline + `}`, "spec.runtime"},
		{"source missing", `{"runtime":"nodejs22"}`, "spec.source"},
		{"both sources", `{"runtime":"nodejs22","source":{"inline":{"source":"x"},"gitRepository":{"url":"u","baseDir":"/","reference":"main"}}}`, "spec.source: use exactly one of gitRepository and inline"},
		{"no source kind", `{"runtime":"nodejs22","source":{}}`, "spec.source: use exactly one of gitRepository and inline"},
		{"empty inline source", `{"runtime":"nodejs22","source":{"inline":{"source":""}}}`, "spec.source.inline.source"},
		{"git without baseDir", `{"runtime":"nodejs22","source":{"gitRepository":{"url":"u","reference":"main"}}}`, "spec.source.gitRepository.baseDir is required"},
		{"git with blank reference", `{"runtime":"nodejs22","source":{"gitRepository":{"url":"u","baseDir":"/","reference":"  "}}}`, "spec.source.gitRepository.reference is required"},
		{"git auth type", `{"runtime":"nodejs22","source":{"gitRepository":{"url":"u","baseDir":"/","reference":"main","auth":{"type":"token","secretName":"s"}}}}`, "spec.source.gitRepository.auth.type"},
		{"git auth blank secret", `{"runtime":"nodejs22","source":{"gitRepository":{"url":"u","baseDir":"/","reference":"main","auth":{"type":"key","secretName":" "}}}}`, "spec.source.gitRepository.auth.secretName is required"},
		{"reserved env", `{"runtime":"nodejs22",` + inline + `,"env":[{"name":"FUNC_PORT","value":"1"}]}`, "spec.env: the names FUNC_RUNTIME"},
		{"reserved label prefix", `{"runtime":"nodejs22",` + inline + `,"labels":{"serverless.kyma-project.io/x":"y"}}`, "spec.labels: the prefix serverless.kyma-project.io/ is reserved"},
		{"long label name", `{"runtime":"nodejs22",` + inline + `,"labels":{"` + strings.Repeat("l", 64) + `":"y"}}`, "spec.labels: label names must be shorter than 64 characters"},
		{"reserved annotation prefix", `{"runtime":"nodejs22",` + inline + `,"annotations":{"serverless.kyma-project.io/x":"y"}}`, "spec.annotations: the prefix serverless.kyma-project.io/ is reserved"},
		{"profile and resources", `{"runtime":"nodejs22",` + inline + `,"resourceConfiguration":{"function":{"profile":"S","resources":{"limits":{"cpu":"1"}}}}}`, "spec.resourceConfiguration.function: use exactly one of profile and resources"},
		{"function profile unknown", `{"runtime":"nodejs22",` + inline + `,"resourceConfiguration":{"function":{"profile":"XXL"}}}`, "spec.resourceConfiguration.function.profile must be one of"},
		{"build profile unknown", `{"runtime":"nodejs22",` + inline + `,"resourceConfiguration":{"build":{"profile":"turbo"}}}`, "spec.resourceConfiguration.build.profile must be one of"},
		{"min above max", `{"runtime":"nodejs22",` + inline + `,"scaleConfig":{"minReplicas":3,"maxReplicas":2}}`, "spec.scaleConfig: minReplicas must not exceed maxReplicas"},
		{"min replicas zero", `{"runtime":"nodejs22",` + inline + `,"scaleConfig":{"minReplicas":0,"maxReplicas":2}}`, "spec.scaleConfig.minReplicas"},
		{"negative replicas", `{"runtime":"nodejs22",` + inline + `,"replicas":-1}`, "spec.replicas"},
		{"template labels", `{"runtime":"nodejs22",` + inline + `,"template":{"labels":{"a":"b"}}}`, "spec.template: labels and annotations are not supported"},
		{"secret mount without path", `{"runtime":"nodejs22",` + inline + `,"secretMounts":[{"secretName":"s","mountPath":""}]}`, "spec.secretMounts[0].mountPath"},
	}
	bad := 0
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var spec map[string]any
			require.NoError(t, json.Unmarshal([]byte(tt.spec), &spec))
			fn := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "serverless.kyma-project.io/v1alpha2", "kind": "Function",
				"metadata": map[string]any{"namespace": "default", "name": fmt.Sprintf("fn-%d", i)},
				"spec":     spec,
			}}
			err := env.Client.Create(ctx, fn)
			if tt.wantErr == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err, "the API server must reject %s", tt.spec)
			assert.Contains(t, err.Error(), tt.wantErr)
		})
		if tt.wantErr != "" {
			bad++
		}
	}
	assert.GreaterOrEqual(t, bad, 15)

	// The samples: the good one is accepted, the bad one rejected.
	for file, wantErr := range map[string]string{"function-sample.yaml": "", "function-invalid.yaml": "spec.source: use exactly one"} {
		data, err := os.ReadFile(filepath.Join(repo.MustRoot(), "config", "samples", file))
		require.NoError(t, err)
		u := &unstructured.Unstructured{}
		require.NoError(t, yaml.Unmarshal(data, &u.Object))
		err = env.Client.Create(ctx, u)
		if wantErr == "" {
			assert.NoError(t, err, file)
		} else if assert.Error(t, err, file) {
			assert.Contains(t, err.Error(), wantErr, file)
		}
	}
}
