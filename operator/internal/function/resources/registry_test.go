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

func TestBaseImage(t *testing.T) {
	tests := []struct {
		name       string
		dockerfile string
		want       string
		wantErr    bool
	}{
		{
			name:       "first declaration to end of line",
			dockerfile: "ARG base_image=europe-docker.pkg.dev/kyma-project/prod/function-runtime-nodejs20:1.8.4\nFROM ${base_image}\nARG base_image=other\n",
			want:       "europe-docker.pkg.dev/kyma-project/prod/function-runtime-nodejs20:1.8.4",
		},
		{name: "trailing blanks and CR are kept (tag input)", dockerfile: "ARG base_image=img:1 \r\nFROM ${base_image}", want: "img:1 \r"},
		{name: "declaration on the last line without newline", dockerfile: "FROM x\nARG base_image=img:2", want: "img:2"},
		{name: "no declaration", dockerfile: "FROM scratch\n", wantErr: true},
		{name: "empty declaration", dockerfile: "ARG base_image=\nFROM x", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := BaseImage(tt.dockerfile)
			if tt.wantErr {
				assert.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}
