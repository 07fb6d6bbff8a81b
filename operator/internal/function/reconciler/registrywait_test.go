package reconciler

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/internal/function/config"
	"github.com/kyma-project/serverless-manager/operator/internal/function/resources"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
)

// internalRegistry makes the registry Secret copy among objs name the
// internal registry, as the chart writes it.
func internalRegistry(objs []client.Object) []client.Object {
	for _, o := range objs {
		if s, ok := o.(*corev1.Secret); ok && s.Name == config.DefaultRegistrySecretName {
			s.Data = map[string][]byte{
				"isInternal": []byte("true"), "pushRegAddr": []byte("serverless-docker-registry.kyma-system.svc.cluster.local:5000"),
				"pullRegAddr": []byte("localhost:32137"), corev1.DockerConfigJsonKey: []byte(`{"auths":{}}`),
			}
		}
	}
	return objs
}

// serviceSlice is an EndpointSlice the cluster made for Service service in
// namespace ns, with one endpoint at ready (nil: unset).
func serviceSlice(ns, service string, ready *bool) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: service + "-x1", Namespace: ns, Labels: map[string]string{
			discoveryv1.LabelServiceName: service, discoveryv1.LabelManagedBy: resources.ClusterSliceManager}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.1.0.7"}, Conditions: discoveryv1.EndpointConditions{Ready: ready}}},
	}
}

// A build Job is created only when the internal registry's Service has a
// ready endpoint; an external registry is never waited for.
func TestBuildJobWaitsForARegistryEndpoint(t *testing.T) {
	base := testConfig(t).BaseNamespace
	tests := []struct {
		name     string
		internal bool
		slices   []client.Object
		wantWait bool
	}{
		{name: "internal, no slice", internal: true, wantWait: true},
		{name: "internal, endpoint not ready", internal: true, slices: []client.Object{serviceSlice(base, module.RegistryServiceName, ptr.To(false))}, wantWait: true},
		{name: "internal, a ready endpoint in another namespace", internal: true, slices: []client.Object{serviceSlice(testNS, module.RegistryServiceName, ptr.To(true))}, wantWait: true},
		{name: "internal, only the registry agent's Service ready", internal: true, slices: []client.Object{serviceSlice(base, module.RegistryAgentServiceName, ptr.To(true))}, wantWait: true},
		{name: "internal, endpoint ready", internal: true, slices: []client.Object{serviceSlice(base, module.RegistryServiceName, ptr.To(true))}},
		{name: "internal, readiness unset counts as ready", internal: true, slices: []client.Object{serviceSlice(base, module.RegistryServiceName, nil)}},
		{name: "external, no slice", internal: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs := prerequisites(testNS)
			if tt.internal {
				objs = internalRegistry(objs)
			}
			f := newFixture(t, append(append(objs, newFunction("hello")), tt.slices...)...)
			requeue := f.reconcile(t, "hello")
			key := types.NamespacedName{Namespace: testNS, Name: "hello"}
			if !tt.wantWait {
				assert.Len(t, f.jobs(t), 1)
				assert.Empty(t, f.r.registryWaits.take(), "nothing waits")
				return
			}
			assert.Empty(t, f.jobs(t), "no build Job while the registry has no ready endpoint")
			c := assertCondition(t, f.function(t, "hello"), v1alpha2.ConditionBuildReady, corev1.ConditionUnknown, v1alpha2.ReasonJobWaiting)
			assert.Equal(t, "waiting for the internal registry "+base+"/serverless-docker-registry to have a ready endpoint", c.Message)
			assert.Empty(t, f.r.slots.Waiting(2), "it does not wait for a build slot")
			assert.Equal(t, []types.NamespacedName{key}, f.r.registryWaits.take(), "a change of the registry's slices requeues it")
			assert.Equal(t, registryRecheck, requeue, "and without one, the next check comes after registryRecheck")

			// The registry's Pod becomes ready (a slice of its own, as
			// the cluster may make): the next pass builds. As after a wait
			// for a slot, the build's start is written once it is news
			// (buildReportWait).
			ready := serviceSlice(base, module.RegistryServiceName, ptr.To(true))
			ready.Name = module.RegistryServiceName + "-x2"
			require.NoError(t, f.client.Create(context.Background(), ready))
			assert.Equal(t, progressReportDelay, f.reconcile(t, "hello"))
			assert.Len(t, f.jobs(t), 1)
			assert.Empty(t, f.r.registryWaits.take(), "nothing waits")
		})
	}
}

// A build already running when the internal registry loses its endpoint
// runs on and fails as it does (its push cannot reach the registry); only
// the retry waits for the registry.
func TestRunningBuildIsNotHeldByTheRegistry(t *testing.T) {
	base := testConfig(t).BaseNamespace
	ready := serviceSlice(base, module.RegistryServiceName, ptr.To(true))
	f := newFixture(t, append(internalRegistry(prerequisites(testNS)), newFunction("hello"), ready)...)
	f.reconcile(t, "hello")
	jobs := f.jobs(t)
	require.Len(t, jobs, 1)

	ready.Endpoints[0].Conditions.Ready = ptr.To(false)
	require.NoError(t, f.client.Update(context.Background(), ready))
	f.reconcile(t, "hello")
	assert.Len(t, f.jobs(t), 1, "the running Job stays")
	assert.NotEqual(t, v1alpha2.ReasonJobWaiting, f.function(t, "hello").Status.Condition(v1alpha2.ConditionBuildReady).Reason)

	f.finishJob(t, &jobs[0], batchv1.JobFailed, "BackoffLimitExceeded")
	f.reconcile(t, "hello")
	assertCondition(t, f.function(t, "hello"), v1alpha2.ConditionBuildReady, corev1.ConditionFalse, v1alpha2.ReasonJobFailed)

	// After the backoff the failed Job goes, and the retry waits.
	f.now = f.now.Add(testConfig(t).GitFetchRequeueDuration)
	f.reconcile(t, "hello")
	assert.Empty(t, f.jobs(t))
	assertCondition(t, f.function(t, "hello"), v1alpha2.ConditionBuildReady, corev1.ConditionUnknown, v1alpha2.ReasonJobWaiting)
}

// The module Services' slices cache selects the registry's and the
// activator's slices, and a change of one requeues the Functions it
// concerns: a registry change those waiting for it, once.
func TestModuleSliceFunctions(t *testing.T) {
	sel, err := ModuleSliceSelector()
	require.NoError(t, err)
	for svc, want := range map[string]bool{
		module.RegistryServiceName: true, module.ActivatorServiceName: true, module.RegistryAgentServiceName: false, "hello": false,
	} {
		assert.Equal(t, want, sel.Matches(labels.Set{discoveryv1.LabelServiceName: svc}), svc)
	}

	stz := stzFunction("sleepy")
	f := newFixture(t, append(internalRegistry(prerequisites(testNS)), newFunction("hello"), stz)...)
	f.reconcile(t, "hello")
	ctx := context.Background()
	registry := serviceSlice(f.r.cfg.BaseNamespace, module.RegistryServiceName, ptr.To(true))
	activator := serviceSlice(f.r.cfg.BaseNamespace, module.ActivatorServiceName, ptr.To(true))
	assert.Equal(t, []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: testNS, Name: "hello"}}},
		f.r.moduleSliceFunctions(ctx, registry), "the Function waiting for the registry")
	assert.Empty(t, f.r.moduleSliceFunctions(ctx, registry), "taken")
	assert.Equal(t, []reconcile.Request{{NamespacedName: client.ObjectKeyFromObject(stz)}},
		f.r.moduleSliceFunctions(ctx, activator), "the scale-to-zero Functions")
	assert.Empty(t, f.r.moduleSliceFunctions(ctx, serviceSlice(f.r.cfg.BaseNamespace, module.RegistryAgentServiceName, nil)))
}
