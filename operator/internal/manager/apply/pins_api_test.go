package apply

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kyma-project/serverless-manager/operator/internal/manager/inventory"
	"github.com/kyma-project/serverless-manager/tests/support/testenv"
)

// Against a real API server: a pinned Secret is written to the Secret its
// content was read from, also when the cache does not show it (upstream's,
// not labelled yet); once that Secret is gone or replaced the apply is
// refused, whatever the cache shows, so it neither comes back nor
// overwrites its successor.
func TestPinnedApplyOnTheAPIServer(t *testing.T) {
	env := testenv.Start(t)
	ctx := t.Context()
	c := env.Client
	key := types.NamespacedName{Namespace: "default", Name: "creds"}
	create := func(password string) *corev1.Secret {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}, StringData: map[string]string{"password": password}}
		require.NoError(t, c.Create(ctx, s))
		return s
	}
	render := func(password string) []*unstructured.Unstructured {
		o := &unstructured.Unstructured{Object: map[string]any{"stringData": map[string]any{"password": password}}}
		o.SetAPIVersion("v1")
		o.SetKind("Secret")
		o.SetName(key.Name)
		return []*unstructured.Unstructured{o}
	}
	password := func() string {
		s := &corev1.Secret{}
		err := c.Get(ctx, key, s)
		if apierrors.IsNotFound(err) {
			return "(none)"
		}
		require.NoError(t, err)
		return string(s.Data["password"])
	}
	read := create("one")
	pins := Pins{"/Secret/default/creds": read.UID}
	// what a lagging cache shows: the Secret that was read
	stale := fakeLive{key: &metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, UID: read.UID}}
	apply := func(live fakeLive, password string) Result {
		res, err := New(c, c, live, c.RESTMapper()).Apply(ctx, "default", render(password), inventory.Inventory{}, pins)
		require.NoError(t, err)
		return res
	}

	res := apply(fakeLive{}, "two")
	assert.Empty(t, res.Waiting)
	assert.Equal(t, "two", password(), "the Secret the content came from is written, though not in the cache")

	require.NoError(t, c.Delete(ctx, read))
	for _, live := range []fakeLive{stale, {}} {
		res = apply(live, "three")
		assert.Contains(t, res.Waiting, `Secret "creds" was deleted or replaced`)
		assert.Equal(t, "(none)", password(), "a deleted Secret is not made again")
	}

	create("four")
	res = apply(stale, "five")
	assert.Contains(t, res.Waiting, `Secret "creds" was deleted or replaced`)
	assert.Equal(t, "four", password(), "its successor is left as it is")
}
