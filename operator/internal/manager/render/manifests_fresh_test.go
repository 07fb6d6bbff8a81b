package render_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/serverless-manager/tests/support/repo"
)

// The committed CRDs and ClusterRoles are what controller-gen makes of the
// API types and each binary's +kubebuilder:rbac markers today
// (hack/manifests.sh, the script `make manifests` runs), so a marker changed
// without regenerating fails here, not in a cluster.
func TestGeneratedManifestsAreFresh(t *testing.T) {
	root := repo.MustRoot()
	if _, err := os.Stat(filepath.Join(root, "bin", "assets", "controller-gen")); err != nil {
		t.Fatalf("no controller-gen in bin/assets: run `make tools` first")
	}
	out := t.TempDir()
	cmd := exec.Command(filepath.Join(root, "hack", "manifests.sh"), out)
	cmd.Dir = root
	msg, err := cmd.CombinedOutput()
	require.NoError(t, err, "hack/manifests.sh: %s", msg)

	for _, committed := range []string{
		"config/crd/bases/operator.kyma-project.io_serverlesses.yaml",
		"charts/serverless/crds/serverless.kyma-project.io_functions.yaml",
		"config/rbac/role.yaml", "config/rbac/role_namespaced.yaml", roleFile, activatorRoleFile,
	} {
		t.Run(committed, func(t *testing.T) {
			got, err := os.ReadFile(filepath.Join(out, committed))
			require.NoError(t, err)
			want, err := os.ReadFile(filepath.Join(root, committed))
			require.NoError(t, err)
			assert.Equal(t, string(want), string(got), "%s is stale: run `make manifests`", committed)
		})
	}
}
