package app_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/reconciler"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
	"github.com/kyma-project/serverless-manager/tests/support/testenv"
)

func conditionOf(cr *v1alpha1.Serverless, t string) metav1.Condition {
	if c := meta.FindStatusCondition(cr.Status.Conditions, t); c != nil {
		return *c
	}
	return metav1.Condition{}
}

func TestOnlyOneServerlessIsServed(t *testing.T) {
	env := startEnv(t)
	c := env.Client
	ctx := context.Background()
	startManager(t, env)

	require.NoError(t, c.Create(ctx, newCR("default", v1alpha1.ServerlessSpec{})))
	markAvailable(t, c, "fixture-controller")
	waitState(t, c, "default", v1alpha1.StateReady)

	require.NoError(t, c.Create(ctx, newCR("second", v1alpha1.ServerlessSpec{LogLevel: "debug"})))
	second := waitState(t, c, "second", v1alpha1.StateWarning)
	assert.Equal(t, metav1.ConditionFalse, second.Status.Served)
	cond := conditionOf(second, v1alpha1.ConditionConfigured)
	assert.Equal(t, v1alpha1.ReasonServerlessDuplicated, cond.Reason)
	assert.Contains(t, cond.Message, "kyma-system/default is served")
	assert.NotContains(t, second.Finalizers, module.Finalizer, "an unserved CR must never block its deletion")

	// The served one goes; the second takes over and installs its configuration.
	require.NoError(t, c.Delete(ctx, getCR(t, c, "default")))
	eventually(t, 20*time.Second, "the second CR to be served", func() (bool, string) {
		cr := getCR(t, c, "second")
		return cr.Status.Served == metav1.ConditionTrue && cr.Status.State == v1alpha1.StateProcessing, describe(cr)
	})
	markAvailable(t, c, "fixture-controller")
	eventually(t, 20*time.Second, "the second CR to be Ready", func() (bool, string) {
		cr := getCR(t, c, "second")
		return cr.Status.Served == metav1.ConditionTrue && cr.Status.State == v1alpha1.StateReady && cr.Status.LogLevel == "debug", describe(cr)
	})
}

func TestExternalRegistrySecretIsWatched(t *testing.T) {
	env := startEnv(t)
	c := env.Client
	ctx := context.Background()
	startManager(t, env)

	require.NoError(t, c.Create(ctx, newCR("default", v1alpha1.ServerlessSpec{DockerRegistry: &v1alpha1.DockerRegistry{SecretName: ptr.To("my-registry")}})))
	cr := waitState(t, c, "default", v1alpha1.StateError)
	cond := conditionOf(cr, v1alpha1.ConditionConfigured)
	assert.Equal(t, metav1.ConditionFalse, cond.Status)
	assert.Equal(t, v1alpha1.ReasonConfigurationErr, cond.Reason, "upstream's reason")
	assert.Equal(t, v1alpha1.ReasonRegistrySecretError, v1alpha1.Cause(cond))
	assert.Contains(t, cond.Message, "kyma-system/my-registry not found")

	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "my-registry"},
		StringData: map[string]string{"username": "robot", "password": "p,1"}}
	require.NoError(t, c.Create(ctx, secret))
	eventually(t, 10*time.Second, "the message to name the missing keys", func() (bool, string) {
		cr := getCR(t, c, "default")
		msg := conditionOf(cr, v1alpha1.ConditionConfigured).Message
		return strings.Contains(msg, "lacks the keys registryAddress, serverAddress"), msg
	})

	secret.StringData = map[string]string{"serverAddress": "registry.example:5000", "registryAddress": "registry.example:5000/team"}
	require.NoError(t, c.Update(ctx, secret))
	markAvailable(t, c, "fixture-controller")
	cr = waitState(t, c, "default", v1alpha1.StateReady)
	assert.Equal(t, "registry.example:5000", cr.Status.DockerRegistry)
	reg := &corev1.Secret{}
	require.NoError(t, c.Get(ctx, types.NamespacedName{Namespace: ns, Name: module.RegistrySecretName}, reg))
	assert.Equal(t, "p,1", string(reg.Data["password"]))
	assert.Equal(t, "registry.example:5000/team", string(reg.Data["registryAddress"]))
}

func TestInternalRegistryCredentialsAreStable(t *testing.T) {
	env := startEnv(t)
	c := env.Client
	ctx := context.Background()
	startManager(t, env)

	require.NoError(t, c.Create(ctx, newCR("default", v1alpha1.ServerlessSpec{DockerRegistry: &v1alpha1.DockerRegistry{EnableInternal: ptr.To(true)}})))
	markAvailable(t, c, "fixture-controller")
	cr := waitState(t, c, "default", v1alpha1.StateReady)
	assert.Equal(t, "internal", cr.Status.DockerRegistry)
	reg := &corev1.Secret{}
	require.NoError(t, c.Get(ctx, types.NamespacedName{Namespace: ns, Name: module.RegistrySecretName}, reg))
	user, pass := string(reg.Data["username"]), string(reg.Data["password"])
	require.NotEmpty(t, user)
	require.NotEmpty(t, pass)

	// Other changes re-render; the credentials stay.
	updateCR(t, c, "default", func(cr *v1alpha1.Serverless) { cr.Spec.LogLevel = "warn" })
	waitState(t, c, "default", v1alpha1.StateReady)
	eventually(t, 5*time.Second, "the new log level", func() (bool, string) {
		return getCR(t, c, "default").Status.LogLevel == "warn", ""
	})
	require.NoError(t, c.Get(ctx, types.NamespacedName{Namespace: ns, Name: module.RegistrySecretName}, reg))
	assert.Equal(t, user, string(reg.Data["username"]))
	assert.Equal(t, pass, string(reg.Data["password"]))
}

func TestPauseStopsChanges(t *testing.T) {
	env := startEnv(t)
	c := env.Client
	ctx := context.Background()
	startManager(t, env)

	require.NoError(t, c.Create(ctx, newCR("default", v1alpha1.ServerlessSpec{})))
	markAvailable(t, c, "fixture-controller")
	waitState(t, c, "default", v1alpha1.StateReady)

	updateCR(t, c, "default", func(cr *v1alpha1.Serverless) {
		cr.Annotations = map[string]string{module.PauseAnnotation: module.PausedValue}
		cr.Spec.LogLevel = "error"
	})
	eventually(t, 10*time.Second, "the paused state", func() (bool, string) {
		cr := getCR(t, c, "default")
		return cr.Status.State == v1alpha1.StateWarning && conditionOf(cr, v1alpha1.ConditionInstalled).Reason == v1alpha1.ReasonPaused, describe(cr)
	})
	time.Sleep(500 * time.Millisecond)
	cm := &corev1.ConfigMap{}
	require.NoError(t, c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "fixture-log-config"}, cm))
	assert.Contains(t, cm.Data["log-config.yaml"], "logLevel: info", "nothing may change while paused")

	updateCR(t, c, "default", func(cr *v1alpha1.Serverless) { delete(cr.Annotations, module.PauseAnnotation) })
	eventually(t, 10*time.Second, "the change to land after resuming", func() (bool, string) {
		require.NoError(t, c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "fixture-log-config"}, cm))
		return strings.Contains(cm.Data["log-config.yaml"], "logLevel: error"), cm.Data["log-config.yaml"]
	})
	waitState(t, c, "default", v1alpha1.StateReady)
}

func TestUninstallWaitsForFunctions(t *testing.T) {
	env := testenv.Start(t, "config/crd/bases", "operator/internal/manager/app/testdata/functions-crd")
	c := env.Client
	ctx := context.Background()
	for _, n := range []string{ns, "team-a"} {
		require.NoError(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}))
	}
	// No planned recheck within the test: the Function's deletion itself
	// must resume the uninstall.
	startManagerWith(t, env, "chart", reconciler.Options{FunctionsRecheck: time.Hour})

	require.NoError(t, c.Create(ctx, newCR("default", v1alpha1.ServerlessSpec{})))
	markAvailable(t, c, "fixture-controller")
	waitState(t, c, "default", v1alpha1.StateReady)

	fn := &unstructured.Unstructured{}
	fn.SetAPIVersion("serverless.kyma-project.io/v1alpha2")
	fn.SetKind("Function")
	fn.SetNamespace("team-a")
	fn.SetName("hello")
	require.NoError(t, c.Create(ctx, fn))
	// A copy the Function controller would have made in a user namespace.
	copied := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "dockerfile-nodejs22", Labels: module.Labels()}}
	require.NoError(t, c.Create(ctx, copied))
	userSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "user-secret"}}
	require.NoError(t, c.Create(ctx, userSecret))

	require.NoError(t, c.Delete(ctx, getCR(t, c, "default")))
	eventually(t, 10*time.Second, "the uninstall to be held back", func() (bool, string) {
		cr := getCR(t, c, "default")
		cond := conditionOf(cr, v1alpha1.ConditionDeleted)
		return cr.Status.State == v1alpha1.StateWarning && cond.Reason == v1alpha1.ReasonDeletionErr &&
			cond.Message == "FunctionsExist: 1 Functions still exist (team-a/hello); delete them to uninstall", describe(cr)
	})
	time.Sleep(time.Second)
	assert.NotEmpty(t, resourceVersions(t, c), "nothing may be removed while Functions exist")

	require.NoError(t, c.Delete(ctx, fn))
	eventually(t, 20*time.Second, "the uninstall to finish", func() (bool, string) {
		err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "default"}, &v1alpha1.Serverless{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	assert.True(t, apierrors.IsNotFound(c.Get(ctx, types.NamespacedName{Namespace: "team-a", Name: "dockerfile-nodejs22"}, &corev1.ConfigMap{})), "copies in user namespaces are removed")
	assert.NoError(t, c.Get(ctx, types.NamespacedName{Namespace: "team-a", Name: "user-secret"}, &corev1.Secret{}), "user Secrets stay")
	assert.Empty(t, resourceVersions(t, c))
}
