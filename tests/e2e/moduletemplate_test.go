//go:build e2e

package e2e

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/pkg/manifest"
	"github.com/kyma-project/serverless-manager/tests/framework"
)

// The generated module-template/ files are accepted by the lifecycle
// manager's CRDs (restated in testdata/lifecycle-manager), and those CRDs
// reject what the lifecycle manager rejects (the template without a
// descriptor the previous generator wrote, a channel assignment of a
// version that is no semantic version).
func TestModuleTemplateFitsTheLifecycleManagerCRDs(t *testing.T) {
	cluster := framework.ClusterFor(t)
	ctx := t.Context()
	c := installLifecycleManagerCRDs(t, cluster)

	read := func(name string) *unstructured.Unstructured {
		objs, err := manifest.ReadFile(filepath.Join(cluster.Root(), "module-template", name))
		require.NoError(t, err)
		require.Len(t, objs, 1)
		return objs[0]
	}
	template, releaseMeta := read("template.yaml"), read("module-release-meta.yaml")

	noDescriptor := template.DeepCopy()
	unstructured.RemoveNestedField(noDescriptor.Object, "spec", "descriptor")
	notSemver := releaseMeta.DeepCopy()
	require.NoError(t, unstructured.SetNestedSlice(notSemver.Object, []any{map[string]any{"channel": "regular", "version": "v0.1"}}, "spec", "channels"))
	noChannel := releaseMeta.DeepCopy()
	unstructured.RemoveNestedField(noChannel.Object, "spec", "channels")

	tests := []struct {
		name    string
		obj     *unstructured.Unstructured
		wantErr string
	}{
		{"generated ModuleTemplate", template, ""},
		{"generated ModuleReleaseMeta", releaseMeta, ""},
		{"ModuleTemplate without descriptor", noDescriptor, "spec.descriptor: Required value"},
		{"ModuleReleaseMeta with a version that is not semantic", notSemver, "spec.channels[0].version"},
		{"ModuleReleaseMeta with neither channels nor mandatory", noChannel, "one of mandatory and channels"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := tt.obj.DeepCopy()
			err := c.Patch(ctx, obj, client.Apply, client.DryRunAll, client.FieldOwner("e2e"), client.ForceOwnership)
			if tt.wantErr == "" {
				require.NoError(t, err)
				// Nothing the generator wrote was pruned as unknown.
				wantSpec, _, _ := unstructured.NestedMap(tt.obj.Object, "spec")
				gotSpec, _, _ := unstructured.NestedMap(obj.Object, "spec")
				for k := range wantSpec {
					assert.Contains(t, gotSpec, k, "field spec.%s survives the schema", k)
				}
				return
			}
			require.Error(t, err)
			assert.True(t, apierrors.IsInvalid(err), "%v", err)
			assert.Contains(t, err.Error(), tt.wantErr)
		})
	}
}

// installLifecycleManagerCRDs installs the lifecycle manager's ModuleTemplate
// and ModuleReleaseMeta CRDs (testdata/lifecycle-manager) and its namespace
// kcp-system until t ends, and returns a client that knows the kinds.
func installLifecycleManagerCRDs(t *testing.T, cluster *framework.Cluster) client.Client {
	t.Helper()
	ctx := t.Context()
	c, err := cluster.NewClient(nil)
	require.NoError(t, err)
	crds, err := manifest.ReadDir(filepath.Join(cluster.Root(), "tests", "e2e", "testdata", "lifecycle-manager"))
	require.NoError(t, err)
	require.Len(t, crds, 2)
	require.NoError(t, cluster.Apply(ctx, "", crds...))
	t.Cleanup(func() {
		for _, crd := range crds {
			_ = c.Delete(context.Background(), crd)
		}
	})
	for _, crd := range crds {
		framework.WaitFor(t, 30*time.Second, "CRD "+crd.GetName()+" to be established", func(ctx context.Context) (bool, string, error) {
			got := &apiextensionsv1.CustomResourceDefinition{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(crd), got); err != nil {
				return false, "", err
			}
			for _, cond := range got.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					return true, "", nil
				}
			}
			return false, "not established", nil
		})
	}
	// A new client: its REST mapper learns the new kinds.
	c, err = cluster.NewClient(nil)
	require.NoError(t, err)
	ensureNamespace(t, c, "kcp-system")
	return c
}
