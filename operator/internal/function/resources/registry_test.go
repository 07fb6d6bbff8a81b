package resources

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestRegistryFromSecret(t *testing.T) {
	secret := func(data map[string]string) *corev1.Secret {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "serverless-registry-config-default", Namespace: "fn-test-1"}, Data: map[string][]byte{}}
		for k, v := range data {
			s.Data[k] = []byte(v)
		}
		return s
	}
	tests := []struct {
		name    string
		secret  *corev1.Secret
		want    Registry
		wantErr string
	}{
		{
			name: "internal registry: push and pull addresses differ",
			secret: secret(map[string]string{"isInternal": "true", "registryAddress": "ignored",
				"pushRegAddr": "serverless-docker-registry.kyma-system.svc.cluster.local:5000", "pullRegAddr": "localhost:32137"}),
			want: Registry{PushAddress: "serverless-docker-registry.kyma-system.svc.cluster.local:5000", PullAddress: "localhost:32137", Internal: true},
		},
		{
			name:   "external registry (dump form)",
			secret: secret(map[string]string{"isInternal": "false", "registryAddress": "k3d-kyma-registry:5000", "serverAddress": "k3d-kyma-registry:5000"}),
			want:   Registry{PushAddress: "k3d-kyma-registry:5000", PullAddress: "k3d-kyma-registry:5000"},
		},
		{
			name:   "isInternal other than exactly true is external",
			secret: secret(map[string]string{"isInternal": "True", "registryAddress": "docker.io/me", "pushRegAddr": "p", "pullRegAddr": "q"}),
			want:   Registry{PushAddress: "docker.io/me", PullAddress: "docker.io/me"},
		},
		{
			name:   "no isInternal is external",
			secret: secret(map[string]string{"registryAddress": "docker.io/me"}),
			want:   Registry{PushAddress: "docker.io/me", PullAddress: "docker.io/me"},
		},
		{name: "internal without pull address", secret: secret(map[string]string{"isInternal": "true", "pushRegAddr": "p"}), wantErr: `"pullRegAddr"`},
		{name: "internal without push address", secret: secret(map[string]string{"isInternal": "true", "pullRegAddr": "q"}), wantErr: `"pushRegAddr"`},
		{name: "external with empty address", secret: secret(map[string]string{"registryAddress": ""}), wantErr: `"registryAddress"`},
		{name: "no secret", wantErr: "missing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := RegistryFromSecret(tt.secret)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}
