package resources

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
)

// Overridden names exactly what the Pod template does not take from the
// Function: checked against the Deployments the builders make.
func TestOverridden(t *testing.T) {
	everything := func(fn *v1alpha2.Function) {
		for _, name := range []string{"GREETING", "FUNC_NAME", "SERVICE_NAMESPACE", "TRACE_COLLECTOR_ENDPOINT", "PUBLISHER_PROXY_ADDRESS",
			"PYTHONUNBUFFERED", "FUNC_HANDLER_SOURCE", "FUNC_HANDLER_DEPENDENCIES", "HANDLER_PATH", "FUNCTION_PATH"} {
			fn.Spec.Env = append(fn.Spec.Env, corev1.EnvVar{Name: name, Value: "mine"})
		}
		fn.Spec.Annotations = map[string]string{"example.com/a": "b", AnnotationIstioProxyConfig: "{}",
			AnnotationIstioNativeSidecar: "false", AnnotationAlterImageRegistry: "false", AnnotationAddImagePullSecret: "true"}
		fn.Spec.Labels = map[string]string{"team": "a", LabelAppName: "mine"}
	}
	git := func(fn *v1alpha2.Function) {
		fn.Spec.Source = v1alpha2.Source{GitRepository: &v1alpha2.GitRepositorySource{URL: "https://git.example/fn.git",
			Repository: v1alpha2.Repository{BaseDir: "/", Reference: "main"}}}
	}
	tests := []struct {
		name             string
		fn               *v1alpha2.Function
		build, buildless Overridden
	}{
		{name: "nothing set", fn: newFunction(v1alpha2.RuntimeNodejs22)},
		{name: "Node.js, inline", fn: newFunction(v1alpha2.RuntimeNodejs22, everything),
			build: Overridden{Env: []string{"FUNC_NAME", "SERVICE_NAMESPACE", "TRACE_COLLECTOR_ENDPOINT", "PUBLISHER_PROXY_ADDRESS"},
				Annotations: []string{AnnotationIstioProxyConfig}, Labels: []string{LabelAppName}},
			buildless: Overridden{Env: []string{"FUNC_HANDLER_SOURCE", "FUNC_HANDLER_DEPENDENCIES", "HANDLER_PATH"},
				Annotations: []string{AnnotationIstioProxyConfig, AnnotationAlterImageRegistry}, Labels: []string{LabelAppName}}},
		{name: "Python, Git", fn: newFunction(v1alpha2.RuntimePython312, everything, git),
			build: Overridden{Env: []string{"FUNC_NAME", "SERVICE_NAMESPACE", "TRACE_COLLECTOR_ENDPOINT", "PUBLISHER_PROXY_ADDRESS", "PYTHONUNBUFFERED"},
				Annotations: []string{AnnotationIstioProxyConfig}, Labels: []string{LabelAppName}},
			buildless: Overridden{Env: []string{"FUNCTION_PATH"},
				Annotations: []string{AnnotationIstioProxyConfig, AnnotationAlterImageRegistry}, Labels: []string{LabelAppName}}},
		{name: "the module's own values", fn: newFunction(v1alpha2.RuntimeNodejs22, func(fn *v1alpha2.Function) {
			fn.Spec.Annotations = map[string]string{AnnotationIstioProxyConfig: IstioProxyConfig}
			fn.Spec.Labels = map[string]string{LabelAppName: fn.Name}
		})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := inputs(tt.fn)
			assert.Equal(t, tt.build, OverriddenInBuild(in), "build mode")
			assert.Equal(t, tt.buildless, OverriddenInBuildless(tt.fn), "buildless mode")
			assertOverridden(t, tt.fn, Deployment(in), OverriddenInBuild(in))
			buildless := BuildlessDeployment(BuildlessInputs{Function: tt.fn, Config: testConfig(), Commit: "abc"})
			assertOverridden(t, tt.fn, buildless, OverriddenInBuildless(tt.fn))
		})
	}
}

// assertOverridden checks over against what dep's Pods get: the container's
// effective env (the last of each name), annotations and labels.
func assertOverridden(t *testing.T, fn *v1alpha2.Function, dep *appsv1.Deployment, over Overridden) {
	t.Helper()
	tmpl := dep.Spec.Template
	effective := map[string]corev1.EnvVar{}
	for _, e := range tmpl.Spec.Containers[0].Env {
		effective[e.Name] = e
	}
	for _, e := range fn.Spec.Env {
		assert.Equal(t, !slices.Contains(over.Env, e.Name), effective[e.Name].Value == e.Value, "env %s", e.Name)
	}
	for k, v := range fn.Spec.Annotations {
		assert.Equal(t, !slices.Contains(over.Annotations, k), tmpl.Annotations[k] == v, "annotation %s", k)
	}
	for k, v := range fn.Spec.Labels {
		assert.Equal(t, !slices.Contains(over.Labels, k), tmpl.Labels[k] == v, "label %s", k)
	}
}
