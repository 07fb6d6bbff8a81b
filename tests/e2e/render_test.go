//go:build e2e

package e2e

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
)

// `make render | kubectl apply --server-side -f -` installs what the manager
// needs; the manager then runs with the rendered ServiceAccount's rights and
// brings the default CR to Ready.
func TestRenderedInstallReachesReady(t *testing.T) {
	e := newEnv(t)
	objs := renderedInstall(t, e.cluster)
	// The manifest has no Namespace: the module namespace exists first.
	ensureNamespace(t, e.c, ns)
	require.NoError(t, e.cluster.Apply(t.Context(), ns, objs...))
	// The rendered ServiceAccount is the one the manager authenticates as.
	e.mgr = e.runManager("manager-"+t.Name(), nil)
	e.applySample("default-serverless-cr.yaml")
	e.waitState("default", v1alpha1.StateReady)
}
