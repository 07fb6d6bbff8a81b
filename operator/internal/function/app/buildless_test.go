package app_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/yaml"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/internal/function/config"
	"github.com/kyma-project/serverless-manager/operator/internal/function/reconciler"
)

// buildlessConfig is the chart's buildless configuration with release
// 1.13's images, presets (XS the default) and eventing address: the
// fixtures of the resources package are what 1.13 makes with it.
func buildlessConfig(t *testing.T) config.Config {
	t.Helper()
	env := map[string]string{
		config.EnvFunctionMode:          "buildless",
		config.EnvBuildlessInitImage:    "europe-docker.pkg.dev/kyma-project/prod/function-buildless-init:1.13.0",
		config.EnvPublisherProxyAddress: "http://eventing-publisher-proxy.kyma-system.svc.cluster.local/publish",
		config.EnvResourceConfig: `
function:
  resources:
    defaultPreset: XS
    presets:
      XS: {requestCpu: 50m, requestMemory: 64Mi, limitCpu: 150m, limitMemory: 256Mi}
      S: {requestCpu: 100m, requestMemory: 128Mi, limitCpu: 200m, limitMemory: 256Mi}
`,
	}
	for _, rt := range v1alpha2.Runtimes() {
		env[config.EnvRuntimeImage(rt)] = "europe-docker.pkg.dev/kyma-project/prod/function-runtime-" + string(rt) + ":1.13.0"
	}
	cfg, err := config.Load(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	require.NoError(t, err)
	cfg.GitFetchRequeueDuration = backoff
	return cfg
}

// exampleA is an inline Node.js Function in namespace ns: the resources
// package's fixture hello-function.yaml, without its UID.
func exampleA(t *testing.T, ns string) *v1alpha2.Function {
	fn := release113[v1alpha2.Function](t, "hello-function.yaml", &v1alpha2.Function{})
	fn.Namespace = ns
	return fn
}

// release113 reads a fixture of the resources package for a Function of
// this API server (its UID).
func release113[T any](t *testing.T, file string, fn *v1alpha2.Function) *T {
	t.Helper()
	data, err := os.ReadFile("../resources/testdata/buildless/" + file)
	require.NoError(t, err)
	text := strings.ReplaceAll(string(data), "0f7c5d1e-3b2a-4c8d-9e6f-a1b2c3d4e5f6", string(fn.UID))
	out := new(T)
	require.NoError(t, yaml.UnmarshalStrict([]byte(text), out))
	return out
}

// TestBuildlessMode: a build-mode Function switched to buildless mode rolls
// once and leaves nothing of build mode; a Deployment as release 1.13 made
// it is adopted without a write; a new Function costs three writes; a
// restarted controller writes nothing.
func TestBuildlessMode(t *testing.T) {
	ctx := context.Background()
	e := start(t)

	// Build mode: a Function built and running, with an HPA, in a namespace
	// with the copies.
	built := e.namespace(t, "switch")
	require.NoError(t, e.c.Create(ctx, &v1alpha2.Function{
		ObjectMeta: metav1.ObjectMeta{Name: "built", Namespace: built},
		Spec: v1alpha2.FunctionSpec{
			Runtime:     v1alpha2.RuntimePython312,
			Source:      v1alpha2.Source{Inline: &v1alpha2.InlineSource{Source: "def main(event, context):\n    return 'built'\n"}},
			ScaleConfig: &v1alpha2.ScaleConfig{MinReplicas: ptr.To[int32](1), MaxReplicas: ptr.To[int32](3)},
		},
	}))
	e.waitCondition(t, built, "built", v1alpha2.ConditionBuildReady, corev1.ConditionUnknown, v1alpha2.ReasonJobCreated)
	e.finishJob(t, e.jobs(t, built, "built")[0], true)
	e.readyDeployment(t, e.waitDeployment(t, built, "built"))
	e.waitCondition(t, built, "built", v1alpha2.ConditionRunning, corev1.ConditionTrue, v1alpha2.ReasonDeploymentReady)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Len(c, children(c, e, built, "built", &autoscalingv2.HorizontalPodAutoscalerList{}).Items, 1)
		assert.NotEmpty(c, copiesIn(c, e, built))
	}, eventual, tick)
	require.Len(t, children(t, e, built, "built", &corev1.ConfigMapList{}).Items, 1, "the source ConfigMap")
	buildDep := e.waitDeployment(t, built, "built")

	// Release 1.13's Deployment and Service of Example A, and its status.
	e.stop()
	adopted := e.namespace(t, "ns1")
	fn := exampleA(t, adopted)
	require.NoError(t, e.c.Create(ctx, fn))
	dep113 := release113[appsv1.Deployment](t, "hello-deployment.yaml", fn)
	require.NoError(t, e.c.Create(ctx, dep113))
	e.readyDeployment(t, *dep113)
	svc113 := release113[corev1.Service](t, "hello-service.yaml", fn)
	require.NoError(t, e.c.Create(ctx, svc113))
	fn.Status.FunctionAnnotations = fn.Spec.Annotations
	require.NoError(t, e.c.Status().Update(ctx, fn))
	dep113 = &e.deployments(t, adopted, "hello")[0]

	e.cfg = buildlessConfig(t)
	e.writes.all()
	e.startController(t)

	t.Run("a build-mode Function rolls once and leaves nothing behind", func(t *testing.T) {
		var dep appsv1.Deployment
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			dep = e.deployments(c, built, "built")[0]
			assert.Equal(c, "europe-docker.pkg.dev/kyma-project/prod/function-runtime-python312:1.13.0", dep.Spec.Template.Spec.Containers[0].Image)
		}, eventual, tick)
		assert.Equal(t, buildDep.Name, dep.Name, "the same Deployment")
		assert.Equal(t, buildDep.Generation+1, dep.Generation, "one new generation")
		e.readyDeployment(t, dep)
		// The build-mode status said Running too: first the buildless one.
		e.waitCondition(t, built, "built", v1alpha2.ConditionConfigurationReady, corev1.ConditionTrue, v1alpha2.ReasonFunctionSpecValidated)
		got := e.waitCondition(t, built, "built", v1alpha2.ConditionRunning, corev1.ConditionTrue, v1alpha2.ReasonDeploymentReady)
		assert.Nil(t, got.Status.Condition(v1alpha2.ConditionBuildReady), "no BuildReady")
		assert.Equal(t, v1alpha2.ReasonFunctionSpecValidated, conditionOf(got, v1alpha2.ConditionConfigurationReady).Reason)
		assert.Empty(t, got.Status.BuiltImage)
		assert.Equal(t, dep.Spec.Template.Spec.Containers[0].Image, got.Status.RuntimeImage)

		require.EventuallyWithT(t, func(c *assert.CollectT) {
			assert.Empty(c, e.jobs(c, built, "built"), "build Jobs")
			assert.Empty(c, children(c, e, built, "built", &corev1.ConfigMapList{}).Items, "source ConfigMap")
			assert.Empty(c, children(c, e, built, "built", &autoscalingv2.HorizontalPodAutoscalerList{}).Items, "HPA")
			assert.Empty(c, copiesIn(c, e, built), "copies")
		}, eventual, tick)
		time.Sleep(time.Second)
		assert.Equal(t, buildDep.Generation+1, e.deployments(t, built, "built")[0].Generation, "still one new generation")
		w := e.writes.of(built, "built")
		t.Logf("writes to switch a Function to buildless mode: %v", w)
		assert.Equal(t, 1, w["update *v1.Deployment"])
		assert.Zero(t, w["update *v1.Service"], "its Service fits as it is")
	})

	t.Run("release 1.13's Deployment is adopted without a write", func(t *testing.T) {
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			got := e.function(c, adopted, "hello")
			assert.Equal(c, got.Generation, got.Status.ObservedGeneration)
			assert.Equal(c, v1alpha2.ReasonDeploymentReady, conditionOf(got, v1alpha2.ConditionRunning).Reason)
		}, eventual, tick)
		time.Sleep(time.Second)
		dep := e.deployments(t, adopted, "hello")
		require.Len(t, dep, 1)
		assert.Equal(t, dep113.ResourceVersion, dep[0].ResourceVersion, "Deployment untouched")
		assert.Equal(t, dep113.Generation, dep[0].Generation)
		svc := &corev1.Service{}
		require.NoError(t, e.c.Get(ctx, client.ObjectKeyFromObject(svc113), svc))
		assert.Equal(t, svc113.ResourceVersion, svc.ResourceVersion, "Service untouched")
		assert.Equal(t, map[string]int{"patch/status *v1alpha2.Function": 1}, e.writes.of(adopted, "hello"))
	})

	t.Run("a new Function: Deployment, Service, one status write", func(t *testing.T) {
		ns := e.namespace(t, "fresh")
		e.createFunction(t, ns, "new")
		dep := e.waitDeployment(t, ns, "new")
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			assert.Len(c, children(c, e, ns, "new", &corev1.ServiceList{}).Items, 1)
		}, eventual, tick)
		e.readyDeployment(t, dep)
		got := e.waitCondition(t, ns, "new", v1alpha2.ConditionRunning, corev1.ConditionTrue, v1alpha2.ReasonDeploymentReady)
		assert.Equal(t, v1alpha2.ReasonFunctionSpecValidated, conditionOf(got, v1alpha2.ConditionConfigurationReady).Reason)
		assert.NotNil(t, got.Status.PodSecurityContext)
		w := e.writes.of(ns, "new")
		t.Logf("writes for one Function from creation to Running in buildless mode: %d %v", total(w), w)
		assert.Equal(t, map[string]int{"create *v1.Deployment": 1, "create *v1.Service": 1, "patch/status *v1alpha2.Function": 1}, w)
		assert.Empty(t, copiesIn(t, e, ns), "no copies in buildless mode")
	})

	t.Run("a restarted controller writes nothing", func(t *testing.T) {
		e.stop()
		e.writes.all()
		before := reconciles(t)
		e.startController(t)
		// Every Function is looked at again (built, hello, new), then a
		// moment for a write that pass might still send.
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			assert.GreaterOrEqual(c, reconciles(t)-before, 3.0)
		}, eventual, tick)
		time.Sleep(time.Second)
		assert.Empty(t, e.writes.all())
	})
}

// copiesIn lists what the copies controller made in ns.
func copiesIn(t require.TestingT, e *env, ns string) []string {
	var out []string
	managed := client.MatchingLabels{v1alpha2.LabelManagedBy: v1alpha2.ManagedByController}
	for _, l := range []client.ObjectList{&corev1.SecretList{}, &corev1.ConfigMapList{}, &corev1.ServiceAccountList{}} {
		require.NoError(t, e.c.List(context.Background(), l, client.InNamespace(ns), managed))
		items, err := metaItems(l)
		require.NoError(t, err)
		for _, o := range items {
			if _, isCopy := o.Labels[v1alpha2.LabelConfig]; isCopy {
				out = append(out, o.Name)
			}
		}
	}
	return out
}

func metaItems(l client.ObjectList) ([]metav1.ObjectMeta, error) {
	var out []metav1.ObjectMeta
	switch l := l.(type) {
	case *corev1.SecretList:
		for _, o := range l.Items {
			out = append(out, o.ObjectMeta)
		}
	case *corev1.ConfigMapList:
		for _, o := range l.Items {
			out = append(out, o.ObjectMeta)
		}
	case *corev1.ServiceAccountList:
		for _, o := range l.Items {
			out = append(out, o.ObjectMeta)
		}
	}
	return out, nil
}

// reconciles is how many Function passes ended without error in this test
// process (controller-runtime's counter, kept across controller restarts).
func reconciles(t *testing.T) float64 {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	require.NoError(t, err)
	total := 0.0
	for _, mf := range families {
		if mf.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["controller"] == reconciler.ControllerName && labels["result"] == "success" {
				total += m.GetCounter().GetValue()
			}
		}
	}
	return total
}
