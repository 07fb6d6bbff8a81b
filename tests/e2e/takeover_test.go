//go:build e2e

package e2e

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/pkg/kinds"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
	"github.com/kyma-project/serverless-manager/operator/pkg/upstreamtest"
	"github.com/kyma-project/serverless-manager/tests/framework"
)

// identity is the UID and, for Deployments, the generation of an object.
type identity struct {
	UID        types.UID
	Generation int64
}

// moduleIdentities reads the objects whose identity a takeover keeps.
func (e *env) moduleIdentities(ctx context.Context) map[string]identity {
	e.t.Helper()
	out := map[string]identity{}
	for _, o := range []client.Object{
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: controllerName}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: registryName}},
		&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: module.RegistryPVCName}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: registrySecret}},
	} {
		require.NoError(e.t, e.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: o.GetName()}, o))
		kind := "Secret"
		switch o.(type) {
		case *appsv1.Deployment:
			kind = "Deployment"
		case *corev1.PersistentVolumeClaim:
			kind = "PersistentVolumeClaim"
		}
		out[kind+"/"+o.GetName()] = identity{UID: o.GetUID()}
	}
	return out
}

// upstreamLabelled lists the objects of the module's kinds that still say
// serverless-operator manages them.
func (e *env) upstreamLabelled(ctx context.Context) []string {
	e.t.Helper()
	var out []string
	for _, k := range kinds.Managed() {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(k.GVK.GroupVersion().WithKind(k.GVK.Kind + "List"))
		require.NoError(e.t, e.c.List(ctx, list, client.MatchingLabels{module.LabelManagedBy: upstreamtest.Manager}))
		for _, o := range list.Items {
			out = append(out, k.GVK.Kind+"/"+o.Namespace+"/"+o.Name)
		}
	}
	sort.Strings(out)
	return out
}

// serverless-operator 1.8.4 installed the module (fixtures: what it leaves
// in a cluster) and was stopped, as a module upgrade does; the manager
// starts and takes over: Ready, every Deployment and the PVC keep their UID,
// the registry keeps its credentials, nothing is labelled as
// serverless-operator's any more (the object only its chart rendered is
// gone), the CR carries the manager's finalizer only and the manifest cache
// Secret is removed.
func TestTakeoverOfServerlessOperator(t *testing.T) {
	e := startManager(t)
	ctx := t.Context()
	require.NoError(t, e.mgr.Stop(), "upstream's operator owns the cluster until the upgrade")

	inst, err := upstreamtest.Load(e.cluster.Root())
	require.NoError(t, err)
	require.NoError(t, inst.Install(ctx, e.c))
	framework.WaitFor(t, time.Minute, "upstream's installation to be up (Deployments available, PVC bound)", func(ctx context.Context) (bool, string, error) {
		for _, name := range []string{controllerName, registryName} {
			d := &appsv1.Deployment{}
			if err := e.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, d); err != nil {
				return false, "", err
			}
			if d.Status.AvailableReplicas < 1 {
				return false, name + " not available", nil
			}
		}
		pvc := &corev1.PersistentVolumeClaim{}
		if err := e.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: module.RegistryPVCName}, pvc); err != nil {
			return false, "", err
		}
		return pvc.Status.Phase == corev1.ClaimBound, "PVC " + string(pvc.Status.Phase), nil
	})
	before := e.moduleIdentities(ctx)
	credsBefore := &corev1.Secret{}
	require.NoError(t, e.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: registrySecret}, credsBefore))

	e.mgr = e.runManager("manager-"+t.Name(), nil)
	cr := e.waitFor("default", "the takeover to be Ready with the manager's finalizer only", 2*time.Minute, func(cr *v1alpha1.Serverless) bool {
		return cr.Status.State == v1alpha1.StateReady && cr.Status.ObservedGeneration == cr.Generation &&
			assert.ObjectsAreEqual([]string{module.Finalizer}, cr.Finalizers)
	})
	assert.Equal(t, "internal", cr.Status.DockerRegistry)
	assert.Equal(t, before, e.moduleIdentities(ctx), "Deployments, PVC and registry Secret taken over in place")
	creds := &corev1.Secret{}
	require.NoError(t, e.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: registrySecret}, creds))
	assert.Equal(t, credsBefore.Data["username"], creds.Data["username"], "registry credentials kept")
	assert.Equal(t, credsBefore.Data["password"], creds.Data["password"], "registry credentials kept")

	err = e.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: upstreamtest.CacheSecret}, &corev1.Secret{})
	assert.True(t, apierrors.IsNotFound(err), "the manifest cache Secret is gone: %v", err)
	framework.WaitFor(t, 30*time.Second, "no object labelled as serverless-operator's", func(ctx context.Context) (bool, string, error) {
		left := e.upstreamLabelled(ctx)
		return len(left) == 0, "left: " + joinLines(left), nil
	})
	err = e.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: upstreamtest.OnlyUpstream}, &corev1.ConfigMap{})
	assert.True(t, apierrors.IsNotFound(err), "what only upstream's chart rendered is pruned: %v", err)

	d := &appsv1.Deployment{}
	require.NoError(t, e.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: registryName}, d))
	require.Len(t, d.Spec.Template.Spec.Containers, 1, "the registry runs the chart's container only")
	assert.Equal(t, "data", d.Spec.Template.Spec.Volumes[0].Name)
	assert.Equal(t, module.RegistryPVCName, d.Spec.Template.Spec.Volumes[0].PersistentVolumeClaim.ClaimName, "on the same claim")
	e.requireConsistent(ctx, cr)
}

func joinLines(s []string) string {
	out := ""
	for _, x := range s {
		out += "\n  " + x
	}
	return out
}
