package reconciler

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/internal/function/resources"
)

func (f *fixture) privateService(t *testing.T, name string) (*corev1.Service, bool) {
	t.Helper()
	svc := &corev1.Service{}
	err := f.client.Get(context.Background(), types.NamespacedName{Namespace: testNS, Name: name + "-private"}, svc)
	if apierrors.IsNotFound(err) {
		return nil, false
	}
	require.NoError(t, err)
	return svc, true
}

// In mesh mode a scale-to-zero Function has its private Service beside its
// own, served, parked and woken alike; it goes when the Function stops
// scaling to zero or mesh mode ends, and comes back with them.
func TestMeshModeKeepsThePrivateService(t *testing.T) {
	fn := stzFunction("hello")
	f, _ := stzFixture(t, fn)
	f.r.cfg.ScaleToZeroMesh = v1alpha1.MeshIstio

	f.reconcile(t, "hello")
	assert.Equal(t, map[string]int{"create *v1.Deployment": 1, "create *v1.EndpointSlice": 1, "create *v1.Service": 2}, f.writes.take())
	priv, ok := f.privateService(t, "hello")
	require.True(t, ok)
	assert.Equal(t, resources.PrivateService(fn).Spec, priv.Spec)
	assert.Equal(t, resources.FunctionLabels(fn), priv.Labels)
	assert.Equal(t, resources.SelectorLabels(fn), f.service(t, "hello").Spec.Selector, "the Function's own Service is kept beside it")
	f.reconcile(t, "hello")
	assert.Empty(t, f.writes.take(), "steady")

	// Parked: the Function's Service loses its selector, the private
	// Service keeps its own (it selects nothing while there is no Pod).
	f.edit(t, "hello", func(fn *v1alpha2.Function) { fn.Spec.Replicas = ptr.To[int32](0) })
	f.reconcile(t, "hello")
	assert.Empty(t, f.service(t, "hello").Spec.Selector)
	priv, ok = f.privateService(t, "hello")
	require.True(t, ok)
	assert.Equal(t, resources.SelectorLabels(fn), priv.Spec.Selector)

	// Changed by hand: put back.
	priv.Spec.PublishNotReadyAddresses = false
	require.NoError(t, f.client.Update(context.Background(), priv))
	f.writes.take()
	f.reconcile(t, "hello")
	assert.Equal(t, 1, f.writes.take()["update *v1.Service"])
	priv, _ = f.privateService(t, "hello")
	assert.True(t, priv.Spec.PublishNotReadyAddresses)

	// No more scale to zero: it goes, with the activator's slice.
	f.edit(t, "hello", func(fn *v1alpha2.Function) { fn.Spec.ScaleConfig = scaled(1, 1); fn.Spec.Replicas = ptr.To[int32](1) })
	f.reconcile(t, "hello")
	_, ok = f.privateService(t, "hello")
	assert.False(t, ok, "only scale-to-zero Functions have one")
	assert.Nil(t, f.activatorSlice(t, "hello"))

	// Back to zero, then mesh mode off: made again, then deleted.
	f.edit(t, "hello", func(fn *v1alpha2.Function) { fn.Spec.ScaleConfig = scaled(0, 1) })
	f.reconcile(t, "hello")
	_, ok = f.privateService(t, "hello")
	assert.True(t, ok)
	f.r.cfg.ScaleToZeroMesh = ""
	f.reconcile(t, "hello")
	_, ok = f.privateService(t, "hello")
	assert.False(t, ok, "none outside mesh mode")
	assert.NotNil(t, f.activatorSlice(t, "hello"), "scale to zero goes on")
	f.writes.take()
	f.reconcile(t, "hello")
	assert.Empty(t, f.writes.take(), "steady")
}

// A Service of the private name that is not the Function's is not taken
// over: Running says why, as for the Function's own Service.
func TestMeshModeLeavesAForeignPrivateService(t *testing.T) {
	fn := stzFunction("hello")
	foreign := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "hello-private", Namespace: testNS, Labels: map[string]string{"app": "mine"}},
		Spec: corev1.ServiceSpec{ClusterIP: "10.0.0.9", Ports: []corev1.ServicePort{{Port: 80}}}}
	f, _ := stzFixture(t, fn)
	require.NoError(t, f.client.Create(context.Background(), foreign))
	f.r.cfg.ScaleToZeroMesh = v1alpha1.MeshIstio
	f.reconcile(t, "hello")
	c := assertCondition(t, f.function(t, "hello"), v1alpha2.ConditionRunning, corev1.ConditionFalse, v1alpha2.ReasonServiceFailed)
	assert.Equal(t, "Service hello-private create error: a Service of that name exists and does not belong to the Function", c.Message)
	got := &corev1.Service{}
	require.NoError(t, f.client.Get(context.Background(), types.NamespacedName{Namespace: testNS, Name: "hello-private"}, got))
	assert.Equal(t, foreign.Labels, got.Labels, "left alone")
	assert.Equal(t, "10.0.0.9", got.Spec.ClusterIP)
}

// A private Service of the Function's that has a cluster IP cannot be made
// headless in place: it is made anew.
func TestMeshModeReplacesAPrivateServiceWithAClusterIP(t *testing.T) {
	fn := stzFunction("hello")
	old := resources.PrivateService(fn)
	old.Spec.ClusterIP = "10.0.0.9"
	f, _ := stzFixture(t, fn)
	require.NoError(t, f.client.Create(context.Background(), old))
	f.writes.take()
	f.r.cfg.ScaleToZeroMesh = v1alpha1.MeshIstio
	f.reconcile(t, "hello")
	w := f.writes.take()
	assert.Equal(t, 1, w["delete *v1.Service"])
	priv, ok := f.privateService(t, "hello")
	require.True(t, ok)
	assert.True(t, resources.IsHeadless(priv))
}
