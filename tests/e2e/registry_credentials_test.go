//go:build e2e

package e2e

import (
	"context"
	"crypto/sha256"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/tests/framework"
)

// credentialsChecksum is what the chart puts on the registry's Pod template
// for the registry Secret's credentials.
func credentialsChecksum(s *corev1.Secret) string {
	return fmt.Sprintf("%x", sha256.Sum256([]byte(string(s.Data["username"])+":"+string(s.Data["password"]))))
}

// registryPodsChecksums lists the credentials checksum of every registry Pod.
func (e *env) registryPodsChecksums(ctx context.Context) ([]string, error) {
	pods := &corev1.PodList{}
	if err := e.c.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{"app.kubernetes.io/name": registryName}); err != nil {
		return nil, err
	}
	var out []string
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p.Annotations["checksum/credentials"])
		}
	}
	return out, nil
}

// Scenario 4 of issue 15: the internal registry's Secret is deleted. The
// manager makes new credentials and the registry restarts with them (its
// htpasswd is written at start), so pushes and pulls do not fail with 401.
// A manager restart alone keeps the credentials.
func TestRegistryRestartsWithNewCredentials(t *testing.T) {
	e := startManager(t)
	ctx := t.Context()
	e.applySample("default-serverless-cr.yaml")
	e.waitState("default", v1alpha1.StateReady)

	before := &corev1.Secret{}
	require.NoError(t, e.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: registrySecret}, before))
	d := &appsv1.Deployment{}
	require.NoError(t, e.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: registryName}, d))
	assert.Equal(t, credentialsChecksum(before), d.Spec.Template.Annotations["checksum/credentials"])
	generation := d.Generation

	// A restarted manager (its cache starts empty) keeps the credentials.
	require.NoError(t, e.mgr.Stop())
	e.mgr = e.runManager("manager-"+t.Name()+"-restarted", nil)
	// A spec change makes the new manager configure (and read the Secret) again.
	e.update("default", func(cr *v1alpha1.Serverless) { cr.Spec.LogLevel = "debug" })
	e.waitFor("default", "Ready with the change after the restart", time.Minute, func(cr *v1alpha1.Serverless) bool {
		return cr.Status.State == v1alpha1.StateReady && cr.Status.ObservedGeneration == cr.Generation
	})
	same := &corev1.Secret{}
	require.NoError(t, e.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: registrySecret}, same))
	assert.Equal(t, string(before.Data["password"]), string(same.Data["password"]), "a restart generates no credentials")
	require.NoError(t, e.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: registryName}, d))
	assert.Equal(t, generation, d.Generation, "and does not roll the registry")

	require.NoError(t, e.c.Delete(ctx, same))
	var after *corev1.Secret
	framework.WaitFor(t, time.Minute, "new credentials in the registry's Pods", func(ctx context.Context) (bool, string, error) {
		s := &corev1.Secret{}
		if err := e.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: registrySecret}, s); err != nil {
			return false, "no Secret yet", client.IgnoreNotFound(err)
		}
		if string(s.Data["password"]) == string(before.Data["password"]) {
			return false, "old password", nil
		}
		after = s
		sums, err := e.registryPodsChecksums(ctx)
		if err != nil {
			return false, "", err
		}
		for _, sum := range sums {
			if sum != credentialsChecksum(s) {
				return false, fmt.Sprintf("registry Pods carry %v", sums), nil
			}
		}
		return len(sums) > 0, fmt.Sprintf("registry Pods carry %v", sums), nil
	})
	require.NoError(t, e.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: registryName}, d))
	assert.Equal(t, credentialsChecksum(after), d.Spec.Template.Annotations["checksum/credentials"])
	assert.Greater(t, d.Generation, generation, "the registry rolled out")
	e.waitState("default", v1alpha1.StateReady)
}
