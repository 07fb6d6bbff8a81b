package render_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/serverless-manager/operator/pkg/repo"
)

// The committed ClusterRoles are what controller-gen makes of each binary's
// +kubebuilder:rbac markers today (the same runs as `make manifests`), so a
// marker added without regenerating fails here, not in a cluster.
func TestGeneratedClusterRolesAreFresh(t *testing.T) {
	root := repo.MustRoot()
	controllerGen := filepath.Join(root, "bin", "assets", "controller-gen")
	if _, err := os.Stat(controllerGen); err != nil {
		t.Fatalf("no controller-gen at %s: run `make tools` first", controllerGen)
	}
	tests := []struct {
		name, roleName, paths, committed string
	}{
		{"manager", "serverless-manager", "./operator/cmd/manager/...;./operator/internal/manager/...", "config/rbac/role.yaml"},
		{"function-controller", "serverless", "./operator/cmd/function-controller/...;./operator/internal/function/...", roleFile},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := t.TempDir()
			cmd := exec.Command(controllerGen, "rbac:roleName="+tt.roleName, "paths="+tt.paths, "output:rbac:artifacts:config="+out)
			cmd.Dir = root
			msg, err := cmd.CombinedOutput()
			require.NoError(t, err, "controller-gen: %s", msg)
			got, err := os.ReadFile(filepath.Join(out, "role.yaml"))
			require.NoError(t, err)
			want, err := os.ReadFile(filepath.Join(root, tt.committed))
			require.NoError(t, err)
			assert.Equal(t, string(got), string(want), "%s is stale: run `make manifests`", tt.committed)
		})
	}
}
