package render_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/values"
)

// The controller reads its log format only at start and reloads the level
// from the mounted file: a format change must roll its Pod, while a level
// change (and changes of objects it does not read at start) must not.
func TestControllerPodTemplateRestartsOnlyForTheLogFormat(t *testing.T) {
	r := renderer(t)
	rendered := func(spec v1alpha1.ServerlessSpec) (corev1.PodTemplateSpec, string) {
		v := variant{spec: spec, facts: values.Facts{Nodes: 3, NodePort: 32137, RegistrySecret: map[string][]byte{
			"username": []byte("u"), "password": []byte("p"), "serverAddress": []byte("r.example"), "registryAddress": []byte("r.example/x")}}}
		objs := v.render(t, r)
		d := typed[appsv1.Deployment](t, find(t, objs, "Deployment", "serverless-ctrl-mngr"))
		cm := typed[corev1.ConfigMap](t, find(t, objs, "ConfigMap", "serverless-configuration"))
		return d.Spec.Template, cm.Data["log-config.yaml"]
	}
	tests := []struct {
		name           string
		a, b           v1alpha1.ServerlessSpec
		wantRestart    bool
		wantFileChange bool
	}{
		{"same spec", v1alpha1.ServerlessSpec{}, v1alpha1.ServerlessSpec{}, false, false},
		{"default json to text", v1alpha1.ServerlessSpec{}, v1alpha1.ServerlessSpec{LogFormat: "text"}, true, true},
		{"text to json", v1alpha1.ServerlessSpec{LogFormat: "text"}, v1alpha1.ServerlessSpec{LogFormat: "json"}, true, true},
		{"explicit default format", v1alpha1.ServerlessSpec{}, v1alpha1.ServerlessSpec{LogFormat: "json"}, false, false},
		{"level only", v1alpha1.ServerlessSpec{LogLevel: "info"}, v1alpha1.ServerlessSpec{LogLevel: "debug"}, false, true},
		{"level with the same format", v1alpha1.ServerlessSpec{LogLevel: "warn", LogFormat: "text"}, v1alpha1.ServerlessSpec{LogLevel: "error", LogFormat: "text"}, false, true},
		{"level and format", v1alpha1.ServerlessSpec{LogLevel: "warn"}, v1alpha1.ServerlessSpec{LogLevel: "debug", LogFormat: "text"}, true, true},
		{"network policies", v1alpha1.ServerlessSpec{}, v1alpha1.ServerlessSpec{EnableNetworkPolicies: true}, false, false},
		{"internal registry", v1alpha1.ServerlessSpec{}, v1alpha1.ServerlessSpec{DockerRegistry: &v1alpha1.DockerRegistry{EnableInternal: ptr.To(true)}}, false, false},
		{"external registry", v1alpha1.ServerlessSpec{}, v1alpha1.ServerlessSpec{DockerRegistry: &v1alpha1.DockerRegistry{SecretName: ptr.To("reg")}}, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tplA, logA := rendered(tt.a)
			tplB, logB := rendered(tt.b)
			if tt.wantRestart {
				assert.NotEqual(t, tplA, tplB, "the Pod template must change")
				// Only the log format annotation differs: nothing else restarts it.
				delete(tplA.Annotations, "serverless.kyma-project.io/log-format")
				delete(tplB.Annotations, "serverless.kyma-project.io/log-format")
				assert.Equal(t, tplA, tplB)
			} else {
				assert.Equal(t, tplA, tplB, "the Pod template must stay")
			}
			// Level and format both reach the mounted file.
			assert.Equal(t, tt.wantFileChange, logA != logB, "log configuration file:\n%s\n%s", logA, logB)
		})
	}
}
