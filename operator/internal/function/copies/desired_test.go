package copies

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
)

const (
	base = "kyma-system"
	ns   = "fn-ns"
)

func baseMeta(name, config string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name: name, Namespace: base, UID: "base-uid", ResourceVersion: "7",
		Labels:      map[string]string{v1alpha2.LabelConfig: config, "app.kubernetes.io/version": "1.9.0"},
		Annotations: map[string]string{"meta.helm.sh/release-name": "serverless"},
		Finalizers:  []string{"keep.example.com/not-copied"},
	}
}

func baseConfigMap(name, dockerfile string) corev1.ConfigMap {
	return corev1.ConfigMap{
		ObjectMeta: baseMeta(name, v1alpha2.ConfigRuntime),
		Data:       map[string]string{"Dockerfile": dockerfile},
		BinaryData: map[string][]byte{"blob": {1, 2}},
	}
}

func baseSecret() *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: baseMeta("serverless-registry-config-default", v1alpha2.ConfigCredentials),
		Type:       corev1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{".dockerconfigjson": []byte(`{"auths":{}}`), "isInternal": []byte("true")},
	}
}

func baseServiceAccount() corev1.ServiceAccount {
	return corev1.ServiceAccount{
		ObjectMeta:                   baseMeta("serverless-function", v1alpha2.ConfigServiceAccount),
		ImagePullSecrets:             []corev1.LocalObjectReference{{Name: "serverless-registry-config-default"}},
		AutomountServiceAccountToken: ptr.To(false),
		Secrets:                      []corev1.ObjectReference{{Name: "serverless-function-token-abc"}},
	}
}

func copyLabels(config string) map[string]string {
	return map[string]string{
		v1alpha2.LabelConfig: config, "app.kubernetes.io/version": "1.9.0",
		v1alpha2.LabelManagedBy: v1alpha2.ManagedByController,
	}
}

func copyMetaOf(name, config string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name: name, Namespace: ns, Labels: copyLabels(config),
		Annotations: map[string]string{"meta.helm.sh/release-name": "serverless"},
	}
}

func TestDesired(t *testing.T) {
	wantCM := func(name, dockerfile string) *corev1.ConfigMap {
		return &corev1.ConfigMap{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: copyMetaOf(name, v1alpha2.ConfigRuntime),
			Data:       map[string]string{"Dockerfile": dockerfile},
			BinaryData: map[string][]byte{"blob": {1, 2}},
		}
	}
	wantSecret := &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: copyMetaOf("serverless-registry-config-default", v1alpha2.ConfigCredentials),
		Type:       corev1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{".dockerconfigjson": []byte(`{"auths":{}}`), "isInternal": []byte("true")},
	}
	// Token secrets, finalizers, UID and resourceVersion are not copied.
	wantSA := &corev1.ServiceAccount{
		TypeMeta:                     metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
		ObjectMeta:                   copyMetaOf("serverless-function", v1alpha2.ConfigServiceAccount),
		ImagePullSecrets:             []corev1.LocalObjectReference{{Name: "serverless-registry-config-default"}},
		AutomountServiceAccountToken: ptr.To(false),
	}
	userLabelled := baseSecret()
	userLabelled.Labels[v1alpha2.LabelManagedBy] = v1alpha2.ManagedByUser

	tests := []struct {
		name  string
		bases Bases
		want  []client.Object
	}{
		{"no bases", Bases{}, nil},
		{
			"all kinds, sorted by kind then name",
			Bases{
				ConfigMaps:      []corev1.ConfigMap{baseConfigMap("dockerfile-python312", "ARG base_image=py"), baseConfigMap("dockerfile-nodejs22", "ARG base_image=node")},
				Secret:          baseSecret(),
				ServiceAccounts: []corev1.ServiceAccount{baseServiceAccount()},
			},
			[]client.Object{wantCM("dockerfile-nodejs22", "ARG base_image=node"), wantCM("dockerfile-python312", "ARG base_image=py"), wantSecret, wantSA},
		},
		{
			"a base's managed-by label is replaced by ours",
			Bases{Secret: userLabelled},
			[]client.Object{wantSecret},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, Desired(tt.bases, ns))
		})
	}
}

// Copies share nothing with the bases: changing one leaves the other alone
// (the bases are the cache's objects).
func TestDesiredDoesNotAlias(t *testing.T) {
	b := Bases{ConfigMaps: []corev1.ConfigMap{baseConfigMap("dockerfile-nodejs22", "x")}, Secret: baseSecret(), ServiceAccounts: []corev1.ServiceAccount{baseServiceAccount()}}
	for _, o := range Desired(b, ns) {
		o.GetLabels()["changed"] = "yes"
		o.GetAnnotations()["changed"] = "yes"
		switch c := o.(type) {
		case *corev1.ConfigMap:
			c.Data["Dockerfile"] = "changed"
			c.BinaryData["blob"][0] = 9
		case *corev1.Secret:
			c.Data["isInternal"][0] = 'X'
		case *corev1.ServiceAccount:
			c.ImagePullSecrets[0].Name = "changed"
			*c.AutomountServiceAccountToken = true
		}
	}
	assert.Equal(t, baseConfigMap("dockerfile-nodejs22", "x"), b.ConfigMaps[0])
	assert.Equal(t, baseSecret(), b.Secret)
	assert.Equal(t, baseServiceAccount(), b.ServiceAccounts[0])
}

func TestIsCopy(t *testing.T) {
	withLabels := func(obj client.Object, l map[string]string) client.Object {
		obj.SetLabels(l)
		return obj
	}
	ours := func(config string) map[string]string {
		return map[string]string{v1alpha2.LabelManagedBy: v1alpha2.ManagedByController, v1alpha2.LabelConfig: config}
	}
	owned := withLabels(&corev1.ConfigMap{}, ours(v1alpha2.ConfigRuntime))
	owned.SetOwnerReferences([]metav1.OwnerReference{{Kind: "Function", Name: "fn"}})
	child := ours(v1alpha2.ConfigRuntime)
	child[v1alpha2.LabelFunctionName] = "fn"

	tests := []struct {
		name string
		obj  client.Object
		want bool
	}{
		{"ConfigMap copy", withLabels(&corev1.ConfigMap{}, ours(v1alpha2.ConfigRuntime)), true},
		{"Secret copy", withLabels(&corev1.Secret{}, ours(v1alpha2.ConfigCredentials)), true},
		{"ServiceAccount copy", withLabels(&corev1.ServiceAccount{}, ours(v1alpha2.ConfigServiceAccount)), true},
		{"config value of another kind", withLabels(&corev1.Secret{}, ours(v1alpha2.ConfigRuntime)), false},
		{"no managed-by (1.8.4 copy)", withLabels(&corev1.ConfigMap{}, map[string]string{v1alpha2.LabelConfig: v1alpha2.ConfigRuntime}), false},
		{"user's copy", withLabels(&corev1.ConfigMap{}, map[string]string{v1alpha2.LabelConfig: v1alpha2.ConfigRuntime, v1alpha2.LabelManagedBy: v1alpha2.ManagedByUser}), false},
		{"Function source ConfigMap (labels copied from the Function)", withLabels(&corev1.ConfigMap{}, child), false},
		{"owned by a Function", owned, false},
		{"other kind", withLabels(&corev1.Service{}, ours(v1alpha2.ConfigRuntime)), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, IsCopy(tt.obj))
		})
	}
}
