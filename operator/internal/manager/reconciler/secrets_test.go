package reconciler

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/apply"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/inventory"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/watch"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
)

func registrySecret(user, password string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kyma-system", Name: module.RegistrySecretName},
		Data:       map[string][]byte{"isInternal": []byte("true"), "username": []byte(user), "password": []byte(password)},
	}
}

// secretGets counts the Secrets read from the API server.
func secretGets(n *int) interceptor.Funcs {
	return interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		if _, ok := obj.(*corev1.Secret); ok {
			*n++
		}
		return c.Get(ctx, key, obj, opts...)
	}}
}

func TestInternalRegistryCredentials(t *testing.T) {
	scheme, err := watch.NewScheme()
	require.NoError(t, err)
	internal := &v1alpha1.Serverless{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kyma-system", Name: "default"},
		Spec:       v1alpha1.ServerlessSpec{DockerRegistry: &v1alpha1.DockerRegistry{EnableInternal: ptr.To(true)}},
	}
	registrySvc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "kyma-system", Name: module.RegistryServiceName},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{NodePort: 32137}}}}
	tests := []struct {
		name string
		// cache and api hold these objects.
		cache, api []client.Object
		wantCreds  *string // password in effect; nil: new credentials
		wantGets   int     // Secret reads from the API server over two facts() calls
	}{
		{
			name:      "missing from the lagging cache, present in the API server: kept",
			cache:     []client.Object{registrySvc},
			api:       []client.Object{registrySvc, registrySecret("user", "old-password")},
			wantCreds: ptr.To("old-password"),
			wantGets:  2,
		},
		{
			name:      "in the cache: the data is read once and remembered while its version holds",
			cache:     []client.Object{registrySvc, registrySecret("user", "old-password")},
			api:       []client.Object{registrySvc, registrySecret("user", "old-password")},
			wantCreds: ptr.To("old-password"),
			wantGets:  1,
		},
		{
			name:     "gone from both: new credentials",
			cache:    []client.Object{registrySvc},
			api:      []client.Object{registrySvc},
			wantGets: 2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gets := 0
			cache := fake.NewClientBuilder().WithScheme(scheme).WithObjects(tt.cache...).Build()
			api := fake.NewClientBuilder().WithScheme(scheme).WithObjects(tt.api...).WithInterceptorFuncs(secretGets(&gets)).Build()
			// Both fakes give objects they start with the same resourceVersion,
			// as one API server would report it.
			r := New(cache, api, fakeLive{}, nil, nil, &countEvents{}, nil, Options{Namespace: "kyma-system"})
			for range 2 {
				f, err := r.facts(t.Context(), internal)
				require.NoError(t, err)
				if tt.wantCreds == nil {
					assert.Nil(t, f.InternalCredentials)
				} else {
					require.NotNil(t, f.InternalCredentials)
					assert.Equal(t, *tt.wantCreds, f.InternalCredentials.Password)
				}
			}
			assert.Equal(t, tt.wantGets, gets)
		})
	}
}

// A changed Secret (new resourceVersion in the cache) is read again.
func TestSecretDataFollowsANewVersion(t *testing.T) {
	scheme, err := watch.NewScheme()
	require.NoError(t, err)
	gets := 0
	cache := fake.NewClientBuilder().WithScheme(scheme).WithObjects(registrySecret("user", "one")).Build()
	api := fake.NewClientBuilder().WithScheme(scheme).WithObjects(registrySecret("user", "one")).WithInterceptorFuncs(secretGets(&gets)).Build()
	r := New(cache, api, fakeLive{}, nil, nil, &countEvents{}, nil, Options{Namespace: "kyma-system"})
	key := client.ObjectKeyFromObject(registrySecret("", ""))

	got, found, err := r.secretData(t.Context(), key)
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, "one", string(got.data["password"]))

	for _, c := range []client.Client{cache, api} {
		s := &corev1.Secret{}
		require.NoError(t, c.Get(t.Context(), key, s))
		s.Data["password"] = []byte("two")
		require.NoError(t, c.Update(t.Context(), s))
	}
	gets = 0
	got, found, err = r.secretData(t.Context(), key)
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, "two", string(got.data["password"]))
	assert.Equal(t, 1, gets)
}

// The registry's NodePort comes from its Service, read from the API server
// once per resourceVersion; a Service the cache has not seen yet is found
// there too, so no other port is picked for a running registry.
func TestRegistryNodePort(t *testing.T) {
	scheme, err := watch.NewScheme()
	require.NoError(t, err)
	internal := &v1alpha1.Serverless{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kyma-system", Name: "default"},
		Spec:       v1alpha1.ServerlessSpec{DockerRegistry: &v1alpha1.DockerRegistry{EnableInternal: ptr.To(true)}},
	}
	svc := func() *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "kyma-system", Name: module.RegistryServiceName},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{NodePort: 31555}}}}
	}
	tests := []struct {
		name       string
		cache, api []client.Object
		wantPort   int32
		wantGets   int // Services read one by one over two facts() calls
		wantLists  int
	}{
		{"cached: read once", []client.Object{svc()}, []client.Object{svc()}, 31555, 1, 0},
		{"not cached yet: found on the API server", nil, []client.Object{svc()}, 31555, 2, 0},
		{"nowhere: a free port is searched", nil, nil, 32137, 2, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gets, lists := 0, 0
			cache := fake.NewClientBuilder().WithScheme(scheme).WithObjects(tt.cache...).Build()
			api := fake.NewClientBuilder().WithScheme(scheme).WithObjects(tt.api...).WithInterceptorFuncs(interceptor.Funcs{
				Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
					if _, ok := obj.(*corev1.Service); ok {
						gets++
					}
					return c.Get(ctx, key, obj, opts...)
				},
				List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
					lists++
					return c.List(ctx, list, opts...)
				},
			}).Build()
			r := New(cache, api, fakeLive{}, nil, nil, &countEvents{}, nil, Options{Namespace: "kyma-system"})
			for range 2 {
				f, err := r.facts(t.Context(), internal)
				require.NoError(t, err)
				assert.Equal(t, tt.wantPort, f.NodePort)
			}
			assert.Equal(t, tt.wantGets, gets)
			assert.Equal(t, tt.wantLists, lists)
		})
	}
}

// Credentials read from the registry Secret are pinned to that Secret (its
// UID, under the ID the applier gives the rendered Secret): an apply never
// writes them to a Secret made after a deletion. New credentials are not
// pinned.
func TestRegistryCredentialsArePinnedToTheirSecret(t *testing.T) {
	scheme, err := watch.NewScheme()
	require.NoError(t, err)
	rendered := &unstructured.Unstructured{}
	rendered.SetAPIVersion("v1")
	rendered.SetKind("Secret")
	rendered.SetNamespace("kyma-system")
	rendered.SetName(module.RegistrySecretName)
	existing := registrySecret("user", "old-password")
	existing.UID = "uid-1"
	tests := []struct {
		name     string
		objs     []client.Object
		wantPins apply.Pins
	}{
		{name: "credentials read from their Secret", objs: []client.Object{existing}, wantPins: apply.Pins{inventory.ID(rendered): "uid-1"}},
		{name: "new credentials", wantPins: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newTestState(1)
			s.cr.Spec.DockerRegistry = &v1alpha1.DockerRegistry{EnableInternal: ptr.To(true)}
			c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(tt.objs...).Build()
			r := New(c, c, fakeLive{}, nil, nil, &countEvents{}, nil, Options{Namespace: "kyma-system", NewSecret: func(n int) string { return strings.Repeat("n", n) }})
			goOn, _, err := runStep(t.Context(), s, r.stepConfigure)
			require.NoError(t, err)
			require.True(t, goOn, "configured: %v", s.cr.Status.Conditions)
			assert.Equal(t, tt.wantPins, s.pins)
		})
	}
}
