//go:build e2e

package e2e

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// `make render | kubectl apply --server-side -f -` installs what the manager
// needs; the manager then runs with the rendered ServiceAccount's rights and
// brings the default CR to Ready (installRendered: the manifest has no
// Namespace, so the module namespace exists first, and the manager
// authenticates as the rendered ServiceAccount). The install goes as it
// came, the CR first and then the manifest: the manifest's Deployment would
// otherwise keep its simulated Pod, Ready, where later tests look for the
// manager's Pod.
func TestRenderedInstallReachesReady(t *testing.T) {
	e, objs := installRendered(t)
	e.uninstallAll()
	require.NoError(t, e.mgr.Stop())
	e.deleteManifest(objs)
}
