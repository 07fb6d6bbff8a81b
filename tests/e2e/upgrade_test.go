//go:build e2e

package e2e

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/pkg/manifest"
	"github.com/kyma-project/serverless-manager/tests/framework"
)

// The module installed by an older manager (chart 0.9.0: an extra ConfigMap,
// no Busola extension, a Function CRD without secretMounts) is upgraded in
// place by the current one: CRD updated, object added, object pruned, the
// controller Deployment never deleted.
func TestUpgradeFromThePreviousChart(t *testing.T) {
	e := startManager(t)
	ctx := t.Context()
	require.NoError(t, e.mgr.Stop())
	// The previous manager held the permissions its chart grants.
	previousRBAC, err := manifest.ReadFile(filepath.Join(e.cluster.Root(), "tests", "e2e", "testdata", "manager-previous-rbac.yaml"))
	require.NoError(t, err)
	require.NoError(t, e.cluster.Apply(ctx, ns, previousRBAC...))
	t.Cleanup(func() { // also when the test fails before it takes them away
		for _, o := range previousRBAC {
			_ = e.c.Delete(context.Background(), o)
		}
	})
	old := e.runManager("manager-"+t.Name()+"-previous",
		[]string{"CHART_PATH=" + filepath.Join(e.cluster.Root(), "tests", "e2e", "testdata", "chart-previous")})
	e.mgr = old
	e.applySample("default-serverless-cr.yaml")
	cr := e.waitFor("default", "the previous chart to be Ready", 2*time.Minute, func(cr *v1alpha1.Serverless) bool {
		return cr.Status.ChartVersion == "0.9.0" && cr.Status.State == v1alpha1.StateReady
	})
	require.NoError(t, e.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "serverless-legacy-settings"}, &corev1.ConfigMap{}))
	d := &appsv1.Deployment{}
	require.NoError(t, e.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: controllerName}, d))
	uid := d.UID
	require.NoError(t, old.Stop())
	for _, o := range previousRBAC {
		require.NoError(t, client.IgnoreNotFound(e.c.Delete(ctx, o)), "the current manager runs with today's RBAC only")
	}

	e.mgr = e.runManager("manager-"+t.Name(), nil)
	cr = e.waitFor("default", "the upgrade to be Ready", 2*time.Minute, func(cr *v1alpha1.Serverless) bool {
		return cr.Status.ChartVersion == "1.0.0" && cr.Status.State == v1alpha1.StateReady
	})
	framework.WaitFor(t, 30*time.Second, "the legacy ConfigMap to be pruned", func(ctx context.Context) (bool, string, error) {
		err := e.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "serverless-legacy-settings"}, &corev1.ConfigMap{})
		return apierrors.IsNotFound(err), "", client.IgnoreNotFound(err)
	})
	require.NoError(t, e.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "functions"}, &corev1.ConfigMap{}), "the Busola extension is added")
	crd := &apiextensionsv1.CustomResourceDefinition{}
	require.NoError(t, e.c.Get(ctx, types.NamespacedName{Name: "functions.serverless.kyma-project.io"}, crd))
	assert.Contains(t, crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties, "secretMounts", "the CRD gained its field")
	require.NoError(t, e.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: controllerName}, d))
	assert.Equal(t, uid, d.UID, "the controller is updated in place, not recreated")
	// The chart now renders serverless-operator's selector; this install
	// keeps its own (immutable), which the new Pod labels still satisfy.
	assert.Equal(t, map[string]string{"app.kubernetes.io/name": "serverless", "app.kubernetes.io/component": "controller", "app.kubernetes.io/instance": "serverless"},
		d.Spec.Selector.MatchLabels)
	assert.Equal(t, "serverless", d.Spec.Template.Labels["app"], "the Pods carry the new selector's labels too")
	e.requireConsistent(ctx, cr)
}
