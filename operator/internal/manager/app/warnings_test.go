package app_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kyma-project/serverless-manager/charts"
	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/reconciler"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
)

// The module's chart brings the admission policy that warns about
// Functions, and its binding; the manager applies both with the rest, and
// the uninstall removes them (their kinds are in the kinds table).
func TestFunctionWarningPolicyComesAndGoesWithTheModule(t *testing.T) {
	env := startEnv(t)
	c := env.Client
	ctx := context.Background()
	startManagerWithFS(t, env, charts.Serverless(), reconciler.Options{})
	require.NoError(t, c.Create(ctx, newCR("default", v1alpha1.ServerlessSpec{})))
	eventually(t, 60*time.Second, "the module to be Ready", func() (bool, string) {
		cr := getCR(t, c, "default")
		if cr.Status.State == v1alpha1.StateProcessing {
			markChartAvailable(t, c)
		}
		return cr.Status.State == v1alpha1.StateReady && cr.Status.ObservedGeneration == cr.Generation, describe(cr)
	})

	policy := func(kind string) (*metav1.PartialObjectMetadata, error) {
		o := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: kind}}
		return o, c.Get(ctx, types.NamespacedName{Name: "serverless-function-warnings"}, o)
	}
	kinds := []string{"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}
	ids := map[string]bool{}
	for _, e := range getCR(t, c, "default").Status.Inventory {
		ids[e.ID] = true
	}
	for _, kind := range kinds {
		o, err := policy(kind)
		require.NoError(t, err, kind)
		assert.Equal(t, module.ManagedBy, o.Labels[module.LabelManagedBy], kind)
		assert.True(t, ids["admissionregistration.k8s.io/"+kind+"//serverless-function-warnings"], "%s in the inventory", kind)
	}

	require.NoError(t, c.Delete(ctx, getCR(t, c, "default")))
	eventually(t, 60*time.Second, "the CR to be gone", func() (bool, string) {
		err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "default"}, &v1alpha1.Serverless{})
		return apierrors.IsNotFound(err), "still there"
	})
	for _, kind := range kinds {
		_, err := policy(kind)
		assert.True(t, apierrors.IsNotFound(err), "%s removed: %v", kind, err)
	}
	assert.Empty(t, resourceVersions(t, c), "nothing labelled as the module's may remain")
}
