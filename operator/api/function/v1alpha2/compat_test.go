package v1alpha2_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/tests/support/repo"
	"github.com/kyma-project/serverless-manager/tests/support/testenv"
)

// The CRD stays one version, served and stored as before: no stored
// Function is rewritten by an upgrade.
func TestFunctionCRDOneStoredVersion(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repo.MustRoot(), "charts", "serverless", "crds", "serverless.kyma-project.io_functions.yaml"))
	require.NoError(t, err)
	crd := &apiextensionsv1.CustomResourceDefinition{}
	require.NoError(t, yaml.Unmarshal(data, crd))
	require.Len(t, crd.Spec.Versions, 1)
	v := crd.Spec.Versions[0]
	assert.Equal(t, "v1alpha2", v.Name)
	assert.True(t, v.Served)
	assert.True(t, v.Storage)
	assert.Nil(t, crd.Spec.Conversion, "no conversion")
	assert.Equal(t, []string{"fn", "fns"}, crd.Spec.Names.ShortNames, "release 1.13's short names")
	assert.ElementsMatch(t, []string{"kyma-serverless", "all"}, crd.Spec.Names.Categories, "1.8.4's and 1.13's categories")
}

// A condition as this controller writes it is a complete metav1.Condition
// for release 1.13's clients and still 1.8.4's shape.
func TestConditionReadableByBothLines(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC))
	tests := []struct {
		name string
		in   v1alpha2.Condition
	}{
		{"with message", v1alpha2.Condition{Type: v1alpha2.ConditionRunning, Status: corev1.ConditionTrue,
			Reason: v1alpha2.ReasonDeploymentReady, Message: "Deployment fn-x is ready", LastTransitionTime: at}},
		{"empty message", v1alpha2.Condition{Type: v1alpha2.ConditionBuildReady, Status: corev1.ConditionUnknown,
			Reason: v1alpha2.ReasonJobCreated, LastTransitionTime: at}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data, err := json.Marshal(tt.in)
			require.NoError(t, err)
			var fields map[string]any
			require.NoError(t, json.Unmarshal(data, &fields))
			for _, k := range []string{"type", "status", "lastTransitionTime", "reason", "message"} {
				assert.Contains(t, fields, k, "metav1.Condition requires %s", k)
			}

			var upstream metav1.Condition
			require.NoError(t, json.Unmarshal(data, &upstream))
			assert.Equal(t, tt.in.Type, upstream.Type)
			assert.Equal(t, metav1.ConditionStatus(tt.in.Status), upstream.Status)
			assert.Equal(t, tt.in.Reason, upstream.Reason)
			assert.Equal(t, tt.in.Message, upstream.Message)
			assert.True(t, tt.in.LastTransitionTime.Equal(&upstream.LastTransitionTime))

			// 1.13 writes observedGeneration; it decodes back into ours.
			upstream.ObservedGeneration = 3
			back, err := json.Marshal(upstream)
			require.NoError(t, err)
			var ours v1alpha2.Condition
			require.NoError(t, json.Unmarshal(back, &ours))
			assert.Equal(t, int64(3), ours.ObservedGeneration)
			assert.Equal(t, tt.in.Reason, ours.Reason)
		})
	}
}

// The API server serves the short names, and keeps the status fields both
// lines write: a status written by release 1.13 and one written by 1.8.4
// (conditions without reason or message) are both stored unpruned.
func TestFunctionServedForBothLines(t *testing.T) {
	env := testenv.Start(t, "charts/serverless/crds")
	ctx := context.Background()

	dc, err := discovery.NewDiscoveryClientForConfig(env.Config)
	require.NoError(t, err)
	list, err := dc.ServerResourcesForGroupVersion(v1alpha2.GroupVersion.String())
	require.NoError(t, err)
	var names []string
	for _, r := range list.APIResources {
		if r.Name == "functions" {
			names = r.ShortNames
		}
	}
	assert.Equal(t, []string{"fn", "fns"}, names)

	statuses := []struct {
		name   string
		status map[string]any
	}{
		{"release 1.13", map[string]any{
			"observedGeneration": int64(1),
			"runtime":            "nodejs24",
			"runtimeImage":       "europe-docker.pkg.dev/kyma-project/prod/function-runtime-nodejs24:1.13.0",
			"podSelector":        "serverless.kyma-project.io/function-name=f",
			"functionAnnotations": map[string]any{
				"example.com/a": "b",
			},
			"gitRepository": map[string]any{"url": "https://git.example/fn.git", "baseDir": "/fn", "reference": "main", "commit": "0123456789abcdef0123456789abcdef01234567"},
			"baseDir":       "/fn", "reference": "main", "commit": "0123456789abcdef0123456789abcdef01234567",
			"podSecurityContext":       map[string]any{"runAsUser": int64(1000), "fsGroup": int64(1000), "seccompProfile": map[string]any{"type": "RuntimeDefault"}},
			"containerSecurityContext": map[string]any{"privileged": false, "readOnlyRootFilesystem": true, "capabilities": map[string]any{"drop": []any{"ALL"}}},
			"conditions": []any{map[string]any{
				"type": "ConfigurationReady", "status": "True", "reason": "FunctionSpecValidated",
				"message": "Warning: function configured, runtime nodejs20 is deprecated", "lastTransitionTime": "2026-07-01T12:00:00Z", "observedGeneration": int64(1),
			}},
		}},
		{"release 1.8.4", map[string]any{
			"runtime": "nodejs20", "buildResourceProfile": "slow", "runtimeImageOverride": "",
			"conditions": []any{map[string]any{"type": "BuildReady", "status": "Unknown", "lastTransitionTime": "2026-07-01T12:00:00Z"}},
		}},
	}
	for _, tt := range statuses {
		t.Run(tt.name, func(t *testing.T) {
			fn := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "serverless.kyma-project.io/v1alpha2", "kind": "Function",
				"metadata": map[string]any{"namespace": "default", "name": "status-" + tt.status["runtime"].(string)},
				"spec":     map[string]any{"runtime": "nodejs22", "source": map[string]any{"inline": map[string]any{"source": "x"}}},
			}}
			require.NoError(t, env.Client.Create(ctx, fn))
			fn.Object["status"] = tt.status
			require.NoError(t, env.Client.Status().Update(ctx, fn))

			got := &unstructured.Unstructured{}
			got.SetGroupVersionKind(fn.GroupVersionKind())
			require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(fn), got))
			want, err := json.Marshal(tt.status)
			require.NoError(t, err)
			have, err := json.Marshal(got.Object["status"])
			require.NoError(t, err)
			assert.JSONEq(t, string(want), string(have), "nothing pruned")

			typed := &v1alpha2.Function{}
			require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(got.Object, typed), "our types read it")
			assert.NotEmpty(t, typed.Status.Conditions)
		})
	}
}
