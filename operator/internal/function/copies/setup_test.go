package copies

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/internal/function/config"
)

func testScheme(t *testing.T) *runtime.Scheme {
	s := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(s))
	require.NoError(t, v1alpha2.AddToScheme(s))
	return s
}

func TestMapObject(t *testing.T) {
	fn := func(namespace, name string) *v1alpha2.Function {
		return &v1alpha2.Function{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	}
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).
		WithObjects(fn("a", "f1"), fn("a", "f2"), fn("b", "f1")).Build()
	cfg := &config.Config{BaseNamespace: base, BaseDefaultSecretName: "serverless-registry-config-default"}
	r := New(c, c, cfg)

	labelled := func(obj client.Object, namespace, name string, l map[string]string) client.Object {
		obj.SetNamespace(namespace)
		obj.SetName(name)
		obj.SetLabels(l)
		return obj
	}
	configLabel := func(v string) map[string]string { return map[string]string{v1alpha2.LabelConfig: v} }
	copyOf := func(v string) map[string]string {
		return map[string]string{v1alpha2.LabelConfig: v, v1alpha2.LabelManagedBy: v1alpha2.ManagedByController}
	}
	child := map[string]string{v1alpha2.LabelManagedBy: v1alpha2.ManagedByController, v1alpha2.LabelFunctionName: "f1"}
	every := []string{"a", "b"}

	tests := []struct {
		name string
		obj  client.Object
		want []string
	}{
		{"base Dockerfile: every Function namespace", labelled(&corev1.ConfigMap{}, base, "dockerfile-nodejs22", configLabel(v1alpha2.ConfigRuntime)), every},
		{"base registry Secret", labelled(&corev1.Secret{}, base, "serverless-registry-config-default", configLabel(v1alpha2.ConfigCredentials)), every},
		{"base ServiceAccount", labelled(&corev1.ServiceAccount{}, base, "serverless-function", configLabel(v1alpha2.ConfigServiceAccount)), every},
		{"another credentials Secret of the base namespace", labelled(&corev1.Secret{}, base, "other-registry", configLabel(v1alpha2.ConfigCredentials)), nil},
		{"registry Secret without its label", labelled(&corev1.Secret{}, base, "serverless-registry-config-default", nil), nil},
		{"ConfigMap with another config value", labelled(&corev1.ConfigMap{}, base, "x", configLabel(v1alpha2.ConfigServiceAccount)), nil},
		{"copy: its namespace", labelled(&corev1.Secret{}, "c", "serverless-registry-config-default", copyOf(v1alpha2.ConfigCredentials)), []string{"c"}},
		{"ServiceAccount copy", labelled(&corev1.ServiceAccount{}, "a", "serverless-function", copyOf(v1alpha2.ConfigServiceAccount)), []string{"a"}},
		{"Function source ConfigMap", labelled(&corev1.ConfigMap{}, "a", "f1-x", child), nil},
		{"1.8.4 copy (not cached, listed for completeness)", labelled(&corev1.ConfigMap{}, "a", "dockerfile-nodejs22", configLabel(v1alpha2.ConfigRuntime)), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, req := range r.mapObject(context.Background(), tt.obj) {
				assert.Empty(t, req.Namespace, "requests are cluster-scoped namespace names")
				got = append(got, req.Name)
			}
			assert.ElementsMatch(t, tt.want, got)
		})
	}
}

func TestFunctionComesOrGoes(t *testing.T) {
	now := metav1.Now()
	live := &v1alpha2.Function{}
	deleting := &v1alpha2.Function{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now}}
	p := functionComesOrGoes()
	assert.True(t, p.Create(event.CreateEvent{Object: live}))
	assert.True(t, p.Delete(event.DeleteEvent{Object: live}))
	assert.True(t, p.Update(event.UpdateEvent{ObjectOld: live, ObjectNew: deleting}), "deletion starts")
	assert.False(t, p.Update(event.UpdateEvent{ObjectOld: live, ObjectNew: live.DeepCopy()}), "spec or status change")
	assert.False(t, p.Update(event.UpdateEvent{ObjectOld: deleting, ObjectNew: deleting.DeepCopy()}))
	assert.False(t, p.Generic(event.GenericEvent{Object: live}))
}
