package app_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/scope/namespaced"
	"github.com/kyma-project/serverless-manager/operator/pkg/kinds"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
)

// moduleObjects lists the namespaced objects labelled as the module's in
// namespace, as Kind/name.
func moduleObjects(t *testing.T, c client.Client, namespace string) []string {
	t.Helper()
	var out []string
	for _, k := range kinds.Managed() {
		if !k.Namespaced {
			continue
		}
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(k.GVK.GroupVersion().WithKind(k.GVK.Kind + "List"))
		require.NoError(t, c.List(context.Background(), list, client.InNamespace(namespace), client.MatchingLabels(module.Labels())))
		for _, o := range list.Items {
			out = append(out, k.GVK.Kind+"/"+o.Name)
		}
	}
	return out
}

func getCRIn(t *testing.T, c client.Client, namespace, name string) (*v1alpha1.Serverless, error) {
	t.Helper()
	cr := &v1alpha1.Serverless{}
	return cr, c.Get(context.Background(), types.NamespacedName{Namespace: namespace, Name: name}, cr)
}

func waitStateIn(t *testing.T, c client.Client, namespace, name string, state v1alpha1.State) *v1alpha1.Serverless {
	t.Helper()
	var cr *v1alpha1.Serverless
	eventually(t, 20*time.Second, fmt.Sprintf("Serverless %s/%s to be %s", namespace, name, state), func() (bool, string) {
		var err error
		if cr, err = getCRIn(t, c, namespace, name); err != nil {
			return false, err.Error()
		}
		return cr.Status.State == state && cr.Status.ObservedGeneration == cr.Generation, describe(cr)
	})
	return cr
}

// markAvailableIn plays kube-controller-manager for a Deployment of namespace.
func markAvailableIn(t *testing.T, c client.Client, namespace, name string) {
	t.Helper()
	eventually(t, 10*time.Second, "Deployment "+namespace+"/"+name+" to be marked available", func() (bool, string) {
		d := &appsv1.Deployment{}
		if err := c.Get(context.Background(), types.NamespacedName{Namespace: namespace, Name: name}, d); err != nil {
			return false, err.Error()
		}
		// Every replica asked for (the activator runs 2).
		n := int32(1)
		if d.Spec.Replicas != nil {
			n = *d.Spec.Replicas
		}
		d.Status = appsv1.DeploymentStatus{
			ObservedGeneration: d.Generation, Replicas: n, UpdatedReplicas: n, ReadyReplicas: n, AvailableReplicas: n,
			Conditions: []appsv1.DeploymentCondition{
				{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable"},
				{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable"},
			},
		}
		if err := c.Status().Update(context.Background(), d); err != nil {
			return false, err.Error()
		}
		return true, ""
	})
}

// A CR outside the manager's namespace is served like upstream's: the
// module is installed into its namespace (the manager binds its namespaced
// role there and its cache follows), uninstalled from there when it goes,
// and a CR of the manager's namespace that waited takes over.
func TestServerlessInAnotherNamespace(t *testing.T) {
	env := startEnv(t)
	c := env.Client
	ctx := context.Background()
	const team = "team-a"
	require.NoError(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: team}}))
	startManager(t, env)

	first := &v1alpha1.Serverless{ObjectMeta: metav1.ObjectMeta{Namespace: team, Name: "default"}}
	require.NoError(t, c.Create(ctx, first))
	markAvailableIn(t, c, team, "fixture-controller")
	cr := waitStateIn(t, c, team, "default", v1alpha1.StateReady)
	assert.Equal(t, metav1.ConditionTrue, cr.Status.Served)
	assert.Contains(t, moduleObjects(t, c, team), "Deployment/fixture-controller")
	assert.Empty(t, moduleObjects(t, c, ns), "nothing of the module in the manager's namespace")
	rb := &rbacv1.RoleBinding{}
	require.NoError(t, c.Get(ctx, types.NamespacedName{Namespace: team, Name: namespaced.ClusterRole}, rb))
	assert.Equal(t, namespaced.ClusterRole, rb.RoleRef.Name)

	// Drift in team-a is seen (the watches follow the module namespace).
	require.NoError(t, c.Delete(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: team, Name: "fixture-controller"}}))
	eventually(t, 10*time.Second, "the deleted Deployment to be applied again", func() (bool, string) {
		err := c.Get(ctx, types.NamespacedName{Namespace: team, Name: "fixture-controller"}, &appsv1.Deployment{})
		return err == nil, fmt.Sprint(err)
	})
	markAvailableIn(t, c, team, "fixture-controller")
	waitStateIn(t, c, team, "default", v1alpha1.StateReady)

	// The manager's binding forced away by someone (finalizer removed) is
	// made again (its deletion is watched).
	require.NoError(t, c.Delete(ctx, rb))
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(rb), rb))
	rb.Finalizers = nil
	require.NoError(t, c.Update(ctx, rb))
	eventually(t, 10*time.Second, "a new RoleBinding in team-a", func() (bool, string) {
		again := &rbacv1.RoleBinding{}
		err := c.Get(ctx, types.NamespacedName{Namespace: team, Name: namespaced.ClusterRole}, again)
		return err == nil && again.UID != rb.UID, fmt.Sprint(err)
	})

	// A CR in the manager's namespace waits: one per cluster.
	require.NoError(t, c.Create(ctx, newCR("default", v1alpha1.ServerlessSpec{})))
	second := waitState(t, c, "default", v1alpha1.StateWarning)
	assert.Equal(t, metav1.ConditionFalse, second.Status.Served)
	assert.Contains(t, conditionOf(second, v1alpha1.ConditionConfigured).Message, team+"/default is served")

	// The first goes: uninstalled from team-a, binding included; the second
	// takes over and installs into kyma-system.
	require.NoError(t, c.Delete(ctx, first))
	eventually(t, 30*time.Second, "the team-a CR to be gone", func() (bool, string) {
		cr, err := getCRIn(t, c, team, "default")
		if apierrors.IsNotFound(err) {
			return true, ""
		}
		if err != nil {
			return false, err.Error()
		}
		return false, describe(cr)
	})
	assert.Empty(t, moduleObjects(t, c, team), "nothing of the module left in team-a")
	err := c.Get(ctx, types.NamespacedName{Namespace: team, Name: namespaced.ClusterRole}, rb)
	assert.True(t, apierrors.IsNotFound(err), "the manager's RoleBinding in team-a is gone: %v", err)

	markAvailable(t, c, "fixture-controller")
	cr = waitState(t, c, "default", v1alpha1.StateReady)
	assert.Equal(t, metav1.ConditionTrue, cr.Status.Served)
	assert.Contains(t, moduleObjects(t, c, ns), "Deployment/fixture-controller")
}
