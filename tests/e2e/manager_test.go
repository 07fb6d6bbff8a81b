//go:build e2e

package e2e

// End-to-end tests of the Serverless Manager: bin/manager runs as its own
// ServiceAccount (RBAC from config/rbac) against the local cluster, installs
// the embedded chart, and the tests watch the result through the API.
// They share the kyma-system namespace, so they do not run in parallel.

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/hack/render/manifests"
	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/pkg/manifest"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
	"github.com/kyma-project/serverless-manager/tests/framework"
)

const (
	ns             = framework.ManagerNamespace
	controllerName = "serverless-ctrl-mngr"
	registryName   = "serverless-docker-registry"
	logConfigMap   = "serverless-configuration"
	registrySecret = "serverless-registry-config-default"
)

// env is one test's cluster, client and managers.
type env struct {
	t       *testing.T
	cluster *framework.Cluster
	c       client.Client
	// mgr is the manager the test works with now; its log goes into the
	// failure dumps and it runs the final uninstall.
	mgr *framework.Process
	// procs are all managers the test started: its cleanup stops every one,
	// so none outlives the test and fights the next test's manager.
	procs []*framework.Process
}

// newEnv is one test's client and its cleanup: when the test ends, a test
// that passed uninstalls every Serverless CR (its manager still runs, and
// nothing of the module may be left), every manager it started stops, and
// then whatever the test left is removed by force (framework.ResetModule),
// so that a failed test is reported once and the next one starts from a
// cluster without the module.
//
// The module's Pods go to the simulated nodes: most tests are about what
// the manager does with objects. Tests of what the module's Pods do move
// them to the real node first (env.placeModule).
func newEnv(t *testing.T) *env {
	t.Helper()
	cluster := framework.ClusterFor(t)
	require.NoError(t, cluster.PlacePods(t.Context(), ns, framework.Simulated))
	s := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(s))
	require.NoError(t, v1alpha1.AddToScheme(s))
	require.NoError(t, apiextensionsv1.AddToScheme(s))
	c, err := cluster.NewClient(s)
	require.NoError(t, err)
	e := &env{t: t, cluster: cluster, c: c}
	t.Cleanup(e.cleanup)
	return e
}

func (e *env) cleanup() {
	// A test that removed the module as Kyma does deleted the CRD itself.
	crd := &apiextensionsv1.CustomResourceDefinition{}
	err := e.c.Get(context.Background(), types.NamespacedName{Name: serverlessCRD}, crd)
	if !e.t.Failed() && err == nil && crd.DeletionTimestamp == nil {
		e.uninstallAll()
	}
	for _, p := range e.procs {
		if err := p.Stop(); err != nil {
			e.t.Errorf("stopping the manager: %v", err)
		}
	}
	removed, err := e.cluster.ResetModule(context.Background())
	if err != nil {
		e.t.Errorf("the next test would find the module of this one: %v", err)
	}
	if removed != "" {
		e.t.Logf("cleanup removed what the test left: %s", removed)
	}
}

// startManager installs CRD and RBAC from config/ and runs bin/manager as
// its ServiceAccount until the test ends; at the end every Serverless CR is
// deleted and the uninstall must leave nothing of the module behind.
func startManager(t *testing.T) *env {
	t.Helper()
	e := newEnv(t)
	require.NoError(t, e.cluster.InstallManagerPrerequisites(t.Context()))
	e.mgr = e.runManager("manager-"+t.Name(), nil)
	return e
}

// startManagerInCluster installs the manager as Kyma does (the rendered
// manifest, `make render`, with the chart's image keys pointed at the local
// images) with the module namespace on the real node: the manager runs as
// its Deployment's Pod there, from its image. It returns once that Pod is
// Ready. At the end a passing test's module is uninstalled by that manager,
// then the manifest is deleted. extraEnv (NAME=VALUE) is added to the
// manager's environment.
func startManagerInCluster(t *testing.T, extraEnv ...string) (*env, []*unstructured.Unstructured) {
	t.Helper()
	e := newEnv(t)
	e.placeModule(framework.RealNode)
	out, err := manifests.Build(filepath.Join(e.cluster.Root(), "config", "default"), "", append(e.cluster.LocalImageEnv(), extraEnv...)...)
	require.NoError(t, err)
	objs, err := manifest.Decode(out)
	require.NoError(t, err)
	require.NoError(t, e.cluster.Apply(t.Context(), ns, objs...))
	// Registered after newEnv's cleanup, so it runs first: the manager
	// uninstalls while it still runs, then goes with its manifest.
	t.Cleanup(func() {
		if !t.Failed() {
			e.uninstallAll()
		}
		e.deleteManifest(objs, serverlessCRD)
	})
	// Rolled out, not just a Ready Pod: a Pod of an earlier manager
	// Deployment may still be Ready (on a simulated node, at once).
	i := slices.IndexFunc(objs, func(o *unstructured.Unstructured) bool { return o.GetKind() == "Deployment" })
	require.GreaterOrEqual(t, i, 0, "the manager's manifest has a Deployment")
	framework.WaitFor(t, 3*time.Minute, "the manager's Deployment to run only its Pod, Ready", framework.RolledOut(e.c, ns, objs[i].GetName()),
		framework.DumpPods(e.c, ns), framework.DumpEvents(e.c, ns),
		e.cluster.DumpPodLogs(ns, map[string]string{"app.kubernetes.io/name": "serverless-manager"}, 30))
	return e, objs
}

// placeModule sends the Pods the manager installs in the module namespace
// (the Function controller, the registry) to p; before the install.
func (e *env) placeModule(p framework.Placement) {
	e.t.Helper()
	require.NoError(e.t, e.cluster.PlacePods(e.t.Context(), ns, p), "module Pods on %s", p)
}

// runManager starts one more bin/manager (see framework.Cluster.StartManager)
// that the test's cleanup stops, whatever the test did with it meanwhile.
func (e *env) runManager(name string, envVars []string, args ...string) *framework.Process {
	e.t.Helper()
	p, err := e.cluster.StartManager(e.t.Context(), name, envVars, args...)
	require.NoError(e.t, err)
	e.procs = append(e.procs, p)
	return p
}

func (e *env) dumps(name string) []func() string {
	return []func() string{
		framework.DumpObject(e.c, &v1alpha1.Serverless{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}),
		framework.DumpEvents(e.c, ns),
		e.managerLog(40),
	}
}

// managerLog is the end of the log of the manager the test works with: its
// process's, or its Pod's when it runs in the cluster.
func (e *env) managerLog(n int) func() string {
	if e.mgr == nil {
		return e.cluster.DumpPodLogs(ns, map[string]string{"app.kubernetes.io/name": "serverless-manager"}, n)
	}
	return framework.DumpLog(e.mgr, n)
}

func (e *env) get(name string) *v1alpha1.Serverless {
	e.t.Helper()
	cr := &v1alpha1.Serverless{}
	require.NoError(e.t, e.c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, cr))
	return cr
}

// waitFor waits until the CR satisfies ok; detail reports state and conditions.
func (e *env) waitFor(name, what string, timeout time.Duration, ok func(cr *v1alpha1.Serverless) bool) *v1alpha1.Serverless {
	e.t.Helper()
	cr := &v1alpha1.Serverless{}
	framework.WaitFor(e.t, timeout, what, func(ctx context.Context) (bool, string, error) {
		if err := e.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, cr); err != nil {
			return false, "", err
		}
		return ok(cr), describe(cr), nil
	}, e.dumps(name)...)
	return cr
}

func (e *env) waitState(name string, state v1alpha1.State) *v1alpha1.Serverless {
	e.t.Helper()
	return e.waitFor(name, fmt.Sprintf("Serverless %s to be %s", name, state), 2*time.Minute, func(cr *v1alpha1.Serverless) bool {
		return cr.Status.State == state && cr.Status.ObservedGeneration == cr.Generation
	})
}

func describe(cr *v1alpha1.Serverless) string {
	parts := []string{fmt.Sprintf("state=%s served=%s generation=%d observed=%d deleting=%t finalizers=%v",
		cr.Status.State, cr.Status.Served, cr.Generation, cr.Status.ObservedGeneration, cr.DeletionTimestamp != nil, cr.Finalizers)}
	for _, c := range cr.Status.Conditions {
		parts = append(parts, fmt.Sprintf("%s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message))
	}
	return strings.Join(parts, "; ")
}

// update changes the CR with retries on conflicts (the manager writes its status).
func (e *env) update(name string, change func(cr *v1alpha1.Serverless)) {
	e.t.Helper()
	cr := &v1alpha1.Serverless{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	require.NoError(e.t, e.edit(cr, func() { change(cr) }), "updating Serverless %s", name)
}

// edit reads obj by its key, applies change and updates it, starting over
// on conflicts: the manager and kube-controller-manager write the objects
// the tests edit (status, replicas), so a read is stale within moments.
func (e *env) edit(obj client.Object, change func()) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := e.c.Get(e.t.Context(), client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		change()
		return e.c.Update(e.t.Context(), obj)
	})
}

func (e *env) applySample(file string) {
	e.t.Helper()
	objs, err := manifest.ReadFile(filepath.Join(e.cluster.Root(), "config", "samples", file))
	require.NoError(e.t, err)
	require.NoError(e.t, e.cluster.Apply(e.t.Context(), ns, objs...))
}

func (e *env) controllerEnv() map[string]string {
	e.t.Helper()
	d := &appsv1.Deployment{}
	require.NoError(e.t, e.c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: controllerName}, d))
	out := map[string]string{}
	for _, v := range d.Spec.Template.Spec.Containers[0].Env {
		out[v.Name] = v.Value
	}
	return out
}

// uninstallAll deletes every Serverless CR and checks that nothing labelled
// as the module's is left.
func (e *env) uninstallAll() {
	ctx := context.Background()
	list := &v1alpha1.ServerlessList{}
	if err := e.c.List(ctx, list, client.InNamespace(ns)); err != nil {
		e.t.Errorf("listing Serverless CRs: %v", err)
		return
	}
	for i := range list.Items {
		_ = e.c.Delete(ctx, &list.Items[i])
	}
	start, crs := time.Now(), len(list.Items)
	err := framework.Poll(ctx, 2*time.Minute, "every Serverless CR to be gone", func(ctx context.Context) (bool, string, error) {
		if err := e.c.List(ctx, list, client.InNamespace(ns)); err != nil {
			return false, "", err
		}
		var left []string
		for _, cr := range list.Items {
			left = append(left, cr.Name+": "+describe(&cr))
		}
		return len(left) == 0, strings.Join(left, "\n"), nil
	}, e.managerLog(40))
	if err != nil {
		e.t.Error(err)
		return
	}
	e.t.Logf("the uninstall of %d Serverless CR(s) took %s", crs, time.Since(start).Round(time.Millisecond))
	for _, l := range []client.ObjectList{&appsv1.DeploymentList{}, &corev1.ConfigMapList{}, &corev1.SecretList{}, &corev1.ServiceList{}, &corev1.ServiceAccountList{}} {
		require.NoError(e.t, e.c.List(ctx, l, client.MatchingLabels{module.LabelManagedBy: module.ManagedBy}))
		assert.Zero(e.t, meta.LenList(l), "%T: objects of the module left after uninstall", l)
	}
}

func TestDefaultCRInstallsRepairsAndReconfigures(t *testing.T) {
	e := startManager(t)
	ctx := t.Context()

	e.applySample("default-serverless-cr.yaml")
	cr := e.waitState("default", v1alpha1.StateReady)
	assert.Equal(t, metav1.ConditionTrue, cr.Status.Served)
	assert.True(t, meta.IsStatusConditionTrue(cr.Status.Conditions, v1alpha1.ConditionInstalled))
	assert.Equal(t, "internal", cr.Status.DockerRegistry)
	assert.Equal(t, "L", cr.Status.DefaultRuntimePodPreset, "3 nodes: the large default")
	for _, name := range []string{controllerName, registryName} {
		d := &appsv1.Deployment{}
		require.NoError(t, e.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, d), name)
		assert.Equal(t, int32(1), d.Status.AvailableReplicas, name)
	}

	// A managed Deployment deleted by someone comes back within seconds.
	require.NoError(t, e.c.Delete(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: controllerName}}))
	framework.WaitFor(t, 10*time.Second, "the controller Deployment to be back", func(ctx context.Context) (bool, string, error) {
		d := &appsv1.Deployment{}
		err := e.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: controllerName}, d)
		return err == nil && d.DeletionTimestamp == nil, "", client.IgnoreNotFound(err)
	}, e.dumps("default")...)
	e.waitState("default", v1alpha1.StateReady)

	// The log level reaches the controller's configuration without touching its Deployment.
	d := &appsv1.Deployment{}
	require.NoError(t, e.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: controllerName}, d))
	generation := d.Generation
	e.update("default", func(cr *v1alpha1.Serverless) { cr.Spec.LogLevel = "debug" })
	framework.WaitFor(t, 10*time.Second, "logLevel debug in the controller's log configuration", func(ctx context.Context) (bool, string, error) {
		cm := &corev1.ConfigMap{}
		if err := e.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: logConfigMap}, cm); err != nil {
			return false, "", err
		}
		return strings.Contains(cm.Data["log-config.yaml"], "debug"), cm.Data["log-config.yaml"], nil
	}, e.dumps("default")...)
	cr = e.waitFor("default", "the status to show the log level", 30*time.Second, func(cr *v1alpha1.Serverless) bool {
		return cr.Status.LogLevel == "debug" && cr.Status.State == v1alpha1.StateReady
	})
	require.NoError(t, e.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: controllerName}, d))
	assert.Equal(t, generation, d.Generation, "a log level change must not roll the controller")

	// Preset defaults and numbers reach the controller's settings and the status.
	e.update("default", func(cr *v1alpha1.Serverless) {
		cr.Spec.DefaultRuntimePodPreset = "S"
		cr.Spec.DefaultBuildJobPreset = "fast"
		cr.Spec.FunctionBuildExecutorArgs = "--insecure,--cache=false"
		cr.Spec.FunctionBuildMaxSimultaneousJobs = ptrTo(intstr.FromString("9")) // upstream's CRD typed it as a string
	})
	cr = e.waitFor("default", "the presets in the status", time.Minute, func(cr *v1alpha1.Serverless) bool {
		return cr.Status.State == v1alpha1.StateReady && cr.Status.ObservedGeneration == cr.Generation && cr.Status.DefaultRuntimePodPreset == "S"
	})
	assert.Equal(t, "fast", cr.Status.DefaultBuildJobPreset)
	env := e.controllerEnv()
	assert.Equal(t, "--insecure,--cache=false", env["APP_FUNCTION_BUILD_EXECUTOR_ARGS"])
	assert.Equal(t, "9", env["APP_FUNCTION_BUILD_MAX_SIMULTANEOUS_JOBS"])
	assert.Regexp(t, `defaultPreset: "?S"?`, env["APP_FUNCTION_RESOURCE_CONFIG"])
	assert.Regexp(t, `defaultPreset: "?fast"?`, env["APP_FUNCTION_RESOURCE_CONFIG"])
}

func TestRegistrySwitches(t *testing.T) {
	e := startManager(t)
	ctx := t.Context()

	e.applySample("default-serverless-cr.yaml")
	e.waitState("default", v1alpha1.StateReady)
	secret := &corev1.Secret{}
	require.NoError(t, e.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: registrySecret}, secret))
	assert.Equal(t, "true", string(secret.Data["isInternal"]))

	// External with a Secret that does not exist yet: Error naming it.
	e.update("default", func(cr *v1alpha1.Serverless) {
		cr.Spec.DockerRegistry = &v1alpha1.DockerRegistry{EnableInternal: ptrTo(false), SecretName: ptrTo("my-registry")}
	})
	cr := e.waitState("default", v1alpha1.StateError)
	cond := meta.FindStatusCondition(cr.Status.Conditions, v1alpha1.ConditionConfigured)
	require.NotNil(t, cond)
	assert.Equal(t, metav1.ConditionFalse, cond.Status)
	assert.Equal(t, v1alpha1.ReasonConfigurationErr, cond.Reason, "upstream's reason")
	assert.Equal(t, v1alpha1.ReasonRegistrySecretError, v1alpha1.Cause(*cond), "the cause leads the message")
	assert.Contains(t, cond.Message, "my-registry")

	// Creating the Secret is enough; the CR is not touched.
	require.NoError(t, e.c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "my-registry"},
		StringData: map[string]string{"username": "robot", "password": "s3cret", "serverAddress": "registry.example.com", "registryAddress": "registry.example.com/team"}}))
	t.Cleanup(func() {
		_ = e.c.Delete(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "my-registry"}})
	})
	cr = e.waitState("default", v1alpha1.StateReady)
	assert.Equal(t, "registry.example.com", cr.Status.DockerRegistry)
	require.NoError(t, e.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: registrySecret}, secret))
	assert.Equal(t, "false", string(secret.Data["isInternal"]))
	assert.Equal(t, "registry.example.com/team", string(secret.Data["registryAddress"]))
	framework.WaitFor(t, 30*time.Second, "the internal registry to be pruned", func(ctx context.Context) (bool, string, error) {
		err := e.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: registryName}, &appsv1.Deployment{})
		return apierrors.IsNotFound(err), "", client.IgnoreNotFound(err)
	})

	// And back to internal.
	e.update("default", func(cr *v1alpha1.Serverless) {
		cr.Spec.DockerRegistry = &v1alpha1.DockerRegistry{EnableInternal: ptrTo(true)}
	})
	cr = e.waitFor("default", "the internal registry in use", 2*time.Minute, func(cr *v1alpha1.Serverless) bool {
		return cr.Status.State == v1alpha1.StateReady && cr.Status.ObservedGeneration == cr.Generation && cr.Status.DockerRegistry == "internal"
	})
	require.NoError(t, e.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: registrySecret}, secret))
	assert.Equal(t, "true", string(secret.Data["isInternal"]))
	require.NoError(t, e.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: registryName}, &appsv1.Deployment{}))
}

func TestSecondServerlessWaitsForTheFirst(t *testing.T) {
	e := startManager(t)
	ctx := t.Context()

	e.applySample("default-serverless-cr.yaml")
	e.waitState("default", v1alpha1.StateReady)
	second := &v1alpha1.Serverless{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "second"}, Spec: v1alpha1.ServerlessSpec{LogLevel: "warn"}}
	require.NoError(t, e.c.Create(ctx, second))
	cr := e.waitState("second", v1alpha1.StateWarning)
	cond := meta.FindStatusCondition(cr.Status.Conditions, v1alpha1.ConditionConfigured)
	require.NotNil(t, cond)
	assert.Equal(t, v1alpha1.ReasonServerlessDuplicated, cond.Reason)
	assert.Equal(t, metav1.ConditionFalse, cr.Status.Served)

	require.NoError(t, e.c.Delete(ctx, e.get("default")))
	e.waitFor("second", "the second CR to take over", 2*time.Minute, func(cr *v1alpha1.Serverless) bool {
		return cr.Status.Served == metav1.ConditionTrue && cr.Status.State == v1alpha1.StateReady && cr.Status.LogLevel == "warn"
	})
}

func ptrTo[T any](v T) *T { return &v }
