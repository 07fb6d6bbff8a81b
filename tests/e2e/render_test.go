//go:build e2e

package e2e

import "testing"

// `make render | kubectl apply --server-side -f -` installs what the manager
// needs; the manager then runs with the rendered ServiceAccount's rights and
// brings the default CR to Ready (installRendered: the manifest has no
// Namespace, so the module namespace exists first, and the manager
// authenticates as the rendered ServiceAccount).
func TestRenderedInstallReachesReady(t *testing.T) {
	installRendered(t)
}
