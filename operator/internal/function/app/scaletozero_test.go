package app_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/internal/function/resources"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
)

// clusterSliceManager is the managed-by value of the cluster's EndpointSlice
// controller, which envtest does not run: the test writes its slices.
const clusterSliceManager = resources.ClusterSliceManager

// activatorPods writes the activator Service's EndpointSlice in the module
// namespace as the cluster's EndpointSlice controller would: its ready Pods.
func (e *env) activatorPods(t *testing.T, addrs ...string) {
	t.Helper()
	eps := []discoveryv1.Endpoint{}
	for _, a := range addrs {
		eps = append(eps, discoveryv1.Endpoint{Addresses: []string{a}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
	}
	e.moduleServiceSlice(t, module.ActivatorServiceName, eps)
}

// moduleServiceSlice writes the EndpointSlice of the module's Service in
// the module namespace as the cluster's EndpointSlice controller would;
// nil endpoints remove it.
func (e *env) moduleServiceSlice(t *testing.T, service string, eps []discoveryv1.Endpoint) {
	t.Helper()
	ctx := context.Background()
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: service + "-abcde", Namespace: baseNS, Labels: map[string]string{
			discoveryv1.LabelServiceName: service, discoveryv1.LabelManagedBy: clusterSliceManager}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   eps,
	}
	live := &discoveryv1.EndpointSlice{}
	err := e.c.Get(ctx, client.ObjectKeyFromObject(s), live)
	switch {
	case apierrors.IsNotFound(err) && eps != nil:
		require.NoError(t, e.c.Create(ctx, s))
	case err == nil && eps == nil:
		require.NoError(t, e.c.Delete(ctx, live))
	case err == nil:
		live.Endpoints = eps
		require.NoError(t, e.c.Update(ctx, live))
	default:
		require.True(t, apierrors.IsNotFound(err), "reading the slice of %s: %v", service, err)
	}
}

// serviceSlice writes the slice the cluster's EndpointSlice controller
// makes for the Function's Service: the Service's labels, a ready Pod.
func (e *env) serviceSlice(t *testing.T, ns, name, addr string) {
	t.Helper()
	labels := resources.FunctionLabels(e.function(t, ns, name))
	labels[discoveryv1.LabelServiceName] = name
	labels[discoveryv1.LabelManagedBy] = clusterSliceManager
	require.NoError(t, e.c.Create(context.Background(), &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name + "-xyz12", Namespace: ns, Labels: labels},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{addr}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
	}))
}

// noReplicas reports the Function's Deployment at zero, as the Deployment
// controller would once its Pods are gone.
func (e *env) noReplicas(t *testing.T, ns, name string) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		deps := e.deployments(c, ns, name)
		if !assert.Len(c, deps, 1) {
			return
		}
		d := deps[0]
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Conditions: []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable", Message: "ok"},
			{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable", Message: "ok"},
		}}
		assert.NoError(c, e.c.Status().Update(context.Background(), &d))
	}, eventual, tick)
}

// routing is what a request to the Function's Service meets: the
// Service's selector and the addresses of our slice (nil: no slice).
type routing struct {
	selector  map[string]string
	activator []string
	hasSlice  bool
}

func (e *env) routing(t require.TestingT, ns, name string) routing {
	ctx := context.Background()
	svc := &corev1.Service{}
	require.NoError(t, e.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, svc))
	var slices discoveryv1.EndpointSliceList
	require.NoError(t, e.c.List(ctx, &slices, client.InNamespace(ns),
		client.MatchingLabels{discoveryv1.LabelManagedBy: module.ActivatorSliceManagedBy, discoveryv1.LabelServiceName: name}))
	out := routing{selector: svc.Spec.Selector, hasSlice: len(slices.Items) > 0}
	for _, s := range slices.Items {
		for _, ep := range s.Endpoints {
			out.activator = append(out.activator, ep.Addresses...)
		}
	}
	return out
}

func (e *env) waitRouting(t *testing.T, ns, name string, want routing, msg string) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got := e.routing(c, ns, name)
		assert.Equal(c, want.hasSlice, got.hasSlice, "slice")
		assert.Equal(c, want.selector, got.selector, "selector")
		assert.ElementsMatch(c, want.activator, got.activator, "activator endpoints")
	}, eventual, tick, msg)
}

// A Function with minReplicas 0 against a real API server, in build and in
// buildless mode: parked while no replica is ready, served once one is,
// parked and drained to zero when asked, served again after a wake. A
// Function without minReplicas 0 gets none of it.
func TestScaleToZero(t *testing.T) {
	ctx := context.Background()
	e := start(t, quickDrain)
	e.activatorPods(t, "10.9.0.1", "10.9.0.2")

	t.Run("a Function without minReplicas 0 is left as before", func(t *testing.T) {
		ns := e.namespace(t, "plain")
		fn := e.runFunction(t, ns, "plain")
		e.waitRouting(t, ns, "plain", routing{selector: resources.SelectorLabels(fn)}, "no slice, the selector")
		assert.Zero(t, e.writes.of(ns, "plain")["create *v1.EndpointSlice"])
	})

	t.Run("build mode", func(t *testing.T) {
		ns := e.namespace(t, "stz-build")
		e.createFunction(t, ns, "hello")
		e.edit(t, ns, "hello", func(fn *v1alpha2.Function) {
			fn.Spec.ScaleConfig = &v1alpha2.ScaleConfig{MinReplicas: ptr.To[int32](0), MaxReplicas: ptr.To[int32](1)}
		})
		e.waitCondition(t, ns, "hello", v1alpha2.ConditionBuildReady, corev1.ConditionUnknown, v1alpha2.ReasonJobCreated)
		e.finishJob(t, e.jobs(t, ns, "hello")[0], true)
		dep := e.waitDeployment(t, ns, "hello")
		fn := e.function(t, ns, "hello")
		selector := resources.SelectorLabels(fn)
		e.waitRouting(t, ns, "hello", routing{selector: selector, hasSlice: true, activator: []string{"10.9.0.1", "10.9.0.2"}},
			"waking: no replica ready, the cluster lists the starting ones")

		// An activator Pod more: every slice of a Function without a ready
		// replica follows.
		e.activatorPods(t, "10.9.0.1", "10.9.0.2", "10.9.0.3")
		e.waitRouting(t, ns, "hello", routing{selector: selector, hasSlice: true, activator: []string{"10.9.0.1", "10.9.0.2", "10.9.0.3"}}, "the activator's Pods")

		// Ready: our slice emptied once the Service's own slice shows the
		// replica.
		e.readyDeployment(t, dep)
		e.waitRouting(t, ns, "hello", routing{selector: selector, hasSlice: true, activator: []string{"10.9.0.1", "10.9.0.2", "10.9.0.3"}},
			"the activator kept until the Service's slice is ready")
		e.serviceSlice(t, ns, "hello", "10.1.0.7")
		e.waitRouting(t, ns, "hello", routing{selector: selector, hasSlice: true}, "served")
		e.waitCondition(t, ns, "hello", v1alpha2.ConditionRunning, corev1.ConditionTrue, v1alpha2.ReasonDeploymentReady)
		svc := &corev1.Service{}
		require.NoError(t, e.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "hello"}, svc))
		clusterIP, uid := svc.Spec.ClusterIP, svc.UID

		// Asked for zero: parked; the drain finds no Pod (envtest runs
		// none) and scales the Deployment to zero after the settle time.
		e.edit(t, ns, "hello", func(fn *v1alpha2.Function) { fn.Spec.Replicas = ptr.To[int32](0) })
		e.waitRouting(t, ns, "hello", routing{hasSlice: true, activator: []string{"10.9.0.1", "10.9.0.2", "10.9.0.3"}}, "parked")
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			var own discoveryv1.EndpointSliceList
			assert.NoError(c, e.c.List(ctx, &own, client.InNamespace(ns),
				client.MatchingLabels{discoveryv1.LabelManagedBy: clusterSliceManager, discoveryv1.LabelServiceName: "hello"}))
			assert.Empty(c, own.Items, "the cluster's slice of the parked Service, which it no longer updates, is deleted")
		}, eventual, tick)
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			deps := e.deployments(c, ns, "hello")
			if assert.Len(c, deps, 1) {
				assert.EqualValues(c, 0, ptr.Deref(deps[0].Spec.Replicas, 1), "the Deployment at zero")
			}
		}, eventual, tick)
		fn = e.waitCondition(t, ns, "hello", v1alpha2.ConditionRunning, corev1.ConditionTrue, v1alpha2.ReasonScaledToZero)
		assert.Equal(t, "scaled to zero after 5m0s without a request; the next request starts it", conditionOf(fn, v1alpha2.ConditionRunning).Message)
		assert.Zero(t, fn.Status.Replicas)

		e.noReplicas(t, ns, "hello")

		// Woken: one replica, the selector back at once.
		e.edit(t, ns, "hello", func(fn *v1alpha2.Function) { fn.Spec.Replicas = ptr.To[int32](1) })
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			deps := e.deployments(c, ns, "hello")
			if assert.Len(c, deps, 1) {
				dep = deps[0]
				assert.EqualValues(c, 1, ptr.Deref(dep.Spec.Replicas, 1))
			}
		}, eventual, tick)
		e.waitRouting(t, ns, "hello", routing{selector: selector, hasSlice: true, activator: []string{"10.9.0.1", "10.9.0.2", "10.9.0.3"}},
			"waking: the selector back, the activator kept until a replica is ready")
		e.readyDeployment(t, dep)
		e.waitRouting(t, ns, "hello", routing{selector: selector, hasSlice: true, activator: []string{"10.9.0.1", "10.9.0.2", "10.9.0.3"}},
			"ready; the Service's old slice went with the parking")
		e.serviceSlice(t, ns, "hello", "10.1.0.9") // the cluster's EndpointSlice controller, for the new replica
		e.waitRouting(t, ns, "hello", routing{selector: selector, hasSlice: true}, "served again")
		require.NoError(t, e.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "hello"}, svc))
		assert.Equal(t, clusterIP, svc.Spec.ClusterIP, "the Service kept throughout")
		assert.Equal(t, uid, svc.UID, "updated in place, never recreated")

		// Scale to zero off: the slice goes.
		e.edit(t, ns, "hello", func(fn *v1alpha2.Function) { fn.Spec.ScaleConfig = nil })
		e.waitRouting(t, ns, "hello", routing{selector: selector}, "no slice")
	})

	t.Run("buildless mode", func(t *testing.T) {
		e.stop()
		e.cfg = buildlessConfig(t)
		e.startController(t)
		ns := e.namespace(t, "stz-buildless")
		fn := exampleA(t, ns)
		fn.Spec.ScaleConfig = &v1alpha2.ScaleConfig{MinReplicas: ptr.To[int32](0), MaxReplicas: ptr.To[int32](1)}
		require.NoError(t, e.c.Create(ctx, fn))
		dep := e.waitDeployment(t, ns, fn.Name)
		selector := resources.SelectorLabels(e.function(t, ns, fn.Name))
		e.waitRouting(t, ns, fn.Name, routing{selector: selector, hasSlice: true, activator: []string{"10.9.0.1", "10.9.0.2", "10.9.0.3"}}, "waking")
		got := e.waitCondition(t, ns, fn.Name, v1alpha2.ConditionConfigurationReady, corev1.ConditionTrue, v1alpha2.ReasonFunctionSpecValidated)
		assert.NotContains(t, conditionOf(got, v1alpha2.ConditionConfigurationReady).Message, "Warning", "minReplicas 0 has an effect in buildless mode")

		e.readyDeployment(t, dep)
		e.serviceSlice(t, ns, fn.Name, "10.1.0.8")
		e.waitRouting(t, ns, fn.Name, routing{selector: selector, hasSlice: true}, "served")

		e.edit(t, ns, fn.Name, func(fn *v1alpha2.Function) { fn.Spec.Replicas = ptr.To[int32](0) })
		e.waitRouting(t, ns, fn.Name, routing{hasSlice: true, activator: []string{"10.9.0.1", "10.9.0.2", "10.9.0.3"}}, "parked")
		e.waitCondition(t, ns, fn.Name, v1alpha2.ConditionRunning, corev1.ConditionTrue, v1alpha2.ReasonScaledToZero)
		assert.EqualValues(t, 0, ptr.Deref(e.waitDeployment(t, ns, fn.Name).Spec.Replicas, 1))
	})
}
