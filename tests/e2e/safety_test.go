//go:build e2e

package e2e

// Safety tests of issue 15: the uninstall and the prune delete only what the
// module owns, whatever carries its labels or is written into its status,
// and never Functions.

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
	"github.com/kyma-project/serverless-manager/tests/framework"
)

const functionCRD = "functions.serverless.kyma-project.io"

// copyRegistrySecret does what `kubectl get -o yaml | sed name | kubectl
// create -f -` does: a new Secret with the registry Secret's labels,
// annotations and data (kubectl shows no managedFields by default).
func (e *env) copyRegistrySecret(namespace, name string) *corev1.Secret {
	e.t.Helper()
	ctx := e.t.Context()
	src := &corev1.Secret{}
	require.NoError(e.t, e.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: registrySecret}, src))
	cp := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: src.Labels, Annotations: src.Annotations},
		Type:       src.Type, Data: src.Data,
	}
	require.NoError(e.t, e.c.Create(ctx, cp))
	// The test removes its copies itself: the final uninstall check wants
	// nothing labelled as the module's, and the module must leave them.
	e.t.Cleanup(func() { _ = e.c.Delete(context.Background(), cp) })
	return cp
}

// waitGone waits until the CR is deleted (its uninstall finished).
func (e *env) waitGone(cr *v1alpha1.Serverless) {
	e.t.Helper()
	framework.WaitFor(e.t, 2*time.Minute, "the uninstall to complete", func(ctx context.Context) (bool, string, error) {
		err := e.c.Get(ctx, client.ObjectKeyFromObject(cr), &v1alpha1.Serverless{})
		return apierrors.IsNotFound(err), "", client.IgnoreNotFound(err)
	}, e.dumps(cr.Name)...)
}

func newFunction(namespace, name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "serverless.kyma-project.io/v1alpha2", "kind": "Function",
		"metadata": map[string]any{"namespace": namespace, "name": name},
		"spec": map[string]any{"runtime": "nodejs22", "source": map[string]any{"inline": map[string]any{
			"source": "module.exports = { main: function (event, context) { return 'hello' } }"}}},
	}}
}

// Scenario 2 of issue 15: an admin copied the registry Secret with kubectl
// (labels included) into the module namespace and a user namespace; the
// uninstall removes the module and leaves both copies.
func TestCopiedRegistrySecretSurvivesUninstall(t *testing.T) {
	e := startManager(t)
	ctx := t.Context()
	e.applySample("default-serverless-cr.yaml")
	cr := e.waitState("default", v1alpha1.StateReady)
	userNS := e.cluster.Namespace(t, "e2e-copies")
	copies := []*corev1.Secret{e.copyRegistrySecret(ns, "my-registry-copy"), e.copyRegistrySecret(userNS, "my-registry-copy")}
	require.Equal(t, module.ManagedBy, copies[0].Labels[module.LabelManagedBy], "the copy carries the module labels")

	require.NoError(t, e.c.Delete(ctx, cr))
	e.waitGone(cr)
	for _, cp := range copies {
		assert.NoError(t, e.c.Get(ctx, client.ObjectKeyFromObject(cp), &corev1.Secret{}), "%s/%s survives the uninstall", cp.Namespace, cp.Name)
	}
	assert.True(t, apierrors.IsNotFound(e.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: registrySecret}, &corev1.Secret{})),
		"the module's own registry Secret is gone")
}

// Scenario 3 of issue 15: entries written into status.inventory by hand (a
// kind the manager may not read, an object outside the module namespace, a
// labelled copy) neither block the next prune nor get anything deleted, and
// are dropped with a Warning event.
func TestHandEditedInventoryNeitherBlocksNorDeletes(t *testing.T) {
	e := startManager(t)
	ctx := t.Context()
	e.applySample("default-serverless-cr.yaml")
	e.waitState("default", v1alpha1.StateReady)
	cp := e.copyRegistrySecret(ns, "my-registry-copy")
	foreign := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "e2e-foreign-" + strings.ToLower(t.Name()[:8]), Labels: module.Labels()}}
	require.NoError(t, e.c.Create(ctx, foreign))
	t.Cleanup(func() { _ = e.c.Delete(context.Background(), foreign) })

	hand := []string{
		"/Secret/" + ns + "/my-registry-copy",
		"/ConfigMap/default/" + foreign.Name,
		"/Pod/kube-system/kube-apiserver",
	}
	// Events of earlier runs stay in the namespace for a while.
	edited := time.Now().Add(-time.Second)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cr := e.get("default")
		for _, id := range hand {
			cr.Status.Inventory = append(cr.Status.Inventory, v1alpha1.InventoryEntry{ID: id, Digest: "0123456789abcdef01234567", Version: "rv1"})
		}
		return e.c.Status().Update(ctx, cr)
	})
	require.NoError(t, err, "a hand edit of the status")
	// A spec change makes the manager apply and prune.
	e.update("default", func(cr *v1alpha1.Serverless) { cr.Spec.LogLevel = "debug" })
	e.waitFor("default", "Ready with the hand-written entries gone", 2*time.Minute, func(cr *v1alpha1.Serverless) bool {
		for _, entry := range cr.Status.Inventory {
			for _, id := range hand {
				if entry.ID == id {
					return false
				}
			}
		}
		return cr.Status.State == v1alpha1.StateReady && cr.Status.ObservedGeneration == cr.Generation && cr.Status.LogLevel == "debug"
	})
	assert.NoError(t, e.c.Get(ctx, client.ObjectKeyFromObject(cp), &corev1.Secret{}), "the copy named in the inventory stays")
	assert.NoError(t, e.c.Get(ctx, client.ObjectKeyFromObject(foreign), &corev1.ConfigMap{}), "the object outside the module namespace stays")
	framework.WaitFor(t, 30*time.Second, "a Warning event about the ignored entries", func(ctx context.Context) (bool, string, error) {
		list := &eventsv1.EventList{}
		if err := e.c.List(ctx, list, client.InNamespace(ns)); err != nil {
			return false, "", err
		}
		var seen []string
		for _, ev := range list.Items {
			if ev.Reason == v1alpha1.ReasonInventoryEntryIgnored && ev.Type == corev1.EventTypeWarning && ev.CreationTimestamp.After(edited) {
				return strings.Contains(ev.Note, "Pod kube-system/kube-apiserver: Pod is not a kind") &&
					strings.Contains(ev.Note, "ConfigMap default/"+foreign.Name+" is outside the module namespace"), ev.Note, nil
			}
			seen = append(seen, ev.Reason)
		}
		return false, fmt.Sprint(seen), nil
	})

	cr := e.get("default")
	require.NoError(t, e.c.Delete(ctx, cr))
	e.waitGone(cr)
	assert.NoError(t, e.c.Get(ctx, client.ObjectKeyFromObject(cp), &corev1.Secret{}), "the copy survives the uninstall too")
}

// Scenario 1 of issue 15: the manager is killed after the uninstall began
// removing tiers (no Function existed then); a user creates a Function
// meanwhile (the Function CRD goes last, so it is still served). The next
// manager must find the Function and keep it and its CRD.
func TestManagerKilledBetweenTiersKeepsFunctions(t *testing.T) {
	e := startManager(t)
	ctx := t.Context()
	e.applySample("default-serverless-cr.yaml")
	cr := e.waitState("default", v1alpha1.StateReady)
	userNS := e.cluster.Namespace(t, "e2e-tiers")

	require.NoError(t, e.c.Delete(ctx, cr))
	e.waitFor("default", "the uninstall to remove a first tier", time.Minute, func(cr *v1alpha1.Serverless) bool {
		for _, c := range cr.Status.Conditions {
			if c.Type == v1alpha1.ConditionDeleted && v1alpha1.Cause(c) == v1alpha1.ReasonDeleting && strings.Contains(c.Message, "removing") {
				return true
			}
		}
		return false
	})
	require.NoError(t, e.mgr.Kill9())
	fn := newFunction(userNS, "late")
	require.NoError(t, e.c.Create(ctx, fn), "the Function CRD is still served while the manager is down")
	require.NoError(t, e.mgr.Restart())

	want := fmt.Sprintf("1 Functions still exist (%s/late); delete them to uninstall", userNS)
	e.waitFor("default", "the uninstall to be held back by the new Function", time.Minute, func(cr *v1alpha1.Serverless) bool {
		for _, c := range cr.Status.Conditions {
			if c.Type == v1alpha1.ConditionDeleted && c.Message == v1alpha1.ReasonFunctionsExist+": "+want {
				return true
			}
		}
		return false
	})
	time.Sleep(2 * time.Second)
	require.NoError(t, e.c.Get(ctx, client.ObjectKeyFromObject(fn), fn.DeepCopy()), "the Function survives")
	require.NoError(t, e.c.Get(ctx, types.NamespacedName{Name: functionCRD}, &apiextensionsv1.CustomResourceDefinition{}), "its CRD too")

	require.NoError(t, e.c.Delete(ctx, fn))
	e.waitGone(cr)
	assert.Empty(t, e.labelledIDs(ctx))
}
