package v1alpha1_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/tests/support/testenv"
)

// Anyone who may write serverlesses/status can write the inventory; the
// schema keeps what they write small and shaped like the manager's IDs.
func TestInventoryBounds(t *testing.T) {
	env := testenv.Start(t, "config/crd/bases")
	ctx := context.Background()
	c := env.Client
	require.NoError(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kyma-system"}}))
	cr := &v1alpha1.Serverless{ObjectMeta: metav1.ObjectMeta{Namespace: "kyma-system", Name: "default"}}
	require.NoError(t, c.Create(ctx, cr))

	entry := func(id string) v1alpha1.InventoryEntry {
		return v1alpha1.InventoryEntry{ID: id, Digest: "0123456789abcdef01234567", Version: "g1"}
	}
	many := make([]v1alpha1.InventoryEntry, 257)
	for i := range many {
		many[i] = entry(fmt.Sprintf("/ConfigMap/kyma-system/cm-%d", i))
	}
	tests := []struct {
		name      string
		inventory []v1alpha1.InventoryEntry
		wantErr   string // substring naming the field; empty = accepted
	}{
		{"chart objects", []v1alpha1.InventoryEntry{
			entry("apiextensions.k8s.io/CustomResourceDefinition//functions.serverless.kyma-project.io"),
			entry("/Secret/kyma-system/serverless-registry-config-default"),
			entry("rbac.authorization.k8s.io/ClusterRole//serverless:function-controller"),
		}, ""},
		{"not an ID", []v1alpha1.InventoryEntry{entry("garbage")}, "status.inventory[0].id"},
		{"a slash too many", []v1alpha1.InventoryEntry{entry("/Secret/kyma-system/a/b")}, "status.inventory[0].id"},
		{"upper-case namespace", []v1alpha1.InventoryEntry{entry("/Secret/Kyma/a")}, "status.inventory[0].id"},
		{"ID too long", []v1alpha1.InventoryEntry{entry("/ConfigMap/kyma-system/" + strings.Repeat("a", 640))}, "status.inventory[0].id"},
		{"digest too long", []v1alpha1.InventoryEntry{{ID: "/ConfigMap/kyma-system/a", Digest: strings.Repeat("a", 65)}}, "status.inventory[0].digest"},
		{"version too long", []v1alpha1.InventoryEntry{{ID: "/ConfigMap/kyma-system/a", Digest: "d", Version: strings.Repeat("1", 65)}}, "status.inventory[0].version"},
		{"too many entries", many, "status.inventory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := &v1alpha1.Serverless{}
			require.NoError(t, c.Get(ctx, ctrlclient.ObjectKeyFromObject(cr), got))
			got.Status.Inventory = tt.inventory
			err := c.Status().Update(ctx, got)
			if tt.wantErr == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
		})
	}
}
