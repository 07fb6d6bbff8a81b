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
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/values"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/watch"
)

// namedOver answers NamedWatches from a client standing for the API server:
// a declared object's metadata is what the watch of its name would hold.
type namedOver struct {
	objects client.Reader
	used    map[string][]watch.NamedKey
}

func (n *namedOver) Use(_ context.Context, owner string, keys ...watch.NamedKey) error {
	if n.used == nil {
		n.used = map[string][]watch.NamedKey{}
	}
	if len(keys) == 0 {
		delete(n.used, owner)
		return nil
	}
	n.used[owner] = keys
	return nil
}

func (n *namedOver) Get(key watch.NamedKey) (*metav1.PartialObjectMetadata, bool, error) {
	for _, keys := range n.used {
		for _, k := range keys {
			if k != key {
				continue
			}
			m := &metav1.PartialObjectMetadata{}
			m.SetGroupVersionKind(key.GVK)
			err := n.objects.Get(context.Background(), key.NamespacedName, m)
			if apierrors.IsNotFound(err) {
				return nil, false, nil
			}
			return m, err == nil, err
		}
	}
	return nil, false, watch.ErrNotWatched
}

func (n *namedOver) Events() <-chan event.GenericEvent { return nil }

func namedKey(kind, name string) watch.NamedKey {
	return watch.NamedKey{GVK: corev1.SchemeGroupVersion.WithKind(kind), NamespacedName: types.NamespacedName{Namespace: "kyma-system", Name: name}}
}

// The users' objects a CR's configuration reads are declared for watches by
// name, and only those: the cache holds none of them.
func TestConfigurationDeclaresTheUsersObjects(t *testing.T) {
	scheme, err := watch.NewScheme()
	require.NoError(t, err)
	telemetry := namedKey("Service", values.TracingServiceName)
	userSecret := namedKey("Secret", "my-registry")
	tests := []struct {
		name string
		spec v1alpha1.ServerlessSpec
		want []watch.NamedKey
	}{
		{"default: the telemetry Service", v1alpha1.ServerlessSpec{}, []watch.NamedKey{telemetry}},
		{"external registry: its Secret too",
			v1alpha1.ServerlessSpec{DockerRegistry: &v1alpha1.DockerRegistry{SecretName: ptr.To("my-registry")}},
			[]watch.NamedKey{telemetry, userSecret}},
		{"internal registry: a named Secret is ignored",
			v1alpha1.ServerlessSpec{DockerRegistry: &v1alpha1.DockerRegistry{EnableInternal: ptr.To(true), SecretName: ptr.To("my-registry")}},
			[]watch.NamedKey{telemetry}},
		{"tracing endpoint set: no telemetry Service",
			v1alpha1.ServerlessSpec{Tracing: &v1alpha1.Endpoint{Endpoint: "http://otel:4318"}, DockerRegistry: &v1alpha1.DockerRegistry{SecretName: ptr.To("my-registry")}},
			[]watch.NamedKey{userSecret}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := fake.NewClientBuilder().WithScheme(scheme).Build()
			named := &namedOver{objects: api}
			cache := fake.NewClientBuilder().WithScheme(scheme).Build()
			r := New(cache, api, fakeLive{}, nil, nil, &countEvents{}, nil, Options{Namespace: "kyma-system", Named: named})
			cr := &v1alpha1.Serverless{ObjectMeta: metav1.ObjectMeta{Namespace: "kyma-system", Name: "default"}, Spec: tt.spec}
			_, err := r.facts(t.Context(), cr)
			require.NoError(t, err)
			assert.Equal(t, map[string][]watch.NamedKey{"kyma-system/default": tt.want}, named.used)

			// The CR gone: its watches are released.
			r.forget(t.Context(), "kyma-system", "default")
			assert.Empty(t, named.used)
		})
	}
}

// The user's registry Secret and the telemetry Service are known from their
// watches by name although the cache holds neither: the Secret's data is
// read from the API server once per resourceVersion, the Service's
// existence costs no request.
func TestUsersObjectsComeFromTheirWatches(t *testing.T) {
	scheme, err := watch.NewScheme()
	require.NoError(t, err)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "kyma-system", Name: "my-registry"},
		Data: map[string][]byte{"username": []byte("robot"), "password": []byte("one"),
			"serverAddress": []byte("registry.example:5000"), "registryAddress": []byte("registry.example:5000/team")}}
	telemetry := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "kyma-system", Name: values.TracingServiceName}}
	gets := 0
	api := fake.NewClientBuilder().WithScheme(scheme).WithObjects(secret, telemetry).WithInterceptorFuncs(secretGets(&gets)).Build()
	cache := fake.NewClientBuilder().WithScheme(scheme).Build() // the module's objects only: none here
	r := New(cache, api, fakeLive{}, nil, nil, &countEvents{}, nil, Options{Namespace: "kyma-system", Named: &namedOver{objects: api}})
	cr := &v1alpha1.Serverless{ObjectMeta: metav1.ObjectMeta{Namespace: "kyma-system", Name: "default"},
		Spec: v1alpha1.ServerlessSpec{DockerRegistry: &v1alpha1.DockerRegistry{SecretName: ptr.To("my-registry")}}}

	for range 2 {
		f, err := r.facts(t.Context(), cr)
		require.NoError(t, err)
		assert.True(t, f.TracingServiceExists)
		assert.Equal(t, "one", string(f.RegistrySecret["password"]))
	}
	assert.Equal(t, 1, gets, "the Secret's data read once while its version holds")

	// The user rotates the password: a new version, read again.
	live := &corev1.Secret{}
	require.NoError(t, api.Get(t.Context(), client.ObjectKeyFromObject(secret), live))
	live.Data["password"] = []byte("two")
	require.NoError(t, api.Update(t.Context(), live))
	gets = 0
	f, err := r.facts(t.Context(), cr)
	require.NoError(t, err)
	assert.Equal(t, "two", string(f.RegistrySecret["password"]))
	assert.Equal(t, 1, gets)
}
