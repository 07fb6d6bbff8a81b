package resources

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
)

func TestDeploymentEnv(t *testing.T) {
	proxy := "http://eventing-publisher-proxy.kyma-system.svc.cluster.local/publish"
	injectedTail := func() []corev1.EnvVar {
		return []corev1.EnvVar{
			{Name: "FUNC_NAME", Value: "hello"},
			{Name: "SERVICE_NAMESPACE", Value: "fn-test-1"},
			{Name: "TRACE_COLLECTOR_ENDPOINT"},
			{Name: "PUBLISHER_PROXY_ADDRESS", Value: proxy},
			{Name: "FUNC_HANDLER", Value: "main"},
			{Name: "MOD_NAME", Value: "handler"},
			{Name: "FUNC_PORT", Value: "8080"},
		}
	}
	userEnv := []corev1.EnvVar{
		{Name: "GREETING", Value: "hi"},
		{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
		{Name: "FUNC_NAME", Value: "user-duplicate"},
	}
	// The API server defaults fieldRef.apiVersion; the builder does too.
	userEnvDefaulted := []corev1.EnvVar{
		userEnv[0],
		{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "status.podIP"}}},
		userEnv[2],
	}
	join := func(parts ...[]corev1.EnvVar) []corev1.EnvVar {
		var out []corev1.EnvVar
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	tests := []struct {
		name string
		fn   *v1alpha2.Function
		want []corev1.EnvVar
	}{
		{"nodejs20", newFunction(v1alpha2.RuntimeNodejs20),
			join([]corev1.EnvVar{{Name: "FUNC_RUNTIME", Value: "nodejs20"}}, injectedTail())},
		{"nodejs22 with spec.env first", newFunction(v1alpha2.RuntimeNodejs22, func(fn *v1alpha2.Function) { fn.Spec.Env = userEnv }),
			join(userEnvDefaulted, []corev1.EnvVar{{Name: "FUNC_RUNTIME", Value: "nodejs22"}}, injectedTail())},
		{"python312 adds PYTHONPATH (1.8.4 literal) and PYTHONUNBUFFERED", newFunction(v1alpha2.RuntimePython312),
			join([]corev1.EnvVar{
				{Name: "FUNC_RUNTIME", Value: "python312"},
				{Name: "PYTHONPATH", Value: "$(KUBELESS_INSTALL_VOLUME)/lib.python3.12/site-packages:$(KUBELESS_INSTALL_VOLUME)"},
				{Name: "PYTHONUNBUFFERED", Value: "TRUE"},
			}, injectedTail())},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dep := Deployment(inputs(tt.fn))
			assert.Equal(t, tt.want, dep.Spec.Template.Spec.Containers[0].Env)
		})
	}
	t.Run("spec.env is not modified", func(t *testing.T) {
		fn := newFunction(v1alpha2.RuntimeNodejs20, func(fn *v1alpha2.Function) { fn.Spec.Env = userEnv })
		Deployment(inputs(fn))
		assert.Empty(t, fn.Spec.Env[1].ValueFrom.FieldRef.APIVersion)
	})
}

func TestDeployment(t *testing.T) {
	fn := newFunction(v1alpha2.RuntimeNodejs20, func(fn *v1alpha2.Function) {
		fn.Spec.Labels = map[string]string{"tier": "backend"}
		fn.Spec.Annotations = map[string]string{"b.example.com/x": "1", "a.example.com/y": "2"}
	})
	in := inputs(fn)
	dep := Deployment(in)

	assert.Equal(t, "hello-", dep.GenerateName)
	assert.Equal(t, "fn-test-1", dep.Namespace)
	assert.Equal(t, FunctionLabels(fn), dep.Labels)
	assert.Equal(t, map[string]string{AnnotationPodAnnotationKeys: "a.example.com/y,b.example.com/x"}, dep.Annotations)
	require.Len(t, dep.OwnerReferences, 1)
	assert.Equal(t, int32(1), *dep.Spec.Replicas, "replicas fall back to 1")
	assert.Equal(t, int32(0), *dep.Spec.RevisionHistoryLimit)
	assert.Equal(t, SelectorLabels(fn), dep.Spec.Selector.MatchLabels)
	assert.Nil(t, dep.Spec.ProgressDeadlineSeconds)
	assert.Empty(t, dep.Spec.Strategy.Type)

	tmpl := dep.Spec.Template
	assert.Equal(t, podLabels(fn), tmpl.Labels)
	assert.Equal(t, map[string]string{
		"b.example.com/x":       "1",
		"a.example.com/y":       "2",
		"proxy.istio.io/config": `{ "holdApplicationUntilProxyStarts": true }`,
	}, tmpl.Annotations)

	pod := tmpl.Spec
	assert.Equal(t, "serverless-function", pod.ServiceAccountName)
	assert.Equal(t, int64(10001), *pod.SecurityContext.RunAsUser)
	assert.Equal(t, int64(10001), *pod.SecurityContext.RunAsGroup)
	assert.Nil(t, pod.SecurityContext.RunAsNonRoot)
	assert.Nil(t, pod.SecurityContext.FSGroup)
	assert.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, pod.SecurityContext.SeccompProfile.Type)
	assert.Empty(t, pod.ImagePullSecrets)
	require.Len(t, pod.Volumes, 1)
	assert.Equal(t, "tmp-dir", pod.Volumes[0].Name)
	assert.Equal(t, "100Mi", pod.Volumes[0].EmptyDir.SizeLimit.String())

	require.Len(t, pod.Containers, 1)
	c := pod.Containers[0]
	assert.Equal(t, "function", c.Name)
	assert.Equal(t, "k3d-kyma-registry:5000/fn-test-1-hello:"+ImageTag(in), c.Image)
	assert.Equal(t, corev1.PullIfNotPresent, c.ImagePullPolicy)
	assert.Empty(t, c.Ports)
	assert.Equal(t, []corev1.VolumeMount{{Name: "tmp-dir", MountPath: "/tmp"}}, c.VolumeMounts)
	assert.True(t, resource.MustParse("1Gi").Equal(c.Resources.Limits[corev1.ResourceMemory]))
	assert.True(t, resource.MustParse("400m").Equal(c.Resources.Requests[corev1.ResourceCPU]))

	httpGet := &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}
	assert.Equal(t, &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: httpGet}, PeriodSeconds: 1, FailureThreshold: 150}, c.StartupProbe)
	assert.Equal(t, &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: httpGet}, PeriodSeconds: 5, TimeoutSeconds: 2, FailureThreshold: 1}, c.ReadinessProbe)
	assert.Equal(t, &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: httpGet}, PeriodSeconds: 5, TimeoutSeconds: 4, FailureThreshold: 3}, c.LivenessProbe)

	assert.Equal(t, &corev1.SecurityContext{
		Privileged:             ptr.To(false),
		Capabilities:           &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		ProcMount:              ptr.To(corev1.DefaultProcMount),
		ReadOnlyRootFilesystem: ptr.To(true),
	}, c.SecurityContext)

	t.Run("replicas from spec, zero kept", func(t *testing.T) {
		fn := newFunction(v1alpha2.RuntimeNodejs20, func(fn *v1alpha2.Function) { fn.Spec.Replicas = ptr.To[int32](0) })
		assert.Equal(t, int32(0), *Deployment(inputs(fn)).Spec.Replicas)
	})
	t.Run("no spec.annotations: empty key record", func(t *testing.T) {
		dep := Deployment(inputs(newFunction(v1alpha2.RuntimeNodejs20)))
		v, ok := dep.Annotations[AnnotationPodAnnotationKeys]
		assert.True(t, ok)
		assert.Empty(t, v)
	})
}

// spec.podSecurityContext and spec.containerSecurityContext reach the Pod
// field by field: what the Function sets wins, what it leaves unset keeps
// 1.8.4's value (without them the Pod is 1.8.4's, TestDeployment).
func TestDeploymentSecurityContexts(t *testing.T) {
	base18Pod := &corev1.PodSecurityContext{
		RunAsUser: ptr.To[int64](10001), RunAsGroup: ptr.To[int64](10001),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	base18Container := &corev1.SecurityContext{
		Privileged:             ptr.To(false),
		Capabilities:           &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		ProcMount:              ptr.To(corev1.DefaultProcMount),
		ReadOnlyRootFilesystem: ptr.To(true),
	}
	tests := []struct {
		name          string
		pod           *corev1.PodSecurityContext
		container     *corev1.SecurityContext
		wantPod       *corev1.PodSecurityContext
		wantContainer *corev1.SecurityContext
	}{
		{name: "unset: 1.8.4's", wantPod: base18Pod, wantContainer: base18Container},
		{name: "empty: 1.8.4's", pod: &corev1.PodSecurityContext{}, container: &corev1.SecurityContext{},
			wantPod: base18Pod, wantContainer: base18Container},
		{name: "fields added to the base",
			pod:       &corev1.PodSecurityContext{FSGroup: ptr.To[int64](1000), SupplementalGroups: []int64{1000}},
			container: &corev1.SecurityContext{RunAsNonRoot: ptr.To(true), AllowPrivilegeEscalation: ptr.To(false)},
			wantPod: &corev1.PodSecurityContext{
				RunAsUser: ptr.To[int64](10001), RunAsGroup: ptr.To[int64](10001), FSGroup: ptr.To[int64](1000), SupplementalGroups: []int64{1000},
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			wantContainer: &corev1.SecurityContext{
				Privileged: ptr.To(false), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				ProcMount: ptr.To(corev1.DefaultProcMount), ReadOnlyRootFilesystem: ptr.To(true),
				RunAsNonRoot: ptr.To(true), AllowPrivilegeEscalation: ptr.To(false),
			}},
		{name: "base fields overridden (release 1.13's user 1000)",
			pod:       &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](1000), RunAsGroup: ptr.To[int64](1000), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}},
			container: &corev1.SecurityContext{ReadOnlyRootFilesystem: ptr.To(false), Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_BIND_SERVICE"}}},
			wantPod:   &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](1000), RunAsGroup: ptr.To[int64](1000), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}},
			wantContainer: &corev1.SecurityContext{
				Privileged: ptr.To(false), Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_BIND_SERVICE"}},
				ProcMount: ptr.To(corev1.DefaultProcMount), ReadOnlyRootFilesystem: ptr.To(false),
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fn := newFunction(v1alpha2.RuntimeNodejs24, func(fn *v1alpha2.Function) {
				fn.Spec.PodSecurityContext, fn.Spec.ContainerSecurityContext = tt.pod, tt.container
			})
			before := fn.DeepCopy()
			pod := Deployment(inputs(fn)).Spec.Template.Spec
			assert.Equal(t, tt.wantPod, pod.SecurityContext)
			assert.Equal(t, tt.wantContainer, pod.Containers[0].SecurityContext)
			assert.Equal(t, before, fn, "the Function is not modified")
			assert.Equal(t, tt.wantPod, PodSecurityContext(fn), "the status shows what the Pod gets")
			assert.Equal(t, tt.wantContainer, ContainerSecurityContext(fn))
		})
	}
}

func TestDeploymentSecretVolumes(t *testing.T) {
	hashed := func(secret string) string {
		return "secret-" + sha(secret)[:16]
	}
	type vol struct{ name, secret string }
	tests := []struct {
		name    string
		mounts  []v1alpha2.SecretMount
		volumes []vol
		mountAt []mount
	}{
		{
			name:    "valid names keep the 1.8.4 volume name",
			mounts:  []v1alpha2.SecretMount{{SecretName: "db-creds", MountPath: "/db"}, {SecretName: "api-key", MountPath: "/api"}},
			volumes: []vol{{"db-creds", "db-creds"}, {"api-key", "api-key"}},
			mountAt: []mount{{"tmp-dir", "/tmp", ""}, {"db-creds", "/db", ""}, {"api-key", "/api", ""}},
		},
		{
			name:    "dotted name, over-long name and tmp-dir get derived names",
			mounts:  []v1alpha2.SecretMount{{SecretName: "tls.example.com", MountPath: "/tls"}, {SecretName: "tmp-dir", MountPath: "/t"}},
			volumes: []vol{{hashed("tls.example.com"), "tls.example.com"}, {hashed("tmp-dir"), "tmp-dir"}},
			mountAt: []mount{{"tmp-dir", "/tmp", ""}, {hashed("tls.example.com"), "/tls", ""}, {hashed("tmp-dir"), "/t", ""}},
		},
		{
			name:    "one Secret at two paths shares one volume",
			mounts:  []v1alpha2.SecretMount{{SecretName: "db-creds", MountPath: "/a"}, {SecretName: "db-creds", MountPath: "/b"}},
			volumes: []vol{{"db-creds", "db-creds"}},
			mountAt: []mount{{"tmp-dir", "/tmp", ""}, {"db-creds", "/a", ""}, {"db-creds", "/b", ""}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fn := newFunction(v1alpha2.RuntimeNodejs20, func(fn *v1alpha2.Function) { fn.Spec.SecretMounts = tt.mounts })
			pod := Deployment(inputs(fn)).Spec.Template.Spec
			require.Len(t, pod.Volumes, len(tt.volumes)+1)
			for i, want := range tt.volumes {
				v := pod.Volumes[i+1]
				assert.Equal(t, want.name, v.Name)
				assert.Empty(t, validateLabel(v.Name), "volume name must be a DNS-1123 label")
				require.NotNil(t, v.Secret)
				assert.Equal(t, want.secret, v.Secret.SecretName)
				assert.Equal(t, int32(438), *v.Secret.DefaultMode)
				assert.False(t, *v.Secret.Optional)
			}
			assert.Equal(t, tt.mountAt, mounts(pod.Containers[0].VolumeMounts))
			for _, m := range pod.Containers[0].VolumeMounts[1:] {
				assert.True(t, m.ReadOnly)
			}
		})
	}
	t.Run("64-character name", func(t *testing.T) {
		long := "a123456789012345678901234567890123456789012345678901234567890123"
		fn := newFunction(v1alpha2.RuntimeNodejs20, func(fn *v1alpha2.Function) {
			fn.Spec.SecretMounts = []v1alpha2.SecretMount{{SecretName: long, MountPath: "/l"}}
		})
		v := Deployment(inputs(fn)).Spec.Template.Spec.Volumes[1]
		assert.Equal(t, hashed(long), v.Name)
		assert.Equal(t, long, v.Secret.SecretName)
	})
}

func TestSecretVolumeNameCollision(t *testing.T) {
	derived := "secret-" + sha("tls.example.com")[:16]
	fn := newFunction(v1alpha2.RuntimeNodejs20, func(fn *v1alpha2.Function) {
		fn.Spec.SecretMounts = []v1alpha2.SecretMount{{SecretName: derived, MountPath: "/a"}, {SecretName: "tls.example.com", MountPath: "/b"}}
	})
	vols := Deployment(inputs(fn)).Spec.Template.Spec.Volumes
	require.Len(t, vols, 3)
	assert.Equal(t, derived, vols[1].Name)
	assert.Equal(t, "secret-"+sha("tls.example.com")[:24], vols[2].Name)
}
