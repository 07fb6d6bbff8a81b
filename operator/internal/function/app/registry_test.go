package app_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/internal/function/config"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
)

// registryEndpoints writes the internal registry Service's EndpointSlice
// as the cluster's EndpointSlice controller would; nil removes it.
func (e *env) registryEndpoints(t *testing.T, eps []discoveryv1.Endpoint) {
	t.Helper()
	e.moduleServiceSlice(t, module.RegistryServiceName, eps)
}

// registrySecret is the namespace's registry Secret, taken over by its user
// (the copies leave it alone), naming the internal registry or an external one.
func (e *env) registrySecret(t *testing.T, ns string, internal bool) {
	t.Helper()
	data := map[string][]byte{"isInternal": []byte("false"), "registryAddress": []byte("registry.example:5000")}
	if internal {
		data = map[string][]byte{"isInternal": []byte("true"),
			"pushRegAddr": []byte(module.RegistryServiceName + "." + baseNS + ".svc.cluster.local:5000"), "pullRegAddr": []byte("localhost:32137")}
	}
	data[corev1.DockerConfigJsonKey] = []byte(`{"auths":{}}`)
	require.NoError(t, e.c.Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: config.DefaultRegistrySecretName,
			Labels: map[string]string{v1alpha2.LabelConfig: v1alpha2.ConfigCredentials, v1alpha2.LabelManagedBy: v1alpha2.ManagedByUser}},
		Type: corev1.SecretTypeDockerConfigJson, Data: data,
	}))
}

func registryEndpoint(ready *bool) []discoveryv1.Endpoint {
	return []discoveryv1.Endpoint{{Addresses: []string{"10.1.0.7"}, Conditions: discoveryv1.EndpointConditions{Ready: ready}}}
}

// A build that pushes to the internal registry starts only once the
// registry's Service has a ready endpoint: BuildReady says what it waits
// for, and the registry's slice becoming ready starts the build at once
// (by watch: nothing requeues the Function meanwhile). An external
// registry is never waited for.
func TestBuildWaitsForTheInternalRegistry(t *testing.T) {
	e := start(t)
	// Longer than a pass takes, far shorter than any backoff or requeue.
	const startsWithin = 5 * time.Second
	tests := []struct {
		name      string
		internal  bool
		endpoints []discoveryv1.Endpoint // the registry Service's slice; nil: none
		wantWait  bool
	}{
		{name: "internal, no slice", internal: true, wantWait: true},
		{name: "internal, endpoint not ready", internal: true, endpoints: registryEndpoint(ptr.To(false)), wantWait: true},
		{name: "internal, endpoint ready", internal: true, endpoints: registryEndpoint(ptr.To(true))},
		{name: "internal, readiness unset counts as ready", internal: true, endpoints: registryEndpoint(nil)},
		{name: "external, no slice", internal: false},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := e.namespace(t, "registry-wait-"+string(rune('a'+i)))
			// The build slots are cluster-wide: free for the next case,
			// also when this one fails.
			t.Cleanup(func() { e.finishAll(t, ns) })
			e.registryEndpoints(t, tt.endpoints)
			e.registrySecret(t, ns, tt.internal)
			e.createFunction(t, ns, "hello")
			if tt.wantWait {
				fn := e.waitCondition(t, ns, "hello", v1alpha2.ConditionBuildReady, corev1.ConditionUnknown, v1alpha2.ReasonJobWaiting)
				assert.Equal(t, "waiting for the internal registry "+baseNS+"/"+module.RegistryServiceName+" to have a ready endpoint",
					conditionOf(fn, v1alpha2.ConditionBuildReady).Message)
				assert.Never(t, func() bool { return len(e.jobs(t, ns, "hello")) > 0 }, time.Second, tick, "a build Job while the registry has no ready endpoint")
				e.registryEndpoints(t, registryEndpoint(ptr.To(true)))
			}
			require.EventuallyWithT(t, func(c *assert.CollectT) {
				fn := e.function(c, ns, "hello")
				assert.Len(c, e.jobs(c, ns, "hello"), 1, "build Jobs; BuildReady %s %s: %s", conditionOf(fn, v1alpha2.ConditionBuildReady).Status,
					conditionOf(fn, v1alpha2.ConditionBuildReady).Reason, conditionOf(fn, v1alpha2.ConditionBuildReady).Message)
			}, startsWithin, tick, "the build Job within %s", startsWithin)
		})
	}
}
