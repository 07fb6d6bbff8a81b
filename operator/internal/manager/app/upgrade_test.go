package app_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/reconciler"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/values"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
)

// A newer manager brings a newer chart: a broken one fails without losing
// the record of what is installed, a good one upgrades in place.
func TestUpgradeFailedThenFixed(t *testing.T) {
	env := startEnv(t)
	c := env.Client
	ctx := context.Background()

	stop := startManagerWithChart(t, env, "chart")
	require.NoError(t, c.Create(ctx, newCR("default", v1alpha1.ServerlessSpec{})))
	markAvailable(t, c, "fixture-controller")
	v1 := waitState(t, c, "default", v1alpha1.StateReady)
	require.Len(t, v1.Status.Inventory, 5)
	stop()

	stop = startManagerWithChart(t, env, "chart-broken")
	eventually(t, 20*time.Second, "the broken upgrade to fail", func() (bool, string) {
		cr := getCR(t, c, "default")
		cond := conditionOf(cr, v1alpha1.ConditionInstalled)
		return cr.Status.State == v1alpha1.StateError && v1alpha1.Cause(cond) == v1alpha1.ReasonApplyFailed &&
			strings.Contains(cond.Message, `Service "fixture-broken"`), describe(cr)
	})
	broken := getCR(t, c, "default")
	assert.Equal(t, v1.Status.Inventory, broken.Status.Inventory, "the previous inventory stays intact")
	stop()

	startManagerWithChart(t, env, "chart-v2")
	eventually(t, 20*time.Second, "the upgrade to roll the controller", func() (bool, string) {
		cr := getCR(t, c, "default")
		return cr.Status.ChartVersion == "0.0.2" && cr.Status.State == v1alpha1.StateProcessing, describe(cr)
	})
	markAvailable(t, c, "fixture-controller")
	cr := waitState(t, c, "default", v1alpha1.StateReady)
	assert.Len(t, cr.Status.Inventory, 5, "one object added, one pruned")

	d := &appsv1.Deployment{}
	require.NoError(t, c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "fixture-controller"}, d))
	assert.Equal(t, "CHART_GENERATION", d.Spec.Template.Spec.Containers[0].Env[2].Name)
	require.NoError(t, c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "fixture-added-in-v2"}, &corev1.ConfigMap{}))
	err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: module.RegistrySecretName}, &corev1.Secret{})
	assert.True(t, apierrors.IsNotFound(err), "the object that left the chart is pruned: %v", err)
	crd := &apiextensionsv1.CustomResourceDefinition{}
	require.NoError(t, c.Get(ctx, types.NamespacedName{Name: "widgets.fixture.example.com"}, crd))
	assert.Contains(t, crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties, "color", "the CRD gained its field")
}

func TestRolloutTimeoutIsAnError(t *testing.T) {
	env := startEnv(t)
	c := env.Client
	ctx := context.Background()
	startManagerWith(t, env, "chart", reconciler.Options{RolloutTimeout: 2 * time.Second})

	require.NoError(t, c.Create(ctx, newCR("default", v1alpha1.ServerlessSpec{})))
	cr := waitState(t, c, "default", v1alpha1.StateError)
	cond := conditionOf(cr, v1alpha1.ConditionInstalled)
	assert.Equal(t, v1alpha1.ReasonInstallationErr, cond.Reason, "upstream's reason")
	assert.Equal(t, v1alpha1.ReasonRolloutFailed, v1alpha1.Cause(cond))
	assert.Contains(t, cond.Message, "not ready 2s after the last change")
	assert.Contains(t, cond.Message, "Deployment kyma-system/fixture-controller")

	// It recovers by itself once the rollout completes.
	markAvailable(t, c, "fixture-controller")
	waitState(t, c, "default", v1alpha1.StateReady)
}

func TestTracingServiceIsNoticed(t *testing.T) {
	env := startEnv(t)
	c := env.Client
	ctx := context.Background()
	startManager(t, env)

	require.NoError(t, c.Create(ctx, newCR("default", v1alpha1.ServerlessSpec{})))
	markAvailable(t, c, "fixture-controller")
	cr := waitState(t, c, "default", v1alpha1.StateReady)
	assert.Empty(t, cr.Status.TracingEndpoint)

	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: values.TracingServiceName},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http-otlp", Port: 4318}}}}
	require.NoError(t, c.Create(ctx, svc))
	eventually(t, 10*time.Second, "the tracing endpoint", func() (bool, string) {
		cr := getCR(t, c, "default")
		return cr.Status.TracingEndpoint == values.TracingEndpoint(ns), cr.Status.TracingEndpoint
	})
}
