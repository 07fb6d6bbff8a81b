//go:build e2e

package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
)

// The internal registry's volume size comes from the CR; the local
// cluster's StorageClass does not allow expansion, so a larger size is a
// Warning naming it, and the claim keeps its size until the CR asks for it
// again.
func TestRegistryVolumeSize(t *testing.T) {
	e := startManager(t)
	ctx := t.Context()
	size := resource.MustParse("30Gi")
	require.NoError(t, e.c.Create(ctx, &v1alpha1.Serverless{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"},
		Spec: v1alpha1.ServerlessSpec{DockerRegistry: &v1alpha1.DockerRegistry{EnableInternal: ptrTo(true), VolumeSize: &size}}}))
	e.waitState("default", v1alpha1.StateReady)
	claimSize := func() string {
		pvc := &corev1.PersistentVolumeClaim{}
		require.NoError(t, e.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: module.RegistryPVCName}, pvc))
		q := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
		return q.String()
	}
	assert.Equal(t, "30Gi", claimSize(), "a new claim takes the CR's size")

	e.update("default", func(cr *v1alpha1.Serverless) {
		larger := resource.MustParse("50Gi")
		cr.Spec.DockerRegistry.VolumeSize = &larger
	})
	cr := e.waitFor("default", "a Warning that the volume cannot grow", time.Minute, func(cr *v1alpha1.Serverless) bool {
		return cr.Status.State == v1alpha1.StateWarning && cr.Status.ObservedGeneration == cr.Generation
	})
	msg := describe(cr)
	assert.True(t, strings.Contains(msg, `dockerRegistry.volumeSize 50Gi: the internal registry's volume stays 30Gi: its StorageClass "standard" does not allow volume expansion`), msg)
	assert.Equal(t, "30Gi", claimSize())

	e.update("default", func(cr *v1alpha1.Serverless) { cr.Spec.DockerRegistry.VolumeSize = &size })
	e.waitState("default", v1alpha1.StateReady)
}
