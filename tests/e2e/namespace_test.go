//go:build e2e

package e2e

// The module installed where the served Serverless CR is, outside the
// manager's namespace: there the Function controller and the internal
// registry run as real Pods on the real node, build a user's Function and
// run it; the CR's deletion, or its namespace's, leaves nothing behind.

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/pkg/kinds"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
	"github.com/kyma-project/serverless-manager/tests/framework"
)

// managerBinding is the RoleBinding the manager creates in a module
// namespace other than its own (config/rbac binds it in its own).
const managerBinding = "serverless-manager-namespaced"

// moduleObjectsIn lists what is labelled as the module's in namespace, of
// every namespaced managed kind, as Kind/name.
func (e *env) moduleObjectsIn(namespace string) []string {
	e.t.Helper()
	var out []string
	for _, k := range kinds.Managed() {
		if !k.Namespaced {
			continue
		}
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(k.GVK.GroupVersion().WithKind(k.GVK.Kind + "List"))
		require.NoError(e.t, e.c.List(e.t.Context(), list, client.InNamespace(namespace), client.MatchingLabels(module.Labels())))
		for _, o := range list.Items {
			out = append(out, k.GVK.Kind+"/"+o.Name)
		}
	}
	return out
}

// A Serverless CR outside the manager's namespace is served as upstream's
// operator serves it: the module is installed into the CR's namespace (the
// manager, running under its own RBAC from config/rbac, binds its namespaced
// role there), becomes Ready, and the CR's deletion leaves nothing of the
// module there, the manager's RoleBinding included; a CR that waited in
// kyma-system takes over.
func TestServerlessInAnotherNamespace(t *testing.T) {
	e := startManager(t)
	ctx := t.Context()
	// The module's Pods there run on the real node (kyma-system's stay on
	// the simulated ones: newEnv).
	team := e.cluster.Namespace(t, "team")
	require.NoError(t, e.cluster.PlacePods(ctx, team, framework.RealNode))
	key := types.NamespacedName{Namespace: team, Name: "default"}
	dumps := []func() string{
		framework.DumpObject(e.c, &v1alpha1.Serverless{ObjectMeta: metav1.ObjectMeta{Namespace: team, Name: "default"}}),
		framework.DumpEvents(e.c, team),
		e.managerLog(60),
	}
	waitCR := func(what string, ok func(cr *v1alpha1.Serverless) bool) *v1alpha1.Serverless {
		t.Helper()
		cr := &v1alpha1.Serverless{}
		framework.WaitFor(t, 2*time.Minute, what, func(ctx context.Context) (bool, string, error) {
			if err := e.c.Get(ctx, key, cr); err != nil {
				return false, "", err
			}
			return ok(cr), describe(cr), nil
		}, dumps...)
		return cr
	}

	// The sample CR of docs/user/resources/06-20-serverless-cr.md, in another namespace.
	cr := &v1alpha1.Serverless{ObjectMeta: metav1.ObjectMeta{Namespace: team, Name: "default"},
		Spec: v1alpha1.ServerlessSpec{DockerRegistry: &v1alpha1.DockerRegistry{EnableInternal: ptrTo(true)}}}
	require.NoError(t, e.c.Create(ctx, cr))
	cr = waitCR("the CR in "+team+" to be Ready", func(cr *v1alpha1.Serverless) bool {
		return cr.Status.State == v1alpha1.StateReady && cr.Status.ObservedGeneration == cr.Generation
	})
	assert.Equal(t, metav1.ConditionTrue, cr.Status.Served)
	assert.Equal(t, "internal", cr.Status.DockerRegistry)
	for _, name := range []string{controllerName, registryName} {
		d := &appsv1.Deployment{}
		require.NoError(t, e.c.Get(ctx, types.NamespacedName{Namespace: team, Name: name}, d), name)
		assert.Equal(t, int32(1), d.Status.AvailableReplicas, name)
	}
	assert.Equal(t, team, e.controllerEnvIn(team)["APP_KUBERNETES_BASE_NAMESPACE"], "the controller's base namespace is the module's")
	assert.Empty(t, e.moduleObjectsIn(ns), "nothing of the module in the manager's namespace")
	rb := &rbacv1.RoleBinding{}
	require.NoError(t, e.c.Get(ctx, types.NamespacedName{Namespace: team, Name: managerBinding}, rb))
	assert.Equal(t, rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: managerBinding}, rb.RoleRef)
	assert.Equal(t, []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: module.Manager().ServiceAccount, Namespace: ns}}, rb.Subjects)

	// The Function controller of that installation (its Pod in team, under
	// its ServiceAccount there) builds a Function of a user namespace from
	// the copies of team's base objects, pushes it to team's registry, and
	// the Function's Pod runs it and answers.
	f := e.functionControllerIn(team)
	fnNS := e.cluster.Namespace(t, "functions")
	require.NoError(t, f.fcs.Create(ctx, inline(fnNS, "hello", v1alpha2.RuntimeNodejs22, "hello from "+team)))
	fnDumps := append(f.dumpsFor(fnNS, "hello"), e.cluster.DumpPodLogs(team, controllerLabels, 40))
	fn := &v1alpha2.Function{}
	framework.WaitFor(t, 3*time.Minute, "Function "+fnNS+"/hello to be Running", func(ctx context.Context) (bool, string, error) {
		if err := f.fcs.Get(ctx, types.NamespacedName{Namespace: fnNS, Name: "hello"}, fn); err != nil {
			return false, "", err
		}
		return isRunning(fn), describeFunction(fn), nil
	}, fnDumps...)
	assert.Equal(t, 1, f.jobs.count(fnNS, "hello"), "one build")
	registry := &corev1.Service{}
	require.NoError(t, e.c.Get(ctx, types.NamespacedName{Namespace: team, Name: module.RegistryServiceName}, registry))
	require.NotEmpty(t, registry.Spec.Ports)
	assert.True(t, strings.HasPrefix(fn.Status.BuiltImage, fmt.Sprintf("localhost:%d/", registry.Spec.Ports[0].NodePort)),
		"the image %s is pulled from %s's registry (its NodePort)", fn.Status.BuiltImage, team)
	e.cluster.WaitForAnswer(t, time.Minute, fnNS, "hello", "/", func(body string) bool { return body == "hello from "+team }, fnDumps...)
	require.NoError(t, f.fcs.Delete(ctx, &v1alpha2.Function{ObjectMeta: metav1.ObjectMeta{Namespace: fnNS, Name: "hello"}}))
	f.waitFunctionGone(fnNS, "hello")

	// Drift in that namespace is seen: the manager's watches are there.
	before := &appsv1.Deployment{}
	require.NoError(t, e.c.Get(ctx, types.NamespacedName{Namespace: team, Name: controllerName}, before))
	require.NoError(t, e.c.Delete(ctx, before))
	// Its new Pod really starts: image cached, but the probes take their time.
	framework.WaitFor(t, 2*time.Minute, "a new controller Deployment to be available in "+team, func(ctx context.Context) (bool, string, error) {
		d := &appsv1.Deployment{}
		err := e.c.Get(ctx, types.NamespacedName{Namespace: team, Name: controllerName}, d)
		return err == nil && d.UID != before.UID && d.Status.AvailableReplicas == 1, "", client.IgnoreNotFound(err)
	}, dumps...)
	waitCR("the CR to be Ready again", func(cr *v1alpha1.Serverless) bool { return cr.Status.State == v1alpha1.StateReady })

	// The binding forced away by someone (deleted, finalizer removed) comes
	// back: the manager's watch there still reports it, and it may create
	// RoleBindings anywhere.
	require.NoError(t, e.c.Delete(ctx, rb))
	require.NoError(t, e.edit(rb, func() { rb.Finalizers = nil }))
	framework.WaitFor(t, 30*time.Second, "the manager's RoleBinding to be back in "+team, func(ctx context.Context) (bool, string, error) {
		again := &rbacv1.RoleBinding{}
		err := e.c.Get(ctx, types.NamespacedName{Namespace: team, Name: managerBinding}, again)
		return err == nil && again.UID != rb.UID, "", client.IgnoreNotFound(err)
	}, dumps...)

	// One CR per cluster: the usual kyma-system/default waits.
	e.applySample("default-serverless-cr.yaml")
	waiting := e.waitState("default", v1alpha1.StateWarning)
	assert.Equal(t, metav1.ConditionFalse, waiting.Status.Served)
	assert.Contains(t, describe(waiting), team+"/default is served")

	// Deleted cleanly: nothing of the module left there, nor the binding.
	require.NoError(t, e.c.Delete(ctx, cr))
	framework.WaitFor(t, 2*time.Minute, "the CR in "+team+" to be gone", func(ctx context.Context) (bool, string, error) {
		err := e.c.Get(ctx, key, cr)
		if apierrors.IsNotFound(err) {
			return true, "", nil
		}
		return false, describe(cr), err
	}, dumps...)
	assert.Empty(t, e.moduleObjectsIn(team), "objects of the module left in %s", team)
	assert.Empty(t, e.moduleObjectsIn(fnNS), "copies of the module's base objects left in %s", fnNS)
	err := e.c.Get(ctx, types.NamespacedName{Namespace: team, Name: managerBinding}, rb)
	assert.True(t, apierrors.IsNotFound(err), "the manager's RoleBinding in %s: %v", team, err)

	// The waiting CR takes over and installs into kyma-system (the test's
	// cleanup uninstalls it and checks that nothing is left anywhere).
	taken := e.waitFor("default", "kyma-system/default to take over", 2*time.Minute, func(cr *v1alpha1.Serverless) bool {
		return cr.Status.Served == metav1.ConditionTrue && cr.Status.State == v1alpha1.StateReady && cr.Status.ObservedGeneration == cr.Generation
	})
	assert.Equal(t, "internal", taken.Status.DockerRegistry)
	require.NoError(t, e.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: controllerName}, &appsv1.Deployment{}))
	assert.Empty(t, e.moduleObjectsIn(team), "the module stays out of %s", team)
}

// controllerEnvIn returns the env of the controller Deployment in namespace.
func (e *env) controllerEnvIn(namespace string) map[string]string {
	e.t.Helper()
	d := &appsv1.Deployment{}
	require.NoError(e.t, e.c.Get(e.t.Context(), types.NamespacedName{Namespace: namespace, Name: controllerName}, d))
	out := map[string]string{}
	for _, v := range d.Spec.Template.Spec.Containers[0].Env {
		out[v.Name] = v.Value
	}
	return out
}

// Deleting the namespace of the served CR uninstalls the module from it:
// the namespace controller deletes the manager's RoleBinding with
// everything else, but its finalizer keeps the manager's rights until the
// uninstall there is done, so the namespace goes, and nothing of the module
// is left (its cluster-scoped objects included).
func TestNamespaceOfTheServedCRDeleted(t *testing.T) {
	e := startManager(t)
	ctx := t.Context()
	// Simulated Pods: the test is about the uninstall and the namespace's
	// deletion, not about what the module's Pods do.
	team := e.cluster.SimulatedNamespace(t, "team")
	cr := &v1alpha1.Serverless{ObjectMeta: metav1.ObjectMeta{Namespace: team, Name: "default"},
		Spec: v1alpha1.ServerlessSpec{DockerRegistry: &v1alpha1.DockerRegistry{EnableInternal: ptrTo(true)}}}
	require.NoError(t, e.c.Create(ctx, cr))
	dumps := []func() string{framework.DumpObject(e.c, cr), framework.DumpEvents(e.c, team), e.managerLog(60)}
	framework.WaitFor(t, 2*time.Minute, "the CR in "+team+" to be Ready", func(ctx context.Context) (bool, string, error) {
		if err := e.c.Get(ctx, client.ObjectKeyFromObject(cr), cr); err != nil {
			return false, "", err
		}
		return cr.Status.State == v1alpha1.StateReady, describe(cr), nil
	}, dumps...)

	require.NoError(t, e.c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: team}}))
	framework.WaitFor(t, 2*time.Minute, "namespace "+team+" to be gone", func(ctx context.Context) (bool, string, error) {
		nsObj := &corev1.Namespace{}
		err := e.c.Get(ctx, types.NamespacedName{Name: team}, nsObj)
		if apierrors.IsNotFound(err) {
			return true, "", nil
		}
		return false, fmt.Sprintf("%s %v", nsObj.Status.Phase, nsObj.Status.Conditions), err
	}, dumps...)
	// The CRD's own deletion ends after the namespace's (its cleanup finalizer).
	framework.WaitFor(t, time.Minute, "the module's cluster-scoped objects to be uninstalled too", func(ctx context.Context) (bool, string, error) {
		objs := []client.Object{&apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: functionCRD}}}
		for _, name := range []string{"serverless", "kyma-functions-edit", "kyma-functions-view"} {
			objs = append(objs, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}})
		}
		var left []string
		for _, o := range objs {
			err := e.c.Get(ctx, client.ObjectKeyFromObject(o), o)
			if err == nil {
				left = append(left, fmt.Sprintf("%T %s", o, o.GetName()))
			} else if !apierrors.IsNotFound(err) {
				return false, "", err
			}
		}
		return len(left) == 0, fmt.Sprintf("left: %v", left), nil
	}, dumps...)
}

// functionControllerIn is the Function clients for the module installed in
// namespace, once its controller's Pod is Ready.
func (e *env) functionControllerIn(namespace string) *fnEnv {
	e.t.Helper()
	s := runtime.NewScheme()
	require.NoError(e.t, clientgoscheme.AddToScheme(s))
	require.NoError(e.t, v1alpha2.AddToScheme(s))
	fcs, err := e.cluster.NewClient(s)
	require.NoError(e.t, err)
	wc, err := client.NewWithWatch(e.cluster.RESTConfig(), client.Options{Scheme: s})
	require.NoError(e.t, err)
	e.currentControllerPod(namespace, 2*time.Minute)
	return &fnEnv{env: e, fcs: fcs, jobs: watchJobs(e.t, wc)}
}

// waitFunctionGone waits until the Function is deleted (no finalizer: its
// children go by their owner references).
func (f *fnEnv) waitFunctionGone(ns, name string) {
	f.t.Helper()
	framework.WaitFor(f.t, time.Minute, "Function "+ns+"/"+name+" to be gone", func(ctx context.Context) (bool, string, error) {
		err := f.fcs.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &v1alpha2.Function{})
		return apierrors.IsNotFound(err), "", client.IgnoreNotFound(err)
	})
}
