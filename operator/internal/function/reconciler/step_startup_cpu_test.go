package reconciler

import (
	"context"
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/internal/function/resources"
	"github.com/kyma-project/serverless-manager/operator/internal/steps"
)

// TestStartupCPUResizesReadyPodsOnce: a ready Pod that started boosted is
// resized to the limit its template names, once; a Pod not ready yet, one
// at its limit already, one without the annotation and one gone are left
// alone, and so are the Pods of a Function that does not scale to zero.
func TestStartupCPUResizesReadyPodsOnce(t *testing.T) {
	pod := func(name, limit, after string) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS, UID: types.UID("uid-" + name)},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: resources.ContainerFunction, Resources: corev1.ResourceRequirements{
				Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(limit)}}}}},
		}
		if after != "" {
			p.Annotations = map[string]string{resources.AnnotationCPULimitAfterStart: after}
		}
		return p
	}
	endpoint := func(name string, ready bool) discoveryv1.Endpoint {
		return discoveryv1.Endpoint{Addresses: []string{"198.51.100.9"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready)},
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Name: name, Namespace: testNS, UID: types.UID("uid-" + name)}}
	}
	fn := newFunction("wake")
	fn.Spec.ScaleConfig = &v1alpha2.ScaleConfig{MinReplicas: ptr.To[int32](0), MaxReplicas: ptr.To[int32](3)}
	slice := discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "wake-x1", Namespace: testNS, Labels: map[string]string{discoveryv1.LabelServiceName: "wake"}},
		Endpoints: []discoveryv1.Endpoint{
			endpoint("boosted", true), endpoint("starting", false), endpoint("settled", true),
			endpoint("unannotated", true), endpoint("gone", true),
		},
	}
	objs := []client.Object{fn, pod("boosted", "1", "150m"), pod("starting", "1", "150m"), pod("settled", "150m", "150m"), pod("unannotated", "400m", "")}

	type resize struct{ pod, body string }
	var resizes []resize
	gets := 0
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(objs...).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*corev1.Pod); ok {
				gets++
			}
			return c.Get(ctx, key, obj, opts...)
		},
		SubResourcePatch: func(_ context.Context, _ client.Client, sub string, obj client.Object, patch client.Patch, _ ...client.SubResourcePatchOption) error {
			require.Equal(t, "resize", sub)
			require.Equal(t, types.StrategicMergePatchType, patch.Type())
			body, err := patch.Data(obj)
			require.NoError(t, err)
			resizes = append(resizes, resize{obj.GetName(), string(body)})
			return nil
		},
	}).Build()
	m, err := NewMetrics(prometheus.NewRegistry())
	require.NoError(t, err)
	r := New(c, &recorder{}, m, nil, Options{Config: testConfig(t), API: c})

	run := func(f *v1alpha2.Function, slices ...discoveryv1.EndpointSlice) {
		t.Helper()
		p := newPass(f, &r.cfg, metav1.Now())
		p.endpointSlices = slices
		out, err := r.startupCPU(context.Background(), p)
		require.NoError(t, err)
		assert.False(t, out.Ends())
	}

	run(fn, slice)
	assert.Equal(t, []resize{{"boosted", `{"spec":{"containers":[{"name":"function","resources":{"limits":{"cpu":"150m"}}}]}}`}}, resizes)
	assert.Equal(t, 4, gets, "each ready Pod read once: boosted, settled, unannotated, gone")

	run(fn, slice)
	assert.Len(t, resizes, 1, "a Pod seen ready is not read or resized again")
	assert.Equal(t, 4, gets)

	// The starting Pod becomes ready: only it is read and resized.
	slice.Endpoints[1] = endpoint("starting", true)
	run(fn, slice)
	require.Len(t, resizes, 2)
	assert.Equal(t, "starting", resizes[1].pod)
	assert.Equal(t, 5, gets)

	// A Function that does not scale to zero resizes nothing.
	other := newFunction("steady")
	pods := slice.DeepCopy()
	pods.Labels[discoveryv1.LabelServiceName] = "steady"
	run(other, *pods)
	assert.Len(t, resizes, 2)
	assert.Equal(t, 5, gets)
}

// TestResizedPodsForgetPodsNoLongerReady: a Pod that left the ready list is
// forgotten, so a replica that comes back is looked at again.
func TestResizedPodsForgetPodsNoLongerReady(t *testing.T) {
	s := newResizedPods()
	fn := types.NamespacedName{Namespace: testNS, Name: "wake"}
	a, b := types.NamespacedName{Namespace: testNS, Name: "a"}, types.NamespacedName{Namespace: testNS, Name: "b"}
	s.add(fn, "a")
	s.add(fn, "b")
	s.keep(fn, []types.NamespacedName{a})
	assert.True(t, s.done(fn, "a"))
	assert.False(t, s.done(fn, "b"))
	s.keep(fn, []types.NamespacedName{b})
	assert.Empty(t, s.pods, "a Function without remembered Pods leaves no entry")
	s.add(fn, "a")
	s.forget(fn)
	assert.Empty(t, s.pods)
}

// TestStartupCPURefusedResizeKeepsThePassGoing: a resize the API server
// refuses (here: no permission) does not end the pass; it comes again
// within resizeRetry and tries the Pod anew.
func TestStartupCPURefusedResizeKeepsThePassGoing(t *testing.T) {
	fn := newFunction("wake")
	fn.Spec.ScaleConfig = &v1alpha2.ScaleConfig{MinReplicas: ptr.To[int32](0), MaxReplicas: ptr.To[int32](1)}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "boosted", Namespace: testNS, Annotations: map[string]string{resources.AnnotationCPULimitAfterStart: "150m"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: resources.ContainerFunction, Resources: corev1.ResourceRequirements{
			Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}},
	}
	tries := 0
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(fn, pod).WithInterceptorFuncs(interceptor.Funcs{
		SubResourcePatch: func(context.Context, client.Client, string, client.Object, client.Patch, ...client.SubResourcePatchOption) error {
			tries++
			return apierrors.NewForbidden(corev1.Resource("pods/resize"), "boosted", errors.New("no permission"))
		},
	}).Build()
	m, err := NewMetrics(prometheus.NewRegistry())
	require.NoError(t, err)
	r := New(c, &recorder{}, m, nil, Options{Config: testConfig(t), API: c})
	p := newPass(fn, &r.cfg, metav1.Now())
	p.endpointSlices = []discoveryv1.EndpointSlice{{
		ObjectMeta: metav1.ObjectMeta{Name: "wake-x1", Namespace: testNS, Labels: map[string]string{discoveryv1.LabelServiceName: "wake"}},
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"198.51.100.9"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Name: "boosted", Namespace: testNS}}},
	}}
	for range 2 {
		out, err := r.startupCPU(context.Background(), p)
		require.NoError(t, err)
		assert.False(t, out.Ends(), "the pass goes on")
		res, err := steps.Run(context.Background(), p, []step{{Name: "startup-cpu", Run: r.startupCPU}}, nil)
		require.NoError(t, err)
		assert.Equal(t, resizeRetry, res.RequeueAfter)
	}
	assert.Equal(t, 4, tries, "the Pod is tried again in every pass")
}
