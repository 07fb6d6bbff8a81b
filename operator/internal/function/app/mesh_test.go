package app_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/internal/function/resources"
	"github.com/kyma-project/serverless-manager/operator/pkg/scaletozero"
)

// In mesh mode, against a real API server: a scale-to-zero Function gets
// its private Service beside its own (headless, its Pods listed before they
// are ready, owned by the Function), parked and woken alike; it goes when
// the Function stops scaling to zero.
func TestMeshModePrivateService(t *testing.T) {
	ctx := context.Background()
	e := start(t, quickDrain, func(e *env) {
		e.cfg = buildlessConfig(t)
		e.cfg.ScaleToZeroMesh = v1alpha1.MeshIstio
	})
	e.activatorPods(t, "10.9.0.1")

	ns := e.namespace(t, "mesh")
	fn := exampleA(t, ns)
	fn.Spec.ScaleConfig = &v1alpha2.ScaleConfig{MinReplicas: ptr.To[int32](0), MaxReplicas: ptr.To[int32](1)}
	require.NoError(t, e.c.Create(ctx, fn))
	private := scaletozero.PrivateServiceName(fn.Name)
	live := e.function(t, ns, fn.Name)

	var svc corev1.Service
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.NoError(c, e.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: private}, &svc))
	}, eventual, tick, "the private Service")
	assert.Equal(t, corev1.ClusterIPNone, svc.Spec.ClusterIP)
	assert.True(t, svc.Spec.PublishNotReadyAddresses)
	assert.Equal(t, resources.SelectorLabels(live), svc.Spec.Selector)
	assert.Equal(t, resources.FunctionLabels(live), svc.Labels)
	require.Len(t, svc.OwnerReferences, 1)
	assert.Equal(t, live.UID, svc.OwnerReferences[0].UID)
	e.waitRouting(t, ns, fn.Name, routing{selector: resources.SelectorLabels(live), hasSlice: true, activator: []string{"10.9.0.1"}},
		"the Function's own Service: waking, as outside mesh mode")

	// Parked: the Function's Service loses its selector, the private one
	// stays as it is.
	e.edit(t, ns, fn.Name, func(fn *v1alpha2.Function) { fn.Spec.Replicas = ptr.To[int32](0) })
	e.waitRouting(t, ns, fn.Name, routing{hasSlice: true, activator: []string{"10.9.0.1"}}, "parked")
	require.NoError(t, e.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: private}, &svc))
	assert.Equal(t, resources.SelectorLabels(live), svc.Spec.Selector)

	e.edit(t, ns, fn.Name, func(fn *v1alpha2.Function) { fn.Spec.ScaleConfig = nil; fn.Spec.Replicas = ptr.To[int32](1) })
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		err := e.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: private}, &corev1.Service{})
		assert.True(c, apierrors.IsNotFound(err), "gone: %v", err)
	}, eventual, tick, "no scale to zero, no private Service")
	e.waitRouting(t, ns, fn.Name, routing{selector: resources.SelectorLabels(live)}, "the Function's Service as without scale to zero")
}
