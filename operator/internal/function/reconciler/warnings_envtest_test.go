package reconciler

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/charts"
	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/internal/function/config"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/render"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/values"
	"github.com/kyma-project/serverless-manager/tests/support/testenv"
)

// policyName names the chart's admission policy and its binding.
const policyName = "serverless-function-warnings"

// chartPolicy is what the chart renders for Function warnings, with the
// manager's values for mode.
func chartPolicy(t *testing.T, mode string) []*unstructured.Unstructured {
	t.Helper()
	built, err := values.Build(v1alpha1.ServerlessSpec{FunctionMode: mode},
		values.Facts{Namespace: "kyma-system", Nodes: 3, NewSecret: func(n int) string { return strings.Repeat("s", n) }})
	require.NoError(t, err)
	vals, err := built.Values.Map()
	require.NoError(t, err)
	chrt, err := render.LoadChart(charts.Serverless())
	require.NoError(t, err)
	objs, err := render.New(chrt, nil).Render("kyma-system", vals)
	require.NoError(t, err)
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if strings.HasPrefix(o.GetKind(), "ValidatingAdmissionPolicy") {
			out = append(out, o)
		}
	}
	require.Len(t, out, 2, "the policy and its binding")
	return out
}

// The chart's admission policy warns, in both modes, with the texts the
// controller leads ConfigurationReady with, about exactly what the
// controller warns about (all but the deprecated runtime, which release
// 1.13 does not flag at admission, and an invalid scale-to-zero window); it never rejects a Function, and says
// nothing about a fine one.
func TestAdmissionWarnings(t *testing.T) {
	env := testenv.Start(t, "charts/serverless/crds")
	ctx := context.Background()
	collected := &testenv.PolicyWarnings{Policy: policyName}
	cfg := rest.CopyConfig(env.Config)
	cfg.WarningHandler = collected
	c, err := client.New(cfg, client.Options{Scheme: testScheme(t)})
	require.NoError(t, err)
	const ns = "warn-test"
	require.NoError(t, env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))

	fn := func(name string, change func(*v1alpha2.Function)) *v1alpha2.Function {
		f := newFunction(name)
		f.Namespace, f.UID, f.Generation, f.CreationTimestamp = ns, "", 0, metav1.Time{}
		f.Spec.Replicas = nil
		if change != nil {
			change(f)
		}
		return f
	}
	git := v1alpha2.Source{GitRepository: &v1alpha2.GitRepositorySource{URL: "https://git.example/fn.git",
		Repository: v1alpha2.Repository{BaseDir: "/", Reference: "main"}}}
	vars := func(names ...string) []corev1.EnvVar {
		var out []corev1.EnvVar
		for _, n := range names {
			out = append(out, corev1.EnvVar{Name: n, Value: "mine"})
		}
		return out
	}
	// Every name the module sets after spec.env that the API server admits
	// (FUNC_HANDLER_SOURCE and FUNC_HANDLER_DEPENDENCIES are reserved).
	allEnv := vars("GREETING", "FUNC_NAME", "SERVICE_NAMESPACE", "TRACE_COLLECTOR_ENDPOINT", "PUBLISHER_PROXY_ADDRESS",
		"PYTHONUNBUFFERED", "HANDLER_PATH", "FUNCTION_PATH")
	// pinned: the warnings of some cases spelled out, by mode (the others
	// are compared with the controller's only).
	none := map[string][]string{v1alpha1.FunctionModeBuild: {}, v1alpha1.FunctionModeBuildless: {}}
	cases := []struct {
		name   string
		change func(*v1alpha2.Function)
		pinned map[string][]string
	}{
		{"fine", nil, none},
		{"fine with everything set", func(f *v1alpha2.Function) {
			f.Spec.Env = vars("GREETING")
			f.Spec.Labels = map[string]string{"team": "a", "app.kubernetes.io/name": f.Name}
			f.Spec.Annotations = map[string]string{"example.com/a": "b", "proxy.istio.io/config": `{ "holdApplicationUntilProxyStarts": true }`,
				"rt-cfg.kyma-project.io/alter-img-registry": "true"}
			f.Spec.ResourceConfiguration = &v1alpha2.ResourceConfiguration{Function: &v1alpha2.ResourceRequirements{Profile: "S"}}
			f.Spec.Replicas = ptr.To[int32](2)
		}, none},
		{"nodejs20", func(f *v1alpha2.Function) { f.Spec.Runtime = v1alpha2.RuntimeNodejs20 }, none},
		{"min above max", func(f *v1alpha2.Function) { f.Spec.ScaleConfig = scaled(3, 2) }, map[string][]string{
			v1alpha1.FunctionModeBuild:     {"spec.scaleConfig.minReplicas (3) is above maxReplicas (2): the replica count is fixed at spec.replicas (1), no autoscaler runs"},
			v1alpha1.FunctionModeBuildless: {"spec.scaleConfig (minReplicas 3, maxReplicas 2) has no effect in buildless mode: the replica count is fixed at spec.replicas (1), no autoscaler runs"},
		}},
		{"min above max, replicas set", func(f *v1alpha2.Function) {
			f.Spec.ScaleConfig = scaled(30, 2)
			f.Spec.Replicas = ptr.To[int32](5)
		}, nil},
		{"min equals max", func(f *v1alpha2.Function) { f.Spec.ScaleConfig = scaled(3, 3) }, nil},
		{"min equals max equals replicas", func(f *v1alpha2.Function) {
			f.Spec.ScaleConfig = scaled(2, 2)
			f.Spec.Replicas = ptr.To[int32](2)
		}, nil},
		{"autoscaling", func(f *v1alpha2.Function) { f.Spec.ScaleConfig = scaled(1, 4) }, nil},
		{"build resources", func(f *v1alpha2.Function) {
			f.Spec.ResourceConfiguration = &v1alpha2.ResourceConfiguration{Build: &v1alpha2.ResourceRequirements{Profile: "fast"}}
		}, map[string][]string{
			v1alpha1.FunctionModeBuild:     {},
			v1alpha1.FunctionModeBuildless: {"spec.resourceConfiguration.build has no effect in buildless mode: nothing is built"},
		}},
		{"node inline env", func(f *v1alpha2.Function) { f.Spec.Env = allEnv }, nil},
		{"python inline env", func(f *v1alpha2.Function) {
			f.Spec.Runtime = v1alpha2.RuntimePython312
			f.Spec.Source.Inline.Source = "def main(event, context):\n    return 1\n"
			f.Spec.Env = allEnv
		}, nil},
		{"python git env", func(f *v1alpha2.Function) {
			f.Spec.Runtime, f.Spec.Source, f.Spec.Env = v1alpha2.RuntimePython312, git, allEnv
		}, nil},
		{"node git env", func(f *v1alpha2.Function) { f.Spec.Source, f.Spec.Env = git, allEnv }, nil},
		{"annotations", func(f *v1alpha2.Function) {
			f.Spec.Annotations = map[string]string{"proxy.istio.io/config": "{}", "rt-cfg.kyma-project.io/alter-img-registry": "false",
				"rt-cfg.kyma-project.io/add-img-pull-secret": "no", "sidecar.istio.io/nativeSidecar": "false"}
		}, nil},
		{"name label", func(f *v1alpha2.Function) { f.Spec.Labels = map[string]string{"app.kubernetes.io/name": "other"} }, nil},
		{"scale to zero", func(f *v1alpha2.Function) { f.Spec.ScaleConfig = scaled(0, 1) }, none},
		{"scale to zero, autoscaling", func(f *v1alpha2.Function) { f.Spec.ScaleConfig = scaled(0, 4) }, none},
		{"scale to zero, bad window", func(f *v1alpha2.Function) {
			f.Spec.ScaleConfig = scaled(0, 1)
			f.Annotations = map[string]string{v1alpha2.AnnotationScaleToZeroAfter: "5"}
		}, none},
		{"scale to zero, bad hold timeout", func(f *v1alpha2.Function) {
			f.Spec.ScaleConfig = scaled(0, 1)
			f.Annotations = map[string]string{v1alpha2.AnnotationWakeTimeout: "soon"}
		}, none},
	}

	for _, mode := range []string{v1alpha1.FunctionModeBuild, v1alpha1.FunctionModeBuildless} {
		t.Run(mode, func(t *testing.T) {
			controllerCfg := testConfig(t)
			if mode == v1alpha1.FunctionModeBuildless {
				controllerCfg = buildlessTestConfig(t)
			}
			for _, o := range chartPolicy(t, mode) {
				require.NoError(t, env.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), client.FieldOwner("test"), client.ForceOwnership))
			}
			// The API server picks a policy change up within a moment.
			probe := fn("probe", func(f *v1alpha2.Function) {
				f.Spec.ScaleConfig = scaled(3, 2)
				f.Spec.ResourceConfiguration = &v1alpha2.ResourceConfiguration{Build: &v1alpha2.ResourceRequirements{Profile: "fast"}}
			})
			want := expectedWarnings(probe, &controllerCfg)
			require.Eventually(t, func() bool {
				collected.Take()
				if err := c.Create(ctx, probe.DeepCopy(), client.DryRunAll); err != nil {
					return false
				}
				return assert.ObjectsAreEqual(slices.Sorted(slices.Values(want)), slices.Sorted(slices.Values(collected.Take())))
			}, 30*time.Second, 200*time.Millisecond, "the policy of mode %s in effect", mode)

			for i, tt := range cases {
				t.Run(tt.name, func(t *testing.T) {
					f := fn(fmt.Sprintf("%s-%d", mode, i), tt.change)
					collected.Take()
					require.NoError(t, c.Create(ctx, f), "admitted")
					got := collected.Take()
					assert.ElementsMatch(t, expectedWarnings(f, &controllerCfg), got, "create")
					if want, ok := tt.pinned[mode]; ok {
						assert.ElementsMatch(t, want, got)
					}
					stored := &v1alpha2.Function{}
					require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(f), stored), "stored")

					// An update that changes nothing else warns the same.
					stored.Labels = map[string]string{"touched": "yes"}
					require.NoError(t, c.Update(ctx, stored), "admitted")
					assert.ElementsMatch(t, got, collected.Take(), "update")
				})
			}
		})
	}
	// Updates from a fine Function to a warned one and back.
	f := fn("edited", nil)
	require.NoError(t, c.Create(ctx, f))
	collected.Take()
	f.Spec.ScaleConfig = scaled(5, 1)
	f.Spec.Replicas = ptr.To[int32](3)
	require.NoError(t, c.Update(ctx, f))
	assert.Equal(t, []string{"spec.scaleConfig (minReplicas 5, maxReplicas 1) has no effect in buildless mode: the replica count is fixed at spec.replicas (3), no autoscaler runs"},
		collected.Take())
	f.Spec.ScaleConfig = nil
	require.NoError(t, c.Update(ctx, f))
	assert.Empty(t, collected.Take())
	assert.Empty(t, collected.Others(), "no other warnings")
}

// expectedWarnings are the controller's spec warnings for f, but the
// runtime's and the scale-to-zero annotations'.
func expectedWarnings(f *v1alpha2.Function, cfg *config.Config) []string {
	var out []string
	for _, w := range specWarnings(f, cfg) {
		if !strings.HasPrefix(w, "runtime ") && !strings.HasPrefix(w, "annotation "+v1alpha2.AnnotationScaleToZeroAfter) &&
			!strings.HasPrefix(w, "annotation "+v1alpha2.AnnotationWakeTimeout) {
			out = append(out, w)
		}
	}
	return out
}
