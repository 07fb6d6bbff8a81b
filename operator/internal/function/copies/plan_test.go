package copies

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
)

// asLive turns a desired copy into what the API server returns for it:
// server-set fields added, empty maps dropped, plus what edit does to it.
func asLive[T client.Object](desired T, edit func(T)) T {
	l := desired.DeepCopyObject().(T)
	l.SetUID("copy-uid")
	l.SetResourceVersion("42")
	l.SetCreationTimestamp(metav1.Now())
	l.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "function-controller"}})
	l.SetFinalizers([]string{"someone.example.com/keep"})
	if edit != nil {
		edit(l)
	}
	return l
}

func TestPlan(t *testing.T) {
	bases := Bases{
		ConfigMaps:      []corev1.ConfigMap{baseConfigMap("dockerfile-nodejs22", "ARG base_image=node")},
		Secret:          baseSecret(),
		ServiceAccounts: []corev1.ServiceAccount{baseServiceAccount()},
	}
	desired := Desired(bases, ns)
	cm, secret, sa := desired[0].(*corev1.ConfigMap), desired[1].(*corev1.Secret), desired[2].(*corev1.ServiceAccount)
	same := []client.Object{asLive(cm, nil), asLive(secret, nil), asLive(sa, nil)}

	type want struct {
		op   Op
		kind string
		name string
		// check looks at the written object; nil for none.
		check func(t *testing.T, written client.Object)
	}
	keeps := func(t *testing.T, written client.Object) {
		assert.Equal(t, "42", written.GetResourceVersion(), "an update carries the read version")
		assert.Equal(t, []string{"someone.example.com/keep"}, written.GetFinalizers())
	}
	tests := []struct {
		name    string
		desired []client.Object
		live    []client.Object
		want    []want
	}{
		{"nothing wanted, nothing there", nil, nil, nil},
		{
			"first Function of a namespace: every copy created",
			desired, nil,
			[]want{{OpCreate, "ConfigMap", cm.Name, nil}, {OpCreate, "Secret", secret.Name, nil}, {OpCreate, "ServiceAccount", sa.Name, nil}},
		},
		{"copies equal to their bases: no write", desired, same, nil},
		{
			"empty maps as the API server drops them",
			Desired(Bases{Secret: &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", Labels: map[string]string{}}, Data: map[string][]byte{}}}, ns),
			[]client.Object{&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: ns,
				Labels: map[string]string{v1alpha2.LabelManagedBy: v1alpha2.ManagedByController}}}},
			nil,
		},
		{
			"Dockerfile edited in the copy: restored",
			desired,
			[]client.Object{asLive(cm, func(c *corev1.ConfigMap) { c.Data["Dockerfile"] = "FROM evil" }), same[1], same[2]},
			[]want{{OpUpdate, "ConfigMap", cm.Name, func(t *testing.T, w client.Object) {
				keeps(t, w)
				assert.Equal(t, cm.Data, w.(*corev1.ConfigMap).Data)
			}}},
		},
		{
			"binaryData key added in the copy: removed",
			desired,
			[]client.Object{asLive(cm, func(c *corev1.ConfigMap) { c.BinaryData["extra"] = []byte("x") }), same[1], same[2]},
			[]want{{OpUpdate, "ConfigMap", cm.Name, func(t *testing.T, w client.Object) {
				assert.Equal(t, cm.BinaryData, w.(*corev1.ConfigMap).BinaryData)
			}}},
		},
		{
			"label added and annotation removed in the copy: both restored",
			desired,
			[]client.Object{same[0], asLive(secret, func(s *corev1.Secret) {
				s.Labels["extra"] = "x"
				s.Annotations = nil
			}), same[2]},
			[]want{{OpUpdate, "Secret", secret.Name, func(t *testing.T, w client.Object) {
				keeps(t, w)
				assert.Equal(t, secret.Labels, w.GetLabels())
				assert.Equal(t, secret.Annotations, w.GetAnnotations())
			}}},
		},
		{
			"registry Secret data changed in the base: copy follows",
			desired,
			[]client.Object{same[0], asLive(secret, func(s *corev1.Secret) { s.Data["isInternal"] = []byte("false") }), same[2]},
			[]want{{OpUpdate, "Secret", secret.Name, func(t *testing.T, w client.Object) {
				assert.Equal(t, secret.Data, w.(*corev1.Secret).Data)
			}}},
		},
		{
			"Secret type differs: recreated (the type is immutable)",
			desired,
			[]client.Object{same[0], asLive(secret, func(s *corev1.Secret) { s.Type = corev1.SecretTypeOpaque }), same[2]},
			[]want{{OpRecreate, "Secret", secret.Name, func(t *testing.T, w client.Object) {
				assert.Equal(t, corev1.SecretTypeDockerConfigJson, w.(*corev1.Secret).Type)
				assert.Empty(t, w.GetResourceVersion(), "a recreate creates the desired copy")
			}}},
		},
		{
			"ServiceAccount pull secrets edited: restored",
			desired,
			[]client.Object{same[0], same[1], asLive(sa, func(s *corev1.ServiceAccount) { s.ImagePullSecrets = nil })},
			[]want{{OpUpdate, "ServiceAccount", sa.Name, func(t *testing.T, w client.Object) {
				assert.Equal(t, sa.ImagePullSecrets, w.(*corev1.ServiceAccount).ImagePullSecrets)
			}}},
		},
		{
			"ServiceAccount automount unset: set back to false",
			desired,
			[]client.Object{same[0], same[1], asLive(sa, func(s *corev1.ServiceAccount) { s.AutomountServiceAccountToken = nil })},
			[]want{{OpUpdate, "ServiceAccount", sa.Name, func(t *testing.T, w client.Object) {
				assert.Equal(t, ptr.To(false), w.(*corev1.ServiceAccount).AutomountServiceAccountToken)
			}}},
		},
		{
			"ServiceAccount token secrets are not copied fields: no write",
			desired,
			[]client.Object{same[0], same[1], asLive(sa, func(s *corev1.ServiceAccount) {
				s.Secrets = []corev1.ObjectReference{{Name: "serverless-function-token-xyz"}}
			})},
			nil,
		},
		{
			"base gone: its copy deleted",
			desired[1:],
			same,
			[]want{{OpDelete, "ConfigMap", cm.Name, func(t *testing.T, w client.Object) {
				assert.Equal(t, "copy-uid", string(w.GetUID()))
			}}},
		},
		{
			"copy held by a finalizer while being deleted: left to go, no create",
			desired,
			[]client.Object{same[0], asLive(secret, func(s *corev1.Secret) {
				s.DeletionTimestamp = ptr.To(metav1.Now())
				s.Data = nil
			}), same[2]},
			nil,
		},
		{
			"unwanted copy already being deleted: no second delete",
			nil,
			[]client.Object{asLive(cm, func(c *corev1.ConfigMap) { c.DeletionTimestamp = ptr.To(metav1.Now()) })},
			nil,
		},
		{
			"last Function gone: every copy deleted, in order",
			nil,
			[]client.Object{same[2], same[0], same[1]},
			[]want{{OpDelete, "ConfigMap", cm.Name, nil}, {OpDelete, "Secret", secret.Name, nil}, {OpDelete, "ServiceAccount", sa.Name, nil}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Plan(tt.desired, tt.live)
			require.Len(t, got, len(tt.want))
			for i, w := range tt.want {
				assert.Equal(t, w.op, got[i].Op)
				assert.Equal(t, w.kind, kindOf(got[i].Object))
				assert.Equal(t, w.name, got[i].Object.GetName())
				if w.op != OpCreate {
					assert.NotNil(t, got[i].Live)
				}
				if w.check != nil {
					w.check(t, got[i].Object)
				}
			}
		})
	}
}

// Planning never changes the cached objects it was given.
func TestPlanLeavesLiveAlone(t *testing.T) {
	desired := Desired(Bases{ConfigMaps: []corev1.ConfigMap{baseConfigMap("dockerfile-nodejs22", "new")}}, ns)
	live := asLive(desired[0].(*corev1.ConfigMap), func(c *corev1.ConfigMap) { c.Data["Dockerfile"] = "old" })
	before := live.DeepCopy()
	got := Plan(desired, []client.Object{live})
	require.Len(t, got, 1)
	assert.Equal(t, before, live)
}
