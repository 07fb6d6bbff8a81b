package reconciler

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/values"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
	"github.com/kyma-project/serverless-manager/operator/pkg/registryagent"
)

func TestStepRegistryUsage(t *testing.T) {
	const gib = int64(1) << 30
	previous := &v1alpha1.RegistryUsage{UsedBytes: gib, TotalBytes: 20 * gib, Images: 4, UsedPercent: 5}
	tests := []struct {
		name        string
		registry    string
		usage       registryagent.Usage
		err         error
		before      *v1alpha1.RegistryUsage
		want        *v1alpha1.RegistryUsage
		wantWarning string
		wantRequeue time.Duration
	}{
		{name: "measured", registry: values.InternalRegistry, usage: registryagent.Usage{UsedBytes: 3 * gib, TotalBytes: 20 * gib, TaggedImages: 12},
			want: &v1alpha1.RegistryUsage{UsedBytes: 3 * gib, TotalBytes: 20 * gib, Images: 12, UsedPercent: 15}, wantRequeue: 5 * time.Minute},
		{name: "at 80 % no warning yet", registry: values.InternalRegistry, usage: registryagent.Usage{UsedBytes: 16 * gib, TotalBytes: 20 * gib, TaggedImages: 90},
			want: &v1alpha1.RegistryUsage{UsedBytes: 16 * gib, TotalBytes: 20 * gib, Images: 90, UsedPercent: 80}, wantRequeue: 5 * time.Minute},
		{name: "above 80 % is a warning naming the registry", registry: values.InternalRegistry,
			usage:       registryagent.Usage{UsedBytes: 17 * gib, TotalBytes: 20 * gib, TaggedImages: 95},
			want:        &v1alpha1.RegistryUsage{UsedBytes: 17 * gib, TotalBytes: 20 * gib, Images: 95, UsedPercent: 85},
			wantWarning: "RegistryAlmostFull: the internal registry's volume is 85 % full (17Gi of 20Gi, 95 images)", wantRequeue: 5 * time.Minute},
		{name: "agent unreachable keeps the last figures and retries soon", registry: values.InternalRegistry, err: errors.New("connection refused"),
			before: previous, want: previous, wantRequeue: registryUsageRetry},
		{name: "external registry has no figures", registry: "registry.example.com", before: previous},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(&corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Namespace: "kyma-system", Name: module.RegistrySecretName},
				Data:       map[string][]byte{"username": []byte("u"), "password": []byte("p")}}).Build()
			var asked []string
			r := New(c, c, nil, nil, nil, &countEvents{}, nil, Options{Namespace: "kyma-system", RegistryUsageEvery: 5 * time.Minute,
				RegistryUsage: func(_ context.Context, ns, user, password string) (registryagent.Usage, error) {
					asked = append(asked, ns, user, password)
					return tt.usage, tt.err
				}})
			s := newTestState(1)
			s.cr.Status.DockerRegistry = tt.registry
			s.cr.Status.InternalRegistry = tt.before
			goOn, res, _ := runStep(context.Background(), s, r.stepRegistryUsage)
			assert.True(t, goOn, "never stops the reconcile")
			assert.Equal(t, tt.want, s.cr.Status.InternalRegistry)
			assert.Equal(t, tt.wantRequeue, res.RequeueAfter)
			if tt.wantWarning == "" {
				assert.Empty(t, s.warnings)
			} else if assert.Len(t, s.warnings, 1) {
				assert.Contains(t, s.warnings[0], tt.wantWarning)
			}
			if tt.registry == values.InternalRegistry {
				assert.Equal(t, []string{"kyma-system", "u", "p"}, asked, "asked with the registry's credentials")
			} else {
				assert.Empty(t, asked)
			}
		})
	}
}

// Reconciles between two measurements reuse the figures: the registry's
// storage is walked once per interval, not once per reconcile.
func TestStepRegistryUsageOncePerInterval(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kyma-system", Name: module.RegistrySecretName}}).Build()
	calls := 0
	r := New(c, c, nil, nil, nil, &countEvents{}, nil, Options{Namespace: "kyma-system", RegistryUsageEvery: time.Hour,
		RegistryUsage: func(context.Context, string, string, string) (registryagent.Usage, error) {
			calls++
			return registryagent.Usage{UsedBytes: 19, TotalBytes: 20, TaggedImages: 2}, nil
		}})
	for range 3 {
		s := newTestState(1)
		s.cr.Status.DockerRegistry = values.InternalRegistry
		s.cr.Status.InternalRegistry = &v1alpha1.RegistryUsage{UsedBytes: 19, TotalBytes: 20, Images: 2, UsedPercent: 95}
		goOn, res, _ := runStep(context.Background(), s, r.stepRegistryUsage)
		assert.True(t, goOn)
		assert.Len(t, s.warnings, 1, "the full registry is still reported")
		assert.Positive(t, res.RequeueAfter)
		assert.LessOrEqual(t, res.RequeueAfter, time.Hour)
	}
	assert.Equal(t, 1, calls)
}
