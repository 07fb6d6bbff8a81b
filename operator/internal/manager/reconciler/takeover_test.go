package reconciler

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
)

func entry(manager string, op metav1.ManagedFieldsOperationType, version, fields string) metav1.ManagedFieldsEntry {
	return metav1.ManagedFieldsEntry{Manager: manager, Operation: op, APIVersion: version, FieldsType: "FieldsV1",
		FieldsV1: &metav1.FieldsV1{Raw: []byte(fields)}}
}

func TestTransferredFields(t *testing.T) {
	apply, update := metav1.ManagedFieldsOperationApply, metav1.ManagedFieldsOperationUpdate
	kcm := entry("kube-controller-manager", update, "apps/v1", `{"f:metadata":{"f:annotations":{"f:deployment.kubernetes.io/revision":{}}}}`)
	upstream := entry(UpstreamManager, apply, "apps/v1", `{"f:metadata":{"f:labels":{"f:app":{},"f:version":{}}},"f:spec":{"f:replicas":{}}}`)
	tests := []struct {
		name    string
		in      []metav1.ManagedFieldsEntry
		want    []metav1.ManagedFieldsEntry
		changed bool
	}{
		{name: "nothing of upstream's: unchanged", in: []metav1.ManagedFieldsEntry{kcm}, want: []metav1.ManagedFieldsEntry{kcm}},
		{name: "upstream's apply becomes the manager's, others stay",
			in:      []metav1.ManagedFieldsEntry{upstream, kcm},
			want:    []metav1.ManagedFieldsEntry{entry(module.ManagerName, apply, "apps/v1", string(upstream.FieldsV1.Raw)), kcm},
			changed: true},
		{name: "merged into the manager's own entry of the same version",
			in: []metav1.ManagedFieldsEntry{
				entry(module.ManagerName, apply, "apps/v1", `{"f:metadata":{"f:labels":{"f:app":{},"f:app.kubernetes.io/managed-by":{}}}}`), upstream, kcm},
			want: []metav1.ManagedFieldsEntry{
				entry(module.ManagerName, apply, "apps/v1", `{"f:metadata":{"f:labels":{"f:app":{},"f:app.kubernetes.io/managed-by":{},"f:version":{}}},"f:spec":{"f:replicas":{}}}`), kcm},
			changed: true},
		{name: "another version of the manager's entry: upstream's fields are left unowned",
			in:      []metav1.ManagedFieldsEntry{entry(module.ManagerName, apply, "apps/v1beta2", `{"f:spec":{}}`), upstream},
			want:    []metav1.ManagedFieldsEntry{entry(module.ManagerName, apply, "apps/v1beta2", `{"f:spec":{}}`)},
			changed: true},
		{name: "upstream's updates (not applies) are not taken",
			in:   []metav1.ManagedFieldsEntry{entry(UpstreamManager, update, "apps/v1", `{"f:spec":{}}`)},
			want: []metav1.ManagedFieldsEntry{entry(UpstreamManager, update, "apps/v1", `{"f:spec":{}}`)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := make([]metav1.ManagedFieldsEntry, len(tc.in))
			copy(in, tc.in)
			got, changed, err := transferredFields(in)
			require.NoError(t, err)
			assert.Equal(t, tc.changed, changed)
			require.Len(t, got, len(tc.want))
			for i := range tc.want {
				assert.Equal(t, tc.want[i].Manager, got[i].Manager)
				assert.Equal(t, tc.want[i].APIVersion, got[i].APIVersion)
				assert.JSONEq(t, string(tc.want[i].FieldsV1.Raw), string(got[i].FieldsV1.Raw))
			}
			assert.Equal(t, tc.in, in, "the input is not modified")
		})
	}
}

func TestUpstreamObjects(t *testing.T) {
	manifest := `
apiVersion: v1
kind: ConfigMap
metadata: {name: serverless.function.cli-compat, namespace: kyma-system}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: no-namespace-given}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: elsewhere, namespace: other}
---
apiVersion: v1
kind: Pod
metadata: {name: not-a-managed-kind, namespace: kyma-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: serverless}
`
	cache := func(manifest string) []byte {
		spec, err := json.Marshal(map[string]any{"ManagerUID": "x", "CustomFlags": map[string]any{}, "Manifest": manifest})
		require.NoError(t, err)
		return spec
	}
	controller := func(image string) string {
		return `
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: serverless-ctrl-mngr, namespace: kyma-system}
spec:
  template:
    spec:
      containers: [{name: manager, image: "` + image + `"}]
`
	}
	tests := []struct {
		name     string
		data     map[string][]byte
		want     []string
		wantMode string
		wantErr  bool
	}{
		{name: "managed kinds in the module namespace or cluster-scoped", data: map[string][]byte{UpstreamCacheKey: cache(manifest)},
			want:     []string{"ConfigMap kyma-system/serverless.function.cli-compat", "ConfigMap kyma-system/no-namespace-given", "ClusterRole serverless"},
			wantMode: v1alpha1.FunctionModeBuild},
		{name: "1.8.4's build chart: build mode",
			data:     map[string][]byte{UpstreamCacheKey: cache(controller("europe-docker.pkg.dev/kyma-project/prod/function-controller:1.8.4"))},
			want:     []string{"Deployment kyma-system/serverless-ctrl-mngr"},
			wantMode: v1alpha1.FunctionModeBuild},
		{name: "1.13's buildless chart: buildless mode",
			data:     map[string][]byte{UpstreamCacheKey: cache(controller("europe-docker.pkg.dev/kyma-project/prod/function-buildless-controller:1.13.0"))},
			want:     []string{"Deployment kyma-system/serverless-ctrl-mngr"},
			wantMode: v1alpha1.FunctionModeBuildless},
		{name: "a mirrored buildless controller by digest: buildless mode",
			data:     map[string][]byte{UpstreamCacheKey: cache(controller("mirror.example/kyma/function-buildless-controller@sha256:" + strings.Repeat("a", 64)))},
			want:     []string{"Deployment kyma-system/serverless-ctrl-mngr"},
			wantMode: v1alpha1.FunctionModeBuildless},
		{name: "no key: nothing", data: map[string][]byte{}},
		{name: "not JSON: an error", data: map[string][]byte{UpstreamCacheKey: []byte("{")}, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			refs, mode, err := upstreamObjects(&corev1.Secret{Data: tc.data}, "kyma-system")
			if tc.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			var got []string
			for _, r := range refs {
				got = append(got, r.String())
			}
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.wantMode, mode)
		})
	}
}

func TestAppliedByUpstream(t *testing.T) {
	applied := []metav1.ManagedFieldsEntry{{Manager: UpstreamManager, Operation: metav1.ManagedFieldsOperationApply}}
	updated := []metav1.ManagedFieldsEntry{{Manager: "kubectl-client-side-apply", Operation: metav1.ManagedFieldsOperationUpdate}}
	labelled := map[string]string{module.LabelManagedBy: UpstreamManager}
	tests := []struct {
		name   string
		labels map[string]string
		fields []metav1.ManagedFieldsEntry
		want   bool
	}{
		{name: "labelled and applied by upstream", labels: labelled, fields: applied, want: true},
		{name: "a copy with upstream's labels, written by someone else", labels: labelled, fields: updated},
		{name: "applied by upstream but relabelled (taken over)", labels: map[string]string{module.LabelManagedBy: module.ManagedBy}, fields: applied},
		{name: "applied by upstream 1.10+ under the manager's name, labelled by its chart",
			labels: map[string]string{module.LabelManagedBy: "kustomize"}, fields: []metav1.ManagedFieldsEntry{{Manager: module.ManagerName, Operation: metav1.ManagedFieldsOperationApply}}, want: true},
		{name: "applied by upstream 1.10+, no managed-by label",
			fields: []metav1.ManagedFieldsEntry{{Manager: module.ManagerName, Operation: metav1.ManagedFieldsOperationApply}}, want: true},
		{name: "applied by the manager itself",
			labels: map[string]string{module.LabelManagedBy: module.ManagedBy}, fields: []metav1.ManagedFieldsEntry{{Manager: module.ManagerName, Operation: metav1.ManagedFieldsOperationApply}}},
		{name: "upstream's manager name 1.10+ but only updated, never applied",
			fields: []metav1.ManagedFieldsEntry{{Manager: module.ManagerName, Operation: metav1.ManagedFieldsOperationUpdate}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := &metav1.ObjectMeta{Labels: tc.labels, ManagedFields: tc.fields}
			assert.Equal(t, tc.want, appliedByUpstream(o))
		})
	}
}
