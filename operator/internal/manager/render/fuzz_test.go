package render_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/values"
	"github.com/kyma-project/serverless-manager/tests/support/testenv"
)

// FuzzAdmittedSpecsRender: whatever Serverless spec the API server admits
// (the CRD's validation), the manager turns into values the chart's schema
// accepts and renders. A gap between the two validations fails here.
func FuzzAdmittedSpecsRender(f *testing.F) {
	f.Add("info", "json", "L", "normal", int64(50), int64(5), "5m", "10s", "--insecure,--cache=true", "http://a.b/c", "my-secret", true)
	f.Add("debug", "text", "XS", "local-dev", int64(1), int64(1), "1h30m", "500ms", "--a", "https://x:1/y?z=1,2", "", false)
	f.Add("warn", "", "", "", int64(100), int64(1000), "0.5s", "1us", "--a=1, --b=2", "", "a.b-c", false)
	f.Add("", "", "XXL", "turbo", int64(0), int64(-1), "5", "x", "a,b", "not a url", "UPPER", true)
	// Release 1.13's log settings, and what its CRD admitted besides.
	f.Add("dpanic", "console", "M", "fast", int64(80), int64(3), "1m", "5s", "--cache=false", "", "", true)
	f.Add("LOUD", "yaml", "S", "slow", int64(50), int64(5), "5m", "10s", "", "", "", false)
	env := testenv.Start(f, "config/crd/bases")
	ctx := context.Background()
	require.NoError(f, env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kyma-system"}}))
	r := renderer(f)
	var n atomic.Int64

	f.Fuzz(func(t *testing.T, level, format, podPreset, buildPreset string, cpu, jobs int64, requeue, liveness, args, endpoint, secretName string, internal bool) {
		for _, s := range []string{level, format, podPreset, buildPreset, requeue, liveness, args, endpoint, secretName} {
			if !utf8.ValidString(s) {
				t.Skip("the API carries valid UTF-8 only")
			}
		}
		spec := map[string]any{
			"logLevel": level, "logFormat": format, "defaultRuntimePodPreset": podPreset, "defaultBuildJobPreset": buildPreset,
			"targetCPUUtilizationPercentage": cpu, "functionBuildMaxSimultaneousJobs": jobs,
			"functionRequeueDuration": requeue, "healthzLivenessTimeout": liveness, "functionBuildExecutorArgs": args,
			"dockerRegistry": map[string]any{"enableInternal": internal},
		}
		for k, v := range spec {
			if v == "" {
				delete(spec, k) // an empty string is "not set"
			}
		}
		if endpoint != "" {
			spec["eventing"] = map[string]any{"endpoint": endpoint}
		}
		if secretName != "" {
			spec["dockerRegistry"].(map[string]any)["secretName"] = secretName
		}
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "operator.kyma-project.io/v1alpha1", "kind": "Serverless",
			"metadata": map[string]any{"namespace": "kyma-system", "name": fmt.Sprintf("fuzz-%d", n.Add(1))},
			"spec":     spec,
		}}
		if err := env.Client.Create(ctx, u); err != nil {
			return // rejected at admission: nothing reaches the manager
		}
		data, err := json.Marshal(u.Object["spec"])
		require.NoError(t, err)
		var admitted v1alpha1.ServerlessSpec
		require.NoError(t, json.Unmarshal(data, &admitted))
		built, err := values.Build(admitted, values.Facts{Namespace: "kyma-system", Nodes: 3, NewSecret: func(l int) string { return fmt.Sprintf("%0*d", l, 7) },
			RegistrySecret: map[string][]byte{"username": []byte("u"), "password": []byte("p"), "serverAddress": []byte("s"), "registryAddress": []byte("r")}})
		require.NoError(t, err, "an admitted spec must configure")
		vals, err := built.Values.Map()
		require.NoError(t, err)
		_, err = r.Render("kyma-system", vals)
		require.NoError(t, err, "an admitted spec must render: %s", data)
	})
}
