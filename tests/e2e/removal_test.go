//go:build e2e

package e2e

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
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/hack/render/manifests"
	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/pkg/manifest"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
	"github.com/kyma-project/serverless-manager/tests/framework"
)

const serverlessCRD = "serverlesses.operator.kyma-project.io"

// ensureNamespace creates a namespace unless it exists: install manifests
// carry none, the namespace comes first.
func ensureNamespace(t *testing.T, c client.Client, name string) {
	t.Helper()
	err := c.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	if !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err, "creating namespace %s", name)
	}
}

// renderedInstall is `make render`: the objects an operator (or Kyma's
// lifecycle manager) applies to install the manager.
func renderedInstall(t *testing.T, cluster *framework.Cluster) []*unstructured.Unstructured {
	t.Helper()
	out, err := manifests.Build(filepath.Join(cluster.Root(), "config", "default"), "")
	require.NoError(t, err)
	objs, err := manifest.Decode(out)
	require.NoError(t, err)
	for _, o := range objs {
		require.NotEqual(t, "Namespace", o.GetKind(), "the install manifest must not carry Namespace %s", o.GetName())
	}
	return objs
}

// installRendered applies the rendered manifest into an existing kyma-system
// and starts bin/manager as the rendered ServiceAccount (the manifest's
// Deployment has only a simulated Pod here). The test's cleanup stops every
// manager it started and deletes what is left of the module.
func installRendered(t *testing.T) (*env, []*unstructured.Unstructured) {
	t.Helper()
	e := newEnv(t)
	objs := renderedInstall(t, e.cluster)
	ensureNamespace(t, e.c, ns)
	require.NoError(t, e.cluster.Apply(t.Context(), ns, objs...))
	e.mgr = e.runManager("manager-"+t.Name(), nil)
	e.applySample("default-serverless-cr.yaml")
	e.waitState("default", v1alpha1.StateReady)
	return e, objs
}

// deleteManifest deletes every object of the install manifest, as
// `make render | kubectl delete -f -` or Kyma's lifecycle manager does, and
// waits until those that can go are gone (keep: names of objects expected
// to stay, e.g. a CRD whose CRs are held by a finalizer).
func (e *env) deleteManifest(objs []*unstructured.Unstructured, keep ...string) {
	e.t.Helper()
	// also from a cleanup, where the test's context is done
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, o := range objs {
		err := e.c.Delete(ctx, o.DeepCopy(), client.PropagationPolicy(metav1.DeletePropagationBackground))
		require.NoError(e.t, client.IgnoreNotFound(err), "deleting %s %s", o.GetKind(), o.GetName())
	}
	err := framework.Poll(ctx, time.Minute, "the manifest's objects to be gone", func(ctx context.Context) (bool, string, error) {
		var left []string
		for _, o := range objs {
			if slices.Contains(keep, o.GetName()) {
				continue
			}
			got := o.DeepCopy()
			if err := e.c.Get(ctx, client.ObjectKeyFromObject(o), got); err == nil {
				left = append(left, o.GetKind()+" "+o.GetName())
			} else if !apierrors.IsNotFound(err) {
				return false, "", err
			}
		}
		return len(left) == 0, strings.Join(left, ", "), nil
	})
	if err != nil {
		e.t.Fatal(err.Error())
	}
}

// requireNamespaceActive fails unless the namespace exists and is not
// being deleted.
func (e *env) requireNamespaceActive(name string) {
	e.t.Helper()
	got := &corev1.Namespace{}
	require.NoError(e.t, e.c.Get(e.t.Context(), types.NamespacedName{Name: name}, got), "namespace %s stays", name)
	assert.Nil(e.t, got.DeletionTimestamp, "namespace %s is not being deleted", name)
	assert.Equal(e.t, corev1.NamespaceActive, got.Status.Phase, "namespace %s", name)
}

// Kyma's lifecycle manager removes a module by deleting its default CR
// (after checking no other CR of the kind exists), keeping the manager until
// that CR is gone, then deleting every object of the manifest. While a
// Function exists the CR says so and nothing is removed: Functions, their
// namespaces and their CRD stay and the removal waits, visibly. Once the
// user deletes the Function the module goes, and deleting the manifest
// leaves kyma-system and the user namespace.
func TestLifecycleManagerRemoval(t *testing.T) {
	e, objs := installRendered(t)
	ctx := t.Context()
	// Users bound to the built-in roles get the module's APIs.
	e.waitAggregated(true)
	userNS := e.cluster.Namespace(t, "e2e-removal")
	fn := newFunction(userNS, "kept")
	require.NoError(t, e.c.Create(ctx, fn))

	crs := &v1alpha1.ServerlessList{}
	require.NoError(t, e.c.List(ctx, crs))
	require.Len(t, crs.Items, 1, "no other Serverless CR the lifecycle manager would wait for")
	require.NoError(t, e.c.Delete(ctx, &crs.Items[0]))

	want := fmt.Sprintf("1 Functions still exist (%s/kept); delete them to uninstall", userNS)
	e.waitFor("default", "the removal to wait for the Function, visible in the CR", 30*time.Second, func(cr *v1alpha1.Serverless) bool {
		for _, c := range cr.Status.Conditions {
			// The message names the blocking Functions (reason: ours or upstream's).
			if c.Type == v1alpha1.ConditionDeleted && c.Status == metav1.ConditionFalse && strings.Contains(c.Message, want) {
				return cr.Status.State == v1alpha1.StateWarning
			}
		}
		return false
	})
	// The lifecycle manager keeps waiting; nothing of the module goes meanwhile.
	time.Sleep(3 * time.Second)
	cr := e.get("default")
	assert.NotNil(t, cr.DeletionTimestamp)
	assert.Contains(t, cr.Finalizers, module.Finalizer)
	require.NoError(t, e.c.Get(ctx, client.ObjectKeyFromObject(fn), fn.DeepCopy()), "the Function stays")
	require.NoError(t, e.c.Get(ctx, types.NamespacedName{Name: functionCRD}, &apiextensionsv1.CustomResourceDefinition{}), "its CRD stays")
	require.NoError(t, e.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: controllerName}, &appsv1.Deployment{}), "the Function controller stays")

	require.NoError(t, e.c.Delete(ctx, fn))
	e.waitGone(cr)
	assert.Empty(t, e.labelledIDs(ctx), "the module removed what it installed")

	require.NoError(t, e.mgr.Stop(), "the manager goes with its Deployment")
	e.deleteManifest(objs)
	e.requireNamespaceActive(ns)
	e.requireNamespaceActive(userNS)
	e.waitAggregated(false)
}

// waitAggregated waits until the built-in edit and view ClusterRoles carry
// (or, after the removal, no longer carry) the module's user roles: edit may
// create Serverless CRs and Functions, view may read both.
func (e *env) waitAggregated(present bool) {
	e.t.Helper()
	type want struct{ role, group, resource, verb string }
	wants := []want{
		{"edit", "operator.kyma-project.io", "serverlesses", "create"},
		{"edit", "serverless.kyma-project.io", "functions", "create"},
		{"edit", "serverless.kyma-project.io", "functions/scale", "patch"},
		{"view", "operator.kyma-project.io", "serverlesses", "list"},
		{"view", "serverless.kyma-project.io", "functions", "list"},
	}
	framework.WaitFor(e.t, 30*time.Second, fmt.Sprintf("the module's rules in edit/view: %t", present), func(ctx context.Context) (bool, string, error) {
		var wrong []string
		for _, w := range wants {
			role := &rbacv1.ClusterRole{}
			if err := e.c.Get(ctx, types.NamespacedName{Name: w.role}, role); err != nil {
				return false, "", err
			}
			has := false
			for _, r := range role.Rules {
				has = has || (slices.Contains(r.APIGroups, w.group) && slices.Contains(r.Resources, w.resource) && slices.Contains(r.Verbs, w.verb))
			}
			if has != present {
				wrong = append(wrong, fmt.Sprintf("%s: %s %s/%s %t", w.role, w.verb, w.group, w.resource, has))
			}
		}
		return len(wrong) == 0, strings.Join(wrong, "; "), nil
	})
	// view never gets write verbs.
	view := &rbacv1.ClusterRole{}
	require.NoError(e.t, e.c.Get(e.t.Context(), types.NamespacedName{Name: "view"}, view))
	for _, r := range view.Rules {
		if slices.Contains(r.APIGroups, "serverless.kyma-project.io") || slices.Contains(r.APIGroups, "operator.kyma-project.io") {
			assert.NotContains(e.t, r.Verbs, "create", "view: %v", r.Resources)
			assert.NotContains(e.t, r.Verbs, "delete", "view: %v", r.Resources)
		}
	}
}

// The manifest deleted under a CR (`make render | kubectl delete -f -`
// without deleting the CR first, or a forced module removal): the
// Serverless CRD's deletion marks the CR deleted, the manager is gone before
// it could uninstall (and would not, a Function exists), so the CR keeps
// its finalizer. Functions, their CRD and controller, the user namespace and
// kyma-system stay. The CR is released by removing its finalizer (the
// recipe of docs/user/troubleshooting/03-71-uninstall-failed.md), and
// installing again adopts what was left.
func TestManifestDeletedUnderTheCR(t *testing.T) {
	e, objs := installRendered(t)
	ctx := t.Context()
	userNS := e.cluster.Namespace(t, "e2e-orphan")
	fn := newFunction(userNS, "kept")
	require.NoError(t, e.c.Create(ctx, fn))

	require.NoError(t, e.mgr.Stop(), "the manager's Pod is gone with its Deployment")
	e.deleteManifest(objs, serverlessCRD)

	e.requireNamespaceActive(ns)
	e.requireNamespaceActive(userNS)
	require.NoError(t, e.c.Get(ctx, client.ObjectKeyFromObject(fn), fn.DeepCopy()), "the Function stays")
	require.NoError(t, e.c.Get(ctx, types.NamespacedName{Name: functionCRD}, &apiextensionsv1.CustomResourceDefinition{}), "its CRD stays")
	require.NoError(t, e.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: controllerName}, &appsv1.Deployment{}), "the Function controller stays")
	failHere(t, "manifest deleted")
	// The API server marks the CRD's objects deleted on its own time (the
	// CRD's cleanup finalizer), after the CRD itself.
	cr := e.waitFor("default", "deleting the CRD to delete its CRs", time.Minute, func(cr *v1alpha1.Serverless) bool {
		return cr.DeletionTimestamp != nil
	})
	require.Contains(t, cr.Finalizers, module.Finalizer, "no manager removed the finalizer")

	// The documented way out: remove the finalizer; the CR and its CRD go.
	require.NoError(t, e.c.Patch(ctx, cr, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))))
	framework.WaitFor(t, time.Minute, "the Serverless CRD to be gone", func(ctx context.Context) (bool, string, error) {
		err := e.c.Get(ctx, types.NamespacedName{Name: serverlessCRD}, &apiextensionsv1.CustomResourceDefinition{})
		return apierrors.IsNotFound(err), "", client.IgnoreNotFound(err)
	})
	require.NoError(t, e.c.Get(ctx, client.ObjectKeyFromObject(fn), fn.DeepCopy()), "the Function still stays")

	// Installing again takes over the objects left behind, and a regular
	// removal then cleans up.
	require.NoError(t, e.cluster.Apply(ctx, ns, renderedInstall(t, e.cluster)...))
	e.mgr = e.runManager("manager-"+t.Name()+"-again", nil)
	e.applySample("default-serverless-cr.yaml")
	cr = e.waitState("default", v1alpha1.StateReady)
	require.NoError(t, e.c.Delete(ctx, fn))
	require.NoError(t, e.c.Delete(ctx, cr))
	e.waitGone(cr)
	assert.Empty(t, e.labelledIDs(ctx))
	require.NoError(t, e.mgr.Stop())
	e.deleteManifest(objs)
	e.requireNamespaceActive(ns)
}
