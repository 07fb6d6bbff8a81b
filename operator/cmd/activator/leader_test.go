package main

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/internal/activator"
	"github.com/kyma-project/serverless-manager/operator/pkg/manifest"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
	"github.com/kyma-project/serverless-manager/tests/support/repo"
	"github.com/kyma-project/serverless-manager/tests/support/testenv"
)

// The activator's leader election, run as its ServiceAccount with the
// permissions generated from its markers (the chart grants exactly these,
// operator/internal/manager/render), takes its Lease and records the
// event that says so: controller-runtime's leader election writes core
// Events on the Lease, in the Lease's namespace.
func TestLeaderElectionRecordsItsEventAsTheActivator(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an API server")
	}
	const namespace = "kyma-system"
	env := testenv.Start(t, "charts/serverless/crds")
	admin := env.Client
	ctx := context.Background()
	id := module.Activator()
	require.NoError(t, admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}))
	require.NoError(t, admin.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: id.ServiceAccount}}))
	roles, err := manifest.ReadFile(filepath.Join(repo.MustRoot(), "charts", "serverless", "files", "activator-rbac", "role.yaml"))
	require.NoError(t, err)
	subjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: id.ServiceAccount, Namespace: namespace}}
	for _, r := range roles {
		require.NoError(t, admin.Create(ctx, r), "%s %s", r.GetKind(), r.GetName())
		ref := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: r.GetKind(), Name: r.GetName()}
		switch r.GetKind() {
		case "ClusterRole":
			require.NoError(t, admin.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: r.GetName()}, RoleRef: ref, Subjects: subjects}))
		case "Role":
			require.Equal(t, namespace, r.GetNamespace())
			require.NoError(t, admin.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: r.GetName()}, RoleRef: ref, Subjects: subjects}))
		}
	}

	asActivator := rest.CopyConfig(env.Config)
	asActivator.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + namespace + ":" + id.ServiceAccount,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"}}
	scheme, err := activator.NewScheme()
	require.NoError(t, err)
	opts := managerOptions(config{namespace: namespace, holdTimeout: time.Minute, metricsAddr: "0", probeAddr: "0", leaderElection: true}, scheme)
	mgr, err := ctrl.NewManager(asActivator, opts)
	require.NoError(t, err)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(runCtx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})

	select {
	case <-mgr.Elected():
	case <-time.After(30 * time.Second):
		t.Fatal("the activator did not take its Lease within 30s")
	}
	lease := &coordinationv1.Lease{}
	require.NoError(t, admin.Get(ctx, types.NamespacedName{Namespace: namespace, Name: module.ActivatorLeaseName}, lease))
	var seen []string
	require.Eventually(t, func() bool {
		events := &corev1.EventList{}
		if err := admin.List(ctx, events, client.InNamespace(namespace)); err != nil {
			seen = []string{err.Error()}
			return false
		}
		seen = seen[:0]
		for _, e := range events.Items {
			seen = append(seen, e.InvolvedObject.Kind+"/"+e.InvolvedObject.Name+" "+e.Reason+": "+e.Message)
			if e.InvolvedObject.Kind == "Lease" && e.InvolvedObject.UID == lease.UID && e.Reason == "LeaderElection" {
				return true
			}
		}
		return false
	}, 20*time.Second, 100*time.Millisecond, "no LeaderElection event on the Lease; events in %s: %v", namespace, &seen)
}
