//go:build e2e

package e2e

// FIPS mode on the real node (docs/contributor/fips.md): the manager runs
// as Kyma runs it, from the install manifest (GODEBUG=fips140=only always)
// with KYMA_FIPS_MODE_ENABLED=true, as Kyma's runtime bootstrapper sets it
// in a FIPS landscape. Every module binary then runs FIPS 140-only, from
// the images `make image` built with GOFIPS140=v1.0.0; one that did not
// would refuse to start and its Pod would never be Ready. The manager and
// the controller talk TLS to the API server, restricted to what FIPS
// allows; the build's steps pull the runtime base from the node's registry
// and push to the internal registry.

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/pkg/fips"
	"github.com/kyma-project/serverless-manager/tests/framework"
)

// fipsBinaries are the module's Deployments and the container in each that
// runs a module binary; the manager's is the install manifest's.
var fipsBinaries = []struct{ deployment, container string }{
	{"serverless-manager", "manager"},
	{controllerName, "manager"},
	{"serverless-activator", "activator"},
	{"serverless-docker-registry", "registry-agent"},
}

func TestFIPSModeOnTheRealNode(t *testing.T) {
	e, _ := startManagerInCluster(t, fips.EnvMode+"=true")
	ctx := t.Context()
	// The small-cluster sample: build mode with the internal registry, so
	// the registry agent runs too.
	e.applySample("small-cluster-serverless-cr.yaml")
	e.waitState("default", v1alpha1.StateReady)
	f := newFnEnv(t, e)

	t.Run("every module binary runs FIPS 140-only and started", func(t *testing.T) {
		for _, b := range fipsBinaries {
			d := &appsv1.Deployment{}
			require.NoError(t, e.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: b.deployment}, d))
			c := container(d.Spec.Template.Spec.Containers, b.container)
			require.NotNil(t, c, "container %s of %s", b.container, b.deployment)
			env := map[string]string{}
			for _, v := range c.Env {
				env[v.Name] = v.Value
			}
			assert.Equal(t, fips.GODEBUG, env[fips.EnvGODEBUG], b.deployment)
			assert.Equal(t, "true", env[fips.EnvMode], b.deployment)
			for _, pod := range rolledOutPods(t, e, d) {
				log, err := e.cluster.PodLog(ctx, ns, pod.Name, b.container)
				require.NoError(t, err)
				assert.NotContains(t, log, "refusing to start", pod.Name)
				assert.NotContains(t, log, "not allowed in FIPS 140-only mode", pod.Name)
			}
		}
	})

	// Side by side, as neither waits for the other:
	//   - A real build: npm installs a dependency in the runtime image's
	//     step, our prepare and build steps (the controller's binary, FIPS
	//     140-only) read the base from the node's registry and push to the
	//     internal one; the Function runs the pushed digest and answers.
	//   - The activator (FIPS 140-only) holds a request at zero, wakes the
	//     Function and forwards the request.
	sideBySide(t,
		subtest{"a real build runs FIPS 140-only", func(t *testing.T) { testFIPSBuild(t, f.in(t)) }},
		subtest{"FunctionScalesToZeroAndWakes", func(t *testing.T) { testFunctionScalesToZeroAndWakes(t, f.in(t)) }},
	)

	// Nothing of the run was refused: the controller's log after the build
	// and the wake-up.
	controller := f.controllerPod()
	log, err := e.cluster.PodLog(ctx, ns, controller.Name, "manager")
	require.NoError(t, err)
	assert.NotContains(t, log, "FIPS 140-only mode", "no algorithm refused in the controller")
}

// testFIPSBuild: a Function with an npm dependency builds, its steps that
// run the controller's binary run FIPS 140-only and refused nothing, and
// it answers.
func testFIPSBuild(t *testing.T, f *fnEnv) {
	fnNS := f.cluster.Namespace(t, "fips")
	deps := `{"name": "hello", "version": "1.0.0", "dependencies": {"is-number": "7.0.0"}}`
	require.NoError(t, f.fcs.Create(t.Context(), realFunction(fnNS, "fips", isNumberHandler("fips"), deps)))
	f.runningDigest(fnNS, "fips", "")
	pod := f.buildPod(fnNS, "fips")
	t.Logf("build: %s", stepTimes(pod))
	for _, step := range []string{stepPrepare, stepBuild} {
		c := container(append(pod.Spec.InitContainers, pod.Spec.Containers...), step)
		require.NotNil(t, c, step)
		env := map[string]string{}
		for _, v := range c.Env {
			env[v.Name] = v.Value
		}
		assert.Equal(t, fips.GODEBUG, env[fips.EnvGODEBUG], "build step %s", step)
		assert.NotContains(t, f.stepLog(pod, step), "refusing to start", step)
	}
	f.cluster.WaitForAnswer(t, time.Minute, fnNS, "fips", "/", func(body string) bool {
		return body == "fips: 42 true, x false"
	}, f.dumpsFor(fnNS, "fips")...)
}

func container(cs []corev1.Container, name string) *corev1.Container {
	for i := range cs {
		if cs[i].Name == name {
			return &cs[i]
		}
	}
	return nil
}

// rolledOutPods waits until d's rollout is done and returns its Pods: all
// of them of its current template and Ready (framework.RolloutDone).
func rolledOutPods(t *testing.T, e *env, d *appsv1.Deployment) []corev1.Pod {
	t.Helper()
	framework.WaitFor(t, 2*time.Minute, "the rollout of "+d.Name, framework.RolledOut(e.c, d.Namespace, d.Name),
		e.cluster.DumpPodLogs(d.Namespace, d.Spec.Selector.MatchLabels, 20))
	var pods corev1.PodList
	require.NoError(t, e.c.List(t.Context(), &pods, client.InNamespace(d.Namespace), client.MatchingLabels(d.Spec.Selector.MatchLabels)))
	return pods.Items
}
