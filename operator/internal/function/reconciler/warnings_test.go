package reconciler

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
)

func scaled(min, max int32) *v1alpha2.ScaleConfig {
	return &v1alpha2.ScaleConfig{MinReplicas: ptr.To(min), MaxReplicas: ptr.To(max)}
}

func TestSpecWarnings(t *testing.T) {
	const fixed1 = ": the replica count is fixed at spec.replicas (1), no autoscaler runs"
	tests := []struct {
		name             string
		change           func(fn *v1alpha2.Function)
		build, buildless []string
		sameInBothModes  bool
	}{
		{name: "a fine Function", sameInBothModes: true},
		{name: "a fine Function with everything set", change: func(fn *v1alpha2.Function) {
			fn.Spec.Env = []corev1.EnvVar{{Name: "GREETING", Value: "hi"}, {Name: "FUNC_HANDLER_TIMEOUT", Value: "1"}}
			fn.Spec.Annotations = map[string]string{"example.com/a": "b", "sidecar.istio.io/nativeSidecar": "false",
				"proxy.istio.io/config": `{ "holdApplicationUntilProxyStarts": true }`}
			fn.Spec.Labels = map[string]string{"team": "a", "app.kubernetes.io/name": "hello"}
			fn.Spec.Replicas = ptr.To[int32](2)
		}, sameInBothModes: true},
		{name: "nodejs20 as release 1.13 flags it", change: func(fn *v1alpha2.Function) { fn.Spec.Runtime = v1alpha2.RuntimeNodejs20 },
			build: []string{"runtime nodejs20 is deprecated and will be removed in the future"}, sameInBothModes: true},
		{name: "autoscaling", change: func(fn *v1alpha2.Function) { fn.Spec.ScaleConfig = scaled(1, 3) },
			buildless: []string{"spec.scaleConfig (minReplicas 1, maxReplicas 3) has no effect in buildless mode" + fixed1}},
		{name: "minReplicas above maxReplicas", change: func(fn *v1alpha2.Function) {
			fn.Spec.ScaleConfig = scaled(3, 2)
			fn.Spec.Replicas = ptr.To[int32](4)
		},
			build:     []string{"spec.scaleConfig.minReplicas (3) is above maxReplicas (2): the replica count is fixed at spec.replicas (4), no autoscaler runs"},
			buildless: []string{"spec.scaleConfig (minReplicas 3, maxReplicas 2) has no effect in buildless mode: the replica count is fixed at spec.replicas (4), no autoscaler runs"}},
		{name: "minReplicas equal to maxReplicas but not spec.replicas", change: func(fn *v1alpha2.Function) { fn.Spec.ScaleConfig = scaled(3, 3) },
			build:     []string{"spec.scaleConfig.minReplicas and maxReplicas are both 3" + fixed1},
			buildless: []string{"spec.scaleConfig (minReplicas 3, maxReplicas 3) has no effect in buildless mode" + fixed1}},
		{name: "minReplicas equal to maxReplicas and spec.replicas", change: func(fn *v1alpha2.Function) {
			fn.Spec.ScaleConfig = scaled(2, 2)
			fn.Spec.Replicas = ptr.To[int32](2)
		},
			buildless: []string{"spec.scaleConfig (minReplicas 2, maxReplicas 2) has no effect in buildless mode: the replica count is fixed at spec.replicas (2), no autoscaler runs"}},
		{name: "build resources", change: func(fn *v1alpha2.Function) {
			fn.Spec.ResourceConfiguration = &v1alpha2.ResourceConfiguration{Build: &v1alpha2.ResourceRequirements{Profile: "fast"}}
		}, buildless: []string{"spec.resourceConfiguration.build has no effect in buildless mode: nothing is built"}},
		{name: "function resources only", change: func(fn *v1alpha2.Function) {
			fn.Spec.ResourceConfiguration = &v1alpha2.ResourceConfiguration{Function: &v1alpha2.ResourceRequirements{Profile: "S"}}
		}, sameInBothModes: true},
		{name: "variables the module sets after spec.env", change: func(fn *v1alpha2.Function) {
			fn.Spec.Env = []corev1.EnvVar{{Name: "TRACE_COLLECTOR_ENDPOINT", Value: "x"}, {Name: "HANDLER_PATH", Value: "y"},
				{Name: "FUNC_NAME", Value: "z"}, {Name: "FUNC_HANDLER_SOURCE", Value: "w"}, {Name: "FUNC_NAME", Value: "again"}}
		},
			build: []string{
				"spec.env TRACE_COLLECTOR_ENDPOINT has no effect: the module sets this variable after spec.env",
				"spec.env FUNC_NAME has no effect: the module sets this variable after spec.env"},
			buildless: []string{
				"spec.env HANDLER_PATH has no effect: the module sets this variable after spec.env",
				"spec.env FUNC_HANDLER_SOURCE has no effect: the module sets this variable after spec.env"}},
		{name: "Python variables", change: func(fn *v1alpha2.Function) {
			fn.Spec.Runtime = v1alpha2.RuntimePython312
			fn.Spec.Env = []corev1.EnvVar{{Name: "PYTHONUNBUFFERED", Value: "FALSE"}, {Name: "HANDLER_PATH", Value: "y"}, {Name: "FUNCTION_PATH", Value: "z"}}
		},
			build:     []string{"spec.env PYTHONUNBUFFERED has no effect: the module sets this variable after spec.env"},
			buildless: []string{"spec.env FUNCTION_PATH has no effect: the module sets this variable after spec.env"}},
		{name: "Git sources keep the source variables", change: func(fn *v1alpha2.Function) {
			fn.Spec.Source = v1alpha2.Source{GitRepository: &v1alpha2.GitRepositorySource{URL: "https://git.example/fn.git",
				Repository: v1alpha2.Repository{BaseDir: "/", Reference: "main"}}}
			fn.Spec.Env = []corev1.EnvVar{{Name: "FUNC_HANDLER_SOURCE", Value: "w"}, {Name: "FUNC_HANDLER_DEPENDENCIES", Value: "v"}}
		}, sameInBothModes: true},
		{name: "annotations the module sets", change: func(fn *v1alpha2.Function) {
			fn.Spec.Annotations = map[string]string{"proxy.istio.io/config": "{}", "rt-cfg.kyma-project.io/add-img-pull-secret": "false",
				"rt-cfg.kyma-project.io/alter-img-registry": "true"}
		},
			build: []string{"spec.annotations proxy.istio.io/config has no effect: the module sets this annotation on the Pods"},
			buildless: []string{
				"spec.annotations proxy.istio.io/config has no effect: the module sets this annotation on the Pods",
				"spec.annotations rt-cfg.kyma-project.io/add-img-pull-secret has no effect: the module sets this annotation on the Pods"}},
		{name: "the Pods' name label", change: func(fn *v1alpha2.Function) {
			fn.Spec.Labels = map[string]string{"app.kubernetes.io/name": "other"}
		}, build: []string{"spec.labels app.kubernetes.io/name has no effect: the module sets this label on the Pods to the Function's name"},
			sameInBothModes: true},
		{name: "scale to zero with one replica while awake", change: func(fn *v1alpha2.Function) { fn.Spec.ScaleConfig = scaled(0, 1) },
			sameInBothModes: true},
		{name: "scale to zero with autoscaling", change: func(fn *v1alpha2.Function) { fn.Spec.ScaleConfig = scaled(0, 5) },
			sameInBothModes: true},
		{name: "scale to zero with a window", change: func(fn *v1alpha2.Function) {
			fn.Spec.ScaleConfig = scaled(0, 1)
			fn.Annotations = map[string]string{v1alpha2.AnnotationScaleToZeroAfter: "90s"}
		}, sameInBothModes: true},
		{name: "a window without scale to zero is not read", change: func(fn *v1alpha2.Function) {
			fn.Annotations = map[string]string{v1alpha2.AnnotationScaleToZeroAfter: "soon"}
		}, sameInBothModes: true},
		{name: "scale to zero with a window that does not parse", change: func(fn *v1alpha2.Function) {
			fn.Spec.ScaleConfig = scaled(0, 1)
			fn.Annotations = map[string]string{v1alpha2.AnnotationScaleToZeroAfter: "5. m"}
		}, build: []string{`annotation serverless.kyma-project.io/scale-to-zero-after: "5.m" is not a duration such as 90s, 5m or 1h30m: ` +
			`time: unknown unit " m" in duration "5.m": the Function is not scaled to zero`}, sameInBothModes: true},
		{name: "scale to zero with a window below the minimum", change: func(fn *v1alpha2.Function) {
			fn.Spec.ScaleConfig = scaled(0, 3)
			fn.Annotations = map[string]string{v1alpha2.AnnotationScaleToZeroAfter: "5s"}
		}, build: []string{`annotation serverless.kyma-project.io/scale-to-zero-after: "5s" is shorter than the minimum of 10s: the Function is not scaled to zero`},
			sameInBothModes: true},
		{name: "scale to zero with a hold timeout", change: func(fn *v1alpha2.Function) {
			fn.Spec.ScaleConfig = scaled(0, 1)
			fn.Annotations = map[string]string{v1alpha2.AnnotationWakeTimeout: "2m"}
		}, sameInBothModes: true},
		{name: "scale to zero with a hold timeout beyond the Function's timeout", change: func(fn *v1alpha2.Function) {
			fn.Spec.ScaleConfig = scaled(0, 1)
			fn.Spec.Env = []corev1.EnvVar{{Name: "FUNC_TIMEOUT", Value: "60"}}
			fn.Annotations = map[string]string{v1alpha2.AnnotationWakeTimeout: "2m"}
		}, build: []string{`annotation serverless.kyma-project.io/wake-timeout: "2m" is longer than the Function's timeout of 1m0s (FUNC_TIMEOUT): ` +
			`requests at zero are held for the activator's hold timeout`}, sameInBothModes: true},
		{name: "in order, the runtime first", change: func(fn *v1alpha2.Function) {
			fn.Spec.Runtime = v1alpha2.RuntimeNodejs20
			fn.Spec.ScaleConfig = scaled(5, 1)
			fn.Spec.Labels = map[string]string{"app.kubernetes.io/name": "other"}
		},
			build: []string{"runtime nodejs20 is deprecated and will be removed in the future",
				"spec.scaleConfig.minReplicas (5) is above maxReplicas (1)" + fixed1,
				"spec.labels app.kubernetes.io/name has no effect: the module sets this label on the Pods to the Function's name"},
			buildless: []string{"runtime nodejs20 is deprecated and will be removed in the future",
				"spec.scaleConfig (minReplicas 5, maxReplicas 1) has no effect in buildless mode" + fixed1,
				"spec.labels app.kubernetes.io/name has no effect: the module sets this label on the Pods to the Function's name"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fn := newFunction("hello")
			if tt.change != nil {
				tt.change(fn)
			}
			if tt.sameInBothModes {
				tt.buildless = tt.build
			}
			build, buildless := testConfig(t), buildlessTestConfig(t)
			got := specWarnings(fn, &build)
			assert.Equal(t, tt.build, got, "build mode")
			gotBuildless := specWarnings(fn, &buildless)
			assert.Equal(t, tt.buildless, gotBuildless, "buildless mode")
			for _, w := range append(got, gotBuildless...) {
				assert.NotContains(t, w, ". ", "a warning ends at the first \". \" in a message")
			}
		})
	}
}

func TestWarningsLeadTheMessageOnce(t *testing.T) {
	deprecated := "runtime nodejs20 is deprecated and will be removed in the future"
	scale := "spec.scaleConfig.minReplicas (3) is above maxReplicas (2): the replica count is fixed at spec.replicas (1), no autoscaler runs"
	tests := []struct {
		name, msg string
		warnings  []string
		want      string
	}{
		{"none", "ConfigMap hello-x created", nil, "ConfigMap hello-x created"},
		{"the deprecated runtime, as before", "ConfigMap hello-x created", []string{deprecated},
			"Warning: runtime nodejs20 is deprecated and will be removed in the future. ConfigMap hello-x created"},
		{"two", "Function configured", []string{deprecated, scale},
			"Warning: " + deprecated + ". Warning: " + scale + ". Function configured"},
		{"the same again: not twice", "Warning: " + deprecated + ". Warning: " + scale + ". Function configured", []string{deprecated, scale},
			"Warning: " + deprecated + ". Warning: " + scale + ". Function configured"},
		{"one gone", "Warning: " + deprecated + ". Warning: " + scale + ". Function configured", []string{scale},
			"Warning: " + scale + ". Function configured"},
		{"all gone", "Warning: " + deprecated + ". Function configured", nil, "Function configured"},
		{"a message with sentences of its own", "Warning: " + scale + ". Sources hello updated. Built.", []string{deprecated},
			"Warning: " + deprecated + ". Sources hello updated. Built."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, withWarnings(tt.msg, tt.warnings))
		})
	}
}

// A new warning on a Function already configured: one Warning event, none
// when the same warnings lead another message, none when one goes.
func TestWarningEvents(t *testing.T) {
	msg := func(base string, warnings ...string) string { return withWarnings(base, warnings) }
	cond := func(status corev1.ConditionStatus, m string) []v1alpha2.Condition {
		return []v1alpha2.Condition{{Type: v1alpha2.ConditionConfigurationReady, Status: status, Reason: v1alpha2.ReasonConfigMapUpdated, Message: m}}
	}
	tests := []struct {
		name     string
		old, cur []v1alpha2.Condition
		warning  bool
	}{
		{"a warning appears", cond(corev1.ConditionTrue, msg("a")), cond(corev1.ConditionTrue, msg("a", "w1")), true},
		{"a new Function with a warning", nil, cond(corev1.ConditionTrue, msg("a", "w1")), true},
		{"a second warning appears", cond(corev1.ConditionTrue, msg("a", "w1")), cond(corev1.ConditionTrue, msg("a", "w1", "w2")), true},
		{"the same warning before another message", cond(corev1.ConditionTrue, msg("a", "w1")), cond(corev1.ConditionTrue, msg("b", "w1")), false},
		{"a warning goes", cond(corev1.ConditionTrue, msg("a", "w1", "w2")), cond(corev1.ConditionTrue, msg("a", "w2")), false},
		{"valid again with a warning", cond(corev1.ConditionFalse, "bad"), cond(corev1.ConditionTrue, msg("a", "w1")), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			events := statusEvents(&v1alpha2.FunctionStatus{Conditions: tt.old}, &v1alpha2.FunctionStatus{Conditions: tt.cur})
			if !tt.warning {
				assert.Empty(t, events)
				return
			}
			require.Len(t, events, 1)
			assert.Equal(t, corev1.EventTypeWarning, events[0].kind)
			assert.Equal(t, tt.cur[0].Message, events[0].message)
		})
	}
}

// The controller's passes keep the warnings in step with the spec: they
// come and go with it, never pile up, and each new one is one event.
func TestWarningsFollowTheSpec(t *testing.T) {
	fn := newFunction("hello")
	f := builtFixture(t, fn)
	f.reconcile(t, "hello")
	configured := func() string {
		t.Helper()
		c := f.function(t, "hello").Status.Condition(v1alpha2.ConditionConfigurationReady)
		require.NotNil(t, c)
		require.Equal(t, corev1.ConditionTrue, c.Status)
		return c.Message
	}
	base := configured()
	require.False(t, strings.HasPrefix(base, warningPrefix), base)
	f.rec.events = nil

	f.edit(t, "hello", func(fn *v1alpha2.Function) { fn.Spec.ScaleConfig = scaled(3, 2) })
	f.reconcile(t, "hello")
	want := "Warning: spec.scaleConfig.minReplicas (3) is above maxReplicas (2): the replica count is fixed at spec.replicas (1), no autoscaler runs. " + base
	assert.Equal(t, want, configured())
	require.Len(t, f.rec.events, 1, "one Warning event")
	assert.Equal(t, recorded{corev1.EventTypeWarning, v1alpha2.ReasonConfigMapCreated, want}, f.rec.events[0])

	f.reconcile(t, "hello")
	f.edit(t, "hello", func(fn *v1alpha2.Function) { fn.Spec.Labels = map[string]string{"team": "a"} })
	f.reconcile(t, "hello")
	assert.Equal(t, want, configured(), "not repeated")
	assert.Len(t, f.rec.events, 1, "no event for a warning already there")

	f.edit(t, "hello", func(fn *v1alpha2.Function) { fn.Spec.ScaleConfig = nil })
	f.reconcile(t, "hello")
	assert.Equal(t, base, configured(), "gone with the spec")
	assert.Len(t, f.rec.events, 1)
}
