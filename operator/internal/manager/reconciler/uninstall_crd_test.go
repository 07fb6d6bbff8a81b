package reconciler

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/inventory"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
)

const functionsCRDDir = "operator/internal/manager/app/testdata/functions-crd"

var crdGVK = schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}

// functionCRDEntry is the inventory entry of the chart's Function CRD.
var functionCRDEntry = v1alpha1.InventoryEntry{ID: "apiextensions.k8s.io/CustomResourceDefinition//" + functionCRDName, Digest: "d", Version: "g1"}

// applyAsManager gives an existing object the module labels with the
// manager's server-side apply, as the manager's install would.
func applyAsManager(t *testing.T, c client.Client, gvk schema.GroupVersionKind, namespace, name string) {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(namespace)
	u.SetName(name)
	u.SetLabels(module.Labels())
	require.NoError(t, c.Apply(t.Context(), client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(module.ManagerName), client.ForceOwnership))
}

func createFunction(t *testing.T, c client.Client, namespace, name string) *unstructured.Unstructured {
	t.Helper()
	fn := &unstructured.Unstructured{}
	fn.SetGroupVersionKind(functionListGVK.GroupVersion().WithKind("Function"))
	fn.SetNamespace(namespace)
	fn.SetName(name)
	require.NoError(t, c.Create(t.Context(), fn))
	return fn
}

// restartedAPIServer answers as an API server that restarted between
// accepting the Function CRD's names and establishing it: the CRD is not
// Established and discovery leaves its API out.
type restartedAPIServer struct{ client.Reader }

func (a restartedAPIServer) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := a.Reader.Get(ctx, key, obj, opts...); err != nil {
		return err
	}
	if crd, ok := obj.(*apiextensionsv1.CustomResourceDefinition); ok {
		var kept []apiextensionsv1.CustomResourceDefinitionCondition
		for _, c := range crd.Status.Conditions {
			if c.Type != apiextensionsv1.Established {
				kept = append(kept, c)
			}
		}
		crd.Status.Conditions = kept
	}
	return nil
}

func (a restartedAPIServer) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if gvk := list.GetObjectKind().GroupVersionKind(); gvk.Group == functionListGVK.Group {
		return &meta.NoKindMatchError{GroupKind: gvk.GroupKind(), SearchedVersions: []string{gvk.Version}}
	}
	return a.Reader.List(ctx, list, opts...)
}

// Scenario: the API server restarted during an uninstall and left the
// Function CRD un-established, so discovery omits it. The uninstall must
// not take that for "no Functions" and delete the CRD with the Functions.
func TestUninstallKeepsTheFunctionCRDWhileTheAPIServerCannotConfirmThatNoFunctionExists(t *testing.T) {
	t.Parallel() // its own API server
	c, r, cr := uninstallEnvWith(t, []string{functionsCRDDir}, cacheMissing, functionCRDEntry)
	ctx := t.Context()
	applyAsManager(t, c, crdGVK, "", functionCRDName)
	fn := createFunction(t, c, uninstallNS, "hello")
	r.api = restartedAPIServer{Reader: c}

	_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(cr)})
	require.Error(t, err, "retried with backoff")
	got := &v1alpha1.Serverless{}
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(cr), got))
	cond := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionDeleted)
	require.NotNil(t, cond)
	assert.Equal(t, v1alpha1.ReasonDeletionErr, cond.Reason, "upstream's reason")
	assert.Equal(t, v1alpha1.ReasonDeletionFailed, v1alpha1.Cause(*cond))
	assert.Contains(t, cond.Message, "nothing is removed while Functions may exist")
	assert.Contains(t, cond.Message, "CustomResourceDefinition "+functionCRDName+" is not Established")

	assert.NoError(t, c.Get(ctx, client.ObjectKey{Name: functionCRDName}, &apiextensionsv1.CustomResourceDefinition{}), "the CRD stays")
	assert.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(fn), fn.DeepCopy()), "the Function stays")
}

// The last look is right before the delete: a Function created after the
// guard's check keeps the CRD.
func TestUninstallChecksForFunctionsRightBeforeDeletingTheCRD(t *testing.T) {
	t.Parallel() // its own API server
	c, r, _ := uninstallEnvWith(t, []string{functionsCRDDir}, cacheMissing)
	ctx := t.Context()
	applyAsManager(t, c, crdGVK, "", functionCRDName)
	live := &metav1.PartialObjectMetadata{}
	live.SetGroupVersionKind(crdGVK)
	require.NoError(t, c.Get(ctx, client.ObjectKey{Name: functionCRDName}, live))
	createFunction(t, c, uninstallNS, "late")

	ref, ok := inventory.ParseID(functionCRDEntry.ID)
	require.True(t, ok)
	err := r.deleteObject(ctx, leftover{ref: ref, gvk: crdGVK, live: live})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "keeping CustomResourceDefinition "+functionCRDName+": 1 of its objects exist ("+uninstallNS+"/late)")
	assert.NoError(t, c.Get(ctx, client.ObjectKey{Name: functionCRDName}, &apiextensionsv1.CustomResourceDefinition{}), "the CRD stays")
}

// The last Function deleted between the guard's count and the start of
// the watch is no delete event for that watch: the guard counts again
// once the watch has started, and the uninstall goes on at once instead
// of at the next recheck.
func TestUninstallGoesOnWhenTheLastFunctionGoesBeforeItsWatchStarts(t *testing.T) {
	t.Parallel() // its own API server
	c, r, cr := uninstallEnvWith(t, []string{functionsCRDDir}, cacheMissing)
	ctx := t.Context()
	applyAsManager(t, c, crdGVK, "", functionCRDName)
	fn := createFunction(t, c, uninstallNS, "last")
	starts := 0
	r.functionsWatch = &functionsWatch{
		start: func() (func(context.Context) error, error) {
			starts++
			require.NoError(t, c.Delete(ctx, fn))
			return func(context.Context) error { return nil }, nil
		},
		stop: func(context.Context) error { return nil },
	}

	s := &state{cr: cr, before: cr.Status.DeepCopy(), log: ctrl.LoggerFrom(ctx)}
	goOn, _, _ := runStep(ctx, s, r.stepFunctionsGuard)
	assert.True(t, goOn, "no Function is left: the uninstall goes on")
	assert.Equal(t, 1, starts, "the guard had counted one Function and started the watch")
	assert.Nil(t, meta.FindStatusCondition(s.cr.Status.Conditions, v1alpha1.ConditionDeleted), "not held back")
}
