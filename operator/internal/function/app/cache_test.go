package app_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/internal/function/app"
	"github.com/kyma-project/serverless-manager/operator/internal/function/config"
)

// The cache drops managed fields (memory, see CacheOptions) and keeps
// everything else.
func TestCacheOptionsDropManagedFields(t *testing.T) {
	opts, err := app.CacheOptions(&config.Config{BaseNamespace: "kyma-system"})
	require.NoError(t, err)
	require.NotNil(t, opts.DefaultTransform)
	managed := []metav1.ManagedFieldsEntry{{Manager: "function-controller", Operation: metav1.ManagedFieldsOperationUpdate}}
	meta := func() metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: "ns", Name: "hello", Labels: map[string]string{"a": "b"}, ManagedFields: managed}
	}
	for _, obj := range []client.Object{
		&v1alpha2.Function{ObjectMeta: meta(), Spec: v1alpha2.FunctionSpec{Runtime: v1alpha2.RuntimeNodejs22}},
		&appsv1.Deployment{ObjectMeta: meta()},
		&batchv1.Job{ObjectMeta: meta()},
	} {
		t.Run(typeName(obj), func(t *testing.T) {
			got, err := opts.DefaultTransform(obj)
			require.NoError(t, err)
			o := got.(client.Object)
			assert.Empty(t, o.GetManagedFields())
			assert.Equal(t, "hello", o.GetName())
			assert.Equal(t, map[string]string{"a": "b"}, o.GetLabels())
		})
	}
	fn, err := opts.DefaultTransform(&v1alpha2.Function{ObjectMeta: meta(), Spec: v1alpha2.FunctionSpec{Runtime: v1alpha2.RuntimeNodejs22}})
	require.NoError(t, err)
	assert.Equal(t, v1alpha2.RuntimeNodejs22, fn.(*v1alpha2.Function).Spec.Runtime, "the spec stays")
}

func typeName(obj client.Object) string {
	switch obj.(type) {
	case *v1alpha2.Function:
		return "Function"
	case *appsv1.Deployment:
		return "Deployment"
	default:
		return "Job"
	}
}
