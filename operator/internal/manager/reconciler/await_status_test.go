package reconciler

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
)

// After a status write the reconcile returns only once the cache shows it,
// so the next reconcile of the CR does not decide (and write, and emit
// events) again from the copy before the write.
func TestAwaitStatusWaitsForTheCacheToShowTheWrite(t *testing.T) {
	written := v1alpha1.ServerlessStatus{State: v1alpha1.StateReady, Conditions: []metav1.Condition{{
		Type: v1alpha1.ConditionInstalled, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonInstalled,
		LastTransitionTime: metav1.NewTime(time.Date(2026, 1, 1, 12, 0, 0, 123456789, time.UTC)),
	}}}
	stored := written.DeepCopy() // as the API server keeps it: whole seconds
	stored.Conditions[0].LastTransitionTime = metav1.NewTime(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	stale := v1alpha1.ServerlessStatus{State: v1alpha1.StateProcessing}

	tests := []struct {
		name      string
		staleGets int
		wantGets  int
	}{
		{"cache already shows it", 0, 1},
		{"cache catches up after three reads", 3, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := runtime.NewScheme()
			require.NoError(t, v1alpha1.AddToScheme(s))
			cr := &v1alpha1.Serverless{ObjectMeta: metav1.ObjectMeta{Namespace: "kyma-system", Name: "default"}, Status: *stored}
			gets := 0
			c := fake.NewClientBuilder().WithScheme(s).WithObjects(cr).WithInterceptorFuncs(interceptor.Funcs{
				Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
					gets++
					if err := c.Get(ctx, key, obj, opts...); err != nil {
						return err
					}
					if gets <= tt.staleGets {
						obj.(*v1alpha1.Serverless).Status = stale
					}
					return nil
				},
			}).Build()
			r := &Reconciler{client: c}
			start := time.Now()
			r.awaitStatus(context.Background(), &v1alpha1.Serverless{ObjectMeta: cr.ObjectMeta, Status: written})
			assert.Equal(t, tt.wantGets, gets)
			assert.Less(t, time.Since(start), statusWait, "sub-second condition times do not count as a difference")
		})
	}
}
