//go:build e2e

package e2e

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/kyma-project/serverless-manager/hack/render/manifests"
	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/pkg/manifest"
	"github.com/kyma-project/serverless-manager/tests/framework"
)

// `make render | kubectl apply --server-side -f -` installs what the manager
// needs; the manager then runs with the rendered ServiceAccount's rights and
// brings the default CR to Ready.
func TestRenderedInstallReachesReady(t *testing.T) {
	cluster := framework.ClusterFor(t)
	out, err := manifests.Build(filepath.Join(cluster.Root(), "config", "default"), "")
	require.NoError(t, err)
	objs, err := manifest.Decode(out)
	require.NoError(t, err)

	s := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(s))
	require.NoError(t, v1alpha1.AddToScheme(s))
	c, err := cluster.NewClient(s)
	require.NoError(t, err)
	// The manifest has no Namespace: the module namespace exists first.
	ensureNamespace(t, c, ns)
	require.NoError(t, cluster.Apply(t.Context(), ns, objs...))
	// The rendered ServiceAccount is the one the manager authenticates as.
	mgr, err := cluster.StartManager(t.Context(), "manager-"+t.Name(), nil)
	require.NoError(t, err)
	e := &env{t: t, cluster: cluster, c: c, mgr: mgr}
	t.Cleanup(func() {
		e.uninstallAll()
		assert.NoError(t, mgr.Stop())
	})
	e.applySample("default-serverless-cr.yaml")
	e.waitState("default", v1alpha1.StateReady)
}
