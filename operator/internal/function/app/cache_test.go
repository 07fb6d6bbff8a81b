package app_test

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/internal/function/app"
	"github.com/kyma-project/serverless-manager/operator/internal/function/config"
	"github.com/kyma-project/serverless-manager/operator/internal/function/resources"
)

// The cache drops managed fields (memory, see CacheOptions) and keeps
// everything else.
func TestCacheOptionsDropManagedFields(t *testing.T) {
	opts, err := app.CacheOptions(&config.Config{BaseNamespace: "kyma-system"})
	require.NoError(t, err)
	require.NotNil(t, opts.DefaultTransform)
	managed := []metav1.ManagedFieldsEntry{{Manager: "function-controller", Operation: metav1.ManagedFieldsOperationUpdate}}
	meta := func() metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: "ns", Name: "hello", Labels: map[string]string{"a": "b"}, ManagedFields: managed}
	}
	for _, obj := range []client.Object{
		&v1alpha2.Function{ObjectMeta: meta(), Spec: v1alpha2.FunctionSpec{Runtime: v1alpha2.RuntimeNodejs22}},
		&appsv1.Deployment{ObjectMeta: meta()},
		&batchv1.Job{ObjectMeta: meta()},
	} {
		t.Run(typeName(obj), func(t *testing.T) {
			got, err := opts.DefaultTransform(obj)
			require.NoError(t, err)
			o := got.(client.Object)
			assert.Empty(t, o.GetManagedFields())
			assert.Equal(t, "hello", o.GetName())
			assert.Equal(t, map[string]string{"a": "b"}, o.GetLabels())
		})
	}
	fn, err := opts.DefaultTransform(&v1alpha2.Function{ObjectMeta: meta(), Spec: v1alpha2.FunctionSpec{Runtime: v1alpha2.RuntimeNodejs22}})
	require.NoError(t, err)
	assert.Equal(t, v1alpha2.RuntimeNodejs22, fn.(*v1alpha2.Function).Spec.Runtime, "the spec stays")
}

func typeName(obj client.Object) string {
	switch obj.(type) {
	case *v1alpha2.Function:
		return "Function"
	case *appsv1.Deployment:
		return "Deployment"
	case *corev1.Service:
		return "Service"
	case *corev1.Secret:
		return "Secret"
	case *batchv1.Job:
		return "Job"
	case *discoveryv1.EndpointSlice:
		return "EndpointSlice"
	default:
		return fmt.Sprintf("%T", obj)
	}
}

// Only build Pods are cached, and of them only what the reconciler reads.
func TestCacheHoldsBuildPodsSlim(t *testing.T) {
	opts, err := app.CacheOptions(&config.Config{BaseNamespace: "kyma-system"})
	require.NoError(t, err)
	var byObject cache.ByObject
	for k, v := range opts.ByObject {
		if _, ok := k.(*corev1.Pod); ok {
			byObject = v
		}
	}
	require.NotNil(t, byObject.Label, "Pods are cached by label")
	internal := map[string]string{v1alpha2.LabelManagedBy: v1alpha2.ManagedByController, v1alpha2.LabelFunctionName: "hello"}
	buildPod := labels.Merge(internal, map[string]string{resources.LabelJobName: "hello-build-x"})
	functionPod := labels.Merge(internal, map[string]string{v1alpha2.LabelResource: v1alpha2.ResourceDeployment})
	assert.True(t, byObject.Label.Matches(labels.Set(buildPod)))
	assert.False(t, byObject.Label.Matches(labels.Set(functionPod)), "a Function's own Pods are not cached")
	assert.False(t, byObject.Label.Matches(labels.Set{resources.LabelJobName: "someone-elses-job"}))

	require.NotNil(t, byObject.Transform)
	done := &corev1.ContainerStateTerminated{ExitCode: 0, Message: "sha256:abc"}
	got, err := byObject.Transform(&corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Labels: buildPod, Annotations: map[string]string{"big": "x"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "build", Env: []corev1.EnvVar{{Name: "A", Value: "b"}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodSucceeded, ContainerStatuses: []corev1.ContainerStatus{{
			Name: "build", Image: "img", ImageID: "id", State: corev1.ContainerState{Terminated: done}}}},
	})
	require.NoError(t, err)
	pod := got.(*corev1.Pod)
	assert.Equal(t, map[string]string(buildPod), pod.Labels)
	assert.Empty(t, pod.Annotations)
	assert.Empty(t, pod.ManagedFields)
	assert.Empty(t, pod.Spec.Containers)
	assert.Equal(t, corev1.PodSucceeded, pod.Status.Phase)
	assert.Equal(t, []corev1.ContainerStatus{{Name: "build", State: corev1.ContainerState{Terminated: done}}}, pod.Status.ContainerStatuses)
	assert.Empty(t, pod.Status.Conditions, "a placed Pod keeps no condition")

	// While the scheduler finds no node for it: that condition only.
	notPlaced := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		Message: "0/1 nodes are available: 1 Insufficient cpu.", LastTransitionTime: metav1.Now(), LastProbeTime: metav1.Now()}
	got, err = byObject.Transform(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Labels: buildPod},
		Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{
			{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionFalse}, notPlaced}}})
	require.NoError(t, err)
	assert.Equal(t, []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		Message: notPlaced.Message}}, got.(*corev1.Pod).Status.Conditions)
}

// In buildless mode the cache holds Functions, their Deployments,
// Services and EndpointSlices (scale to zero) and the base namespace's
// registry Secret; no build kind, no
// copies. Reading another kind is an error, never a new cluster-wide watch.
func TestBuildlessCacheHoldsNoBuildKinds(t *testing.T) {
	opts, err := app.CacheOptions(&config.Config{BaseNamespace: "kyma-system", Mode: config.ModeBuildless})
	require.NoError(t, err)
	assert.True(t, opts.ReaderFailOnMissingInformer)
	var kinds []string
	for obj, by := range opts.ByObject {
		kinds = append(kinds, typeName(obj))
		if _, ok := obj.(*corev1.Secret); ok {
			assert.Equal(t, []string{"kyma-system"}, slices.Collect(maps.Keys(by.Namespaces)), "Secrets of the base namespace only")
		}
	}
	slices.Sort(kinds)
	assert.Equal(t, []string{"Deployment", "EndpointSlice", "Function", "Secret", "Service"}, kinds)
	assert.NotNil(t, opts.DefaultTransform, "managed fields dropped")
}

// Outside the base namespace the cache holds the copies and those their
// users took over (managed-by=user), so that a copy missing from the cache
// is missing; the Function's own children only when they are the
// controller's.
func TestCacheHoldsCopiesTakenOver(t *testing.T) {
	opts, err := app.CacheOptions(&config.Config{BaseNamespace: "kyma-system"})
	require.NoError(t, err)
	managedBy := func(v string) labels.Set { return labels.Set{v1alpha2.LabelManagedBy: v} }
	for obj, by := range opts.ByObject {
		switch obj.(type) {
		case *corev1.ConfigMap, *corev1.Secret, *corev1.ServiceAccount:
			elsewhere := by.Namespaces[cache.AllNamespaces].LabelSelector
			require.NotNil(t, elsewhere, "%T", obj)
			assert.True(t, elsewhere.Matches(managedBy(v1alpha2.ManagedByController)), "%T", obj)
			assert.True(t, elsewhere.Matches(managedBy(v1alpha2.ManagedByUser)), "%T", obj)
			assert.False(t, elsewhere.Matches(managedBy("someone-else")), "%T", obj)
			assert.False(t, elsewhere.Matches(labels.Set{v1alpha2.LabelConfig: v1alpha2.ConfigCredentials}), "%T: 1.8.4's copies are adopted first", obj)
		case *batchv1.Job, *appsv1.Deployment:
			assert.False(t, by.Label.Matches(managedBy(v1alpha2.ManagedByUser)), "%T", obj)
		}
	}
}

// EndpointSlices are cached when they are a Function's: ours, and those the
// cluster makes for a Function's Service (they copy its labels); other
// Services' slices are not, in either mode.
func TestCacheHoldsFunctionEndpointSlices(t *testing.T) {
	fn := &v1alpha2.Function{ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: "ns", UID: "u1"}}
	fn.Spec.ScaleConfig = &v1alpha2.ScaleConfig{MinReplicas: ptr.To[int32](0)}
	own := resources.FunctionLabels(fn)
	own[discoveryv1.LabelServiceName], own[discoveryv1.LabelManagedBy] = "hello", resources.ClusterSliceManager
	for _, mode := range []config.Mode{config.ModeBuild, config.ModeBuildless} {
		t.Run(string(mode), func(t *testing.T) {
			opts, err := app.CacheOptions(&config.Config{BaseNamespace: "kyma-system", Mode: mode})
			require.NoError(t, err)
			var sel labels.Selector
			for obj, by := range opts.ByObject {
				if _, ok := obj.(*discoveryv1.EndpointSlice); ok {
					sel = by.Label
				}
			}
			require.NotNil(t, sel, "EndpointSlices cached by label")
			assert.True(t, sel.Matches(labels.Set(resources.ActivatorSlice(fn, 20000, "", nil).Labels)), "ours")
			assert.True(t, sel.Matches(labels.Set(own)), "the Function's Service's")
			assert.False(t, sel.Matches(labels.Set{discoveryv1.LabelServiceName: "other", discoveryv1.LabelManagedBy: resources.ClusterSliceManager}))
		})
	}
}
