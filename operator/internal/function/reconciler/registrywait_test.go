package reconciler

import (
	"context"
	"testing"
	"time"

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

// A build that failed while the internal registry was away runs again as
// soon as the registry is ready again (its EndpointSlice changed by a Pod
// that became ready after the failure), not after the backoff; a registry
// ready since before the failure, still away, or external leaves the
// backoff as it is.
func TestFailedBuildRunsAgainWhenTheRegistryIsBack(t *testing.T) {
	base := testConfig(t).BaseNamespace
	stamped := func(ready bool, changed time.Duration, failedAt time.Time) *discoveryv1.EndpointSlice {
		s := serviceSlice(base, module.RegistryServiceName, ptr.To(ready))
		s.Annotations = map[string]string{corev1.EndpointsLastChangeTriggerTime: failedAt.Add(changed).UTC().Format(time.RFC3339Nano)}
		return s
	}
	tests := []struct {
		name     string
		internal bool
		ready    bool          // the registry's endpoint after the failure
		changed  time.Duration // its slice's last change, from the failure
		wantNow  bool
	}{
		{name: "back after the failure", internal: true, ready: true, changed: 3 * time.Second, wantNow: true},
		{name: "ready since before the failure", internal: true, ready: true, changed: -time.Minute},
		{name: "still away", internal: true, ready: false, changed: 3 * time.Second},
		{name: "external registry", internal: false, ready: true, changed: 3 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs := prerequisites(testNS)
			if tt.internal {
				objs = internalRegistry(objs)
			}
			slice := serviceSlice(base, module.RegistryServiceName, ptr.To(true))
			f := newFixture(t, append(objs, newFunction("hello"), slice)...)
			f.reconcile(t, "hello")
			jobs := f.jobs(t)
			require.Len(t, jobs, 1)
			f.finishJob(t, &jobs[0], batchv1.JobFailed, "BackoffLimitExceeded")
			failed := f.jobs(t)[0].Status.Conditions[0].LastTransitionTime.Time // as stored: whole seconds

			after := stamped(tt.ready, tt.changed, failed)
			slice.Endpoints, slice.Annotations = after.Endpoints, after.Annotations
			require.NoError(t, f.client.Update(context.Background(), slice))
			f.now = f.now.Add(5 * time.Second)
			requeue := f.reconcile(t, "hello")
			key := types.NamespacedName{Namespace: testNS, Name: "hello"}
			if tt.wantNow {
				got := f.jobs(t)
				require.Len(t, got, 1, "the failed Job is replaced by a new one")
				assert.NotEqual(t, jobs[0].Name, got[0].Name, "a new build runs")
				assert.Empty(t, f.r.registryWaits.take(), "nothing waits for the registry")
				return
			}
			got := f.jobs(t)
			require.Len(t, got, 1)
			assert.Equal(t, jobs[0].Name, got[0].Name, "the failed Job stays until its backoff ends")
			assertCondition(t, f.function(t, "hello"), v1alpha2.ConditionBuildReady, corev1.ConditionFalse, v1alpha2.ReasonJobFailed)
			assert.Greater(t, requeue, time.Duration(0), "retried after the backoff")
			assert.LessOrEqual(t, requeue, testConfig(t).GitFetchRequeueDuration, "retried after the backoff")
			if tt.internal {
				assert.Equal(t, []types.NamespacedName{key}, f.r.registryWaits.take(), "the registry's next change looks again")
			} else {
				assert.Empty(t, f.r.registryWaits.take(), "an external registry is not watched")
			}
		})
	}
}
