package scope

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache/informertest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/watch"
)

// Reads of the module's namespaced kinds go to the namespace cache, the
// rest to the client (the manager's main cache).
func TestClientRoutesNamespacedManagedKindsToTheScope(t *testing.T) {
	s, err := watch.NewScheme()
	require.NoError(t, err)
	ns := "kyma-system"
	main := fake.NewClientBuilder().WithScheme(s).WithObjects(
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "x"}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "d"}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p"}},
		&v1alpha1.Serverless{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "default"}},
	).Build()
	// The namespace cache answers every read with nothing (and no error):
	// what a read returns tells where it went.
	sc := &Scope{home: ns, cur: &namespaceCache{namespace: ns, cache: &informertest.FakeInformers{Scheme: s}}}
	c := Client(main, sc)
	ctx := context.Background()

	secretMeta := &metav1.PartialObjectMetadata{}
	secretMeta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	tests := []struct {
		name      string
		obj       runtime.Object
		list      bool
		fromScope bool
	}{
		{"Secret metadata", secretMeta, false, true},
		{"typed Secret", &corev1.Secret{}, false, true},
		{"Deployment list", &appsv1.DeploymentList{}, true, true},
		{"Serverless CRs of every namespace", &v1alpha1.ServerlessList{}, true, false},
		{"Pods (not a managed kind)", &corev1.PodList{}, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			found := 0
			if tt.list {
				require.NoError(t, c.List(ctx, tt.obj.(client.ObjectList)))
				found = meta.LenList(tt.obj)
			} else {
				o := tt.obj.(client.Object)
				require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "x"}, o))
				if o.GetName() != "" {
					found = 1
				}
			}
			if tt.fromScope {
				assert.Zero(t, found, "read from the namespace cache")
			} else {
				assert.Equal(t, 1, found, "read from the main client")
			}
		})
	}
}
