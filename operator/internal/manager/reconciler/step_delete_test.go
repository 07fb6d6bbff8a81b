package reconciler

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/watch"
	"github.com/kyma-project/serverless-manager/operator/internal/testenv"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
)

// cacheMissedAll is a Live whose cache saw none of the module's objects, as
// after watches that were down while they were created; the API server
// still answers ListManagedFromAPI.
type cacheMissedAll struct{ *watch.Live }

func (cacheMissedAll) LiveMeta(context.Context, schema.GroupVersionKind, types.NamespacedName) (metav1.Object, error) {
	return nil, nil
}
func (cacheMissedAll) Object(context.Context, schema.GroupVersionKind, types.NamespacedName) (*unstructured.Unstructured, error) {
	return nil, nil
}
func (cacheMissedAll) ListManaged(context.Context) ([]metav1.Object, error) { return nil, nil }

func TestUninstallAsksTheAPIServerBeforeTheFinalizerGoes(t *testing.T) {
	env := testenv.Start(t, "config/crd/bases")
	ctx := t.Context()
	c := env.Client
	const ns = "default"
	live := cacheMissedAll{watch.NewLive(c, c, c.Scheme(), ns)}
	r := New(c, c, live, nil, nil, &countEvents{}, nil, Options{Namespace: ns})

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "serverless-configuration", Labels: module.Labels()}}
	require.NoError(t, c.Create(ctx, cm))
	cr := &v1alpha1.Serverless{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default", Finalizers: []string{module.Finalizer}}}
	require.NoError(t, c.Create(ctx, cr))
	require.NoError(t, c.Delete(ctx, cr))

	reconcileDelete := func() *state {
		got := &v1alpha1.Serverless{}
		require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(cr), got))
		s := &state{cr: got, before: got.Status.DeepCopy(), log: log.FromContext(ctx)}
		next, _ := r.stepDelete(ctx, s)
		assert.Nil(t, next)
		require.NoError(t, s.err)
		return s
	}

	s := reconcileDelete()
	c1 := meta.FindStatusCondition(s.cr.Status.Conditions, v1alpha1.ConditionDeleted)
	require.NotNil(t, c1)
	assert.Contains(t, c1.Message, "1 objects the API server still holds: ConfigMap serverless-configuration")
	assert.True(t, apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{})), "the ConfigMap the cache missed is deleted")
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(cr), &v1alpha1.Serverless{}), "the finalizer stays while it was there")

	reconcileDelete()
	assert.True(t, apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(cr), &v1alpha1.Serverless{})), "then the finalizer goes")
}
