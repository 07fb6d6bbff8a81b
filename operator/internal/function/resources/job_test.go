package resources

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
)

var dumpExecutorArgs = []string{"--insecure", "--skip-tls-verify", "--skip-unused-stages", "--log-format=text",
	"--cache=true", "--use-new-run", "--compressed-caching=false"}

type mount struct{ volume, path, subPath string }

func mounts(ms []corev1.VolumeMount) []mount {
	out := make([]mount, 0, len(ms))
	for _, m := range ms {
		out = append(out, mount{m.Name, m.MountPath, m.SubPath})
	}
	return out
}

func volumeNames(vs []corev1.Volume) []string {
	out := make([]string, 0, len(vs))
	for _, v := range vs {
		out = append(out, v.Name)
	}
	return out
}

func TestBuildJobArgs(t *testing.T) {
	tests := []struct {
		name string
		fn   *v1alpha2.Function
		tail []string
	}{
		{"no override", newFunction(v1alpha2.RuntimeNodejs20), nil},
		{"override adds the base_image build arg", newFunction(v1alpha2.RuntimePython312, func(fn *v1alpha2.Function) {
			fn.Spec.RuntimeImageOverride = "my.registry/python:3"
		}), []string{"--build-arg=base_image=my.registry/python:3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := inputs(tt.fn)
			job := BuildJob(in, "hello-vbrth")
			want := append(append([]string{}, dumpExecutorArgs...),
				"--destination=k3d-kyma-registry:5000/fn-test-1-hello:"+ImageTag(in),
				"--context=dir:///workspace")
			want = append(want, tt.tail...)
			require.Len(t, job.Spec.Template.Spec.Containers, 1)
			assert.Equal(t, want, job.Spec.Template.Spec.Containers[0].Args)
			assert.Equal(t, PushImage(in), JobDestination(job))
		})
	}
}

func TestBuildJobInline(t *testing.T) {
	tests := []struct {
		name   string
		rt     v1alpha2.Runtime
		mounts []mount
	}{
		{"nodejs20", v1alpha2.RuntimeNodejs20, []mount{
			{"sources", "/workspace/src/package.json", "dependencies"},
			{"sources", "/workspace/src/handler.js", "source"},
			{"runtime", "/workspace/Dockerfile", "Dockerfile"},
			{"credentials", "/docker", ""},
			{"registry-config", "/workspace/registry-config/.npmrc", ".npmrc"},
		}},
		{"python312", v1alpha2.RuntimePython312, []mount{
			{"sources", "/workspace/src/requirements.txt", "dependencies"},
			{"sources", "/workspace/src/handler.py", "source"},
			{"runtime", "/workspace/Dockerfile", "Dockerfile"},
			{"credentials", "/docker", ""},
			{"registry-config", "/workspace/registry-config/pip.conf", "pip.conf"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fn := newFunction(tt.rt, func(fn *v1alpha2.Function) {
				fn.Labels["local.serverless.kyma-project.io/build"] = "fail"
			})
			job := BuildJob(inputs(fn), "hello-vbrth")

			assert.Equal(t, "hello-build-", job.GenerateName)
			assert.Equal(t, "fn-test-1", job.Namespace)
			assert.Equal(t, FunctionLabels(fn), job.Labels)
			assert.Equal(t, "fail", job.Labels["local.serverless.kyma-project.io/build"])
			require.Len(t, job.OwnerReferences, 1)
			assert.EqualValues(t, testUID, job.OwnerReferences[0].UID)

			assert.Equal(t, int32(1), *job.Spec.Parallelism)
			assert.Equal(t, int32(1), *job.Spec.Completions)
			assert.Equal(t, int32(0), *job.Spec.BackoffLimit)
			assert.Equal(t, int32(86400), *job.Spec.TTLSecondsAfterFinished)
			assert.Equal(t, int64(1800), *job.Spec.ActiveDeadlineSeconds)

			tmpl := job.Spec.Template
			assert.Equal(t, FunctionLabels(fn), tmpl.Labels)
			assert.Equal(t, map[string]string{"sidecar.istio.io/inject": "false"}, tmpl.Annotations)
			pod := tmpl.Spec
			assert.Equal(t, corev1.RestartPolicyNever, pod.RestartPolicy)
			assert.Empty(t, pod.ServiceAccountName)
			assert.Equal(t, int64(0), *pod.SecurityContext.RunAsUser)
			assert.Equal(t, int64(0), *pod.SecurityContext.RunAsGroup)
			assert.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, pod.SecurityContext.SeccompProfile.Type)
			assert.Empty(t, pod.InitContainers)

			assert.Equal(t, []string{"credentials", "registry-config", "runtime", "sources"}, volumeNames(pod.Volumes))
			assert.Equal(t, "serverless-registry-config-default", pod.Volumes[0].Secret.SecretName)
			assert.Equal(t, []corev1.KeyToPath{{Key: ".dockerconfigjson", Path: ".docker/config.json"}}, pod.Volumes[0].Secret.Items)
			assert.Equal(t, "serverless-package-registry-config", pod.Volumes[1].Secret.SecretName)
			assert.True(t, *pod.Volumes[1].Secret.Optional)
			assert.Equal(t, "dockerfile-"+string(tt.rt), pod.Volumes[2].ConfigMap.Name)
			assert.Equal(t, "hello-vbrth", pod.Volumes[3].ConfigMap.Name)

			c := pod.Containers[0]
			assert.Equal(t, "executor", c.Name)
			assert.Equal(t, "europe-docker.pkg.dev/kyma-project/prod/external/gcr.io/kaniko-project/executor:v1.24.0", c.Image)
			assert.Equal(t, corev1.PullIfNotPresent, c.ImagePullPolicy)
			assert.Equal(t, []corev1.EnvVar{
				{Name: "DOCKER_CONFIG", Value: "/docker/.docker/"},
				{Name: "GOOGLE_APPLICATION_CREDENTIALS", Value: "/dev/null"},
			}, c.Env)
			assert.Equal(t, tt.mounts, mounts(c.VolumeMounts))
			for _, m := range c.VolumeMounts {
				assert.True(t, m.ReadOnly, m.MountPath)
			}
			assert.True(t, resource.MustParse("1100Mi").Equal(c.Resources.Limits[corev1.ResourceMemory]))
			assert.True(t, resource.MustParse("500m").Equal(c.Resources.Requests[corev1.ResourceCPU]))
			sc := c.SecurityContext
			assert.False(t, *sc.Privileged)
			assert.False(t, *sc.ReadOnlyRootFilesystem)
			assert.Equal(t, corev1.DefaultProcMount, *sc.ProcMount)
			assert.Equal(t, []corev1.Capability{"ALL"}, sc.Capabilities.Drop)
			assert.Equal(t, []corev1.Capability{"CHOWN", "FOWNER", "SETGID", "DAC_OVERRIDE"}, sc.Capabilities.Add)
		})
	}
}

func TestBuildJobGit(t *testing.T) {
	secretRef := func(name, key string, optional bool) corev1.EnvVar {
		ref := &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "git-creds"}, Key: key}
		if optional {
			ref.Optional = &optional
		}
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: ref}}
	}
	base := []corev1.EnvVar{
		{Name: "APP_REPOSITORY_URL", Value: "https://github.com/kyma-project/examples.git"},
		{Name: "APP_REPOSITORY_COMMIT", Value: "9f0c4e5a2b1d3c4e5f60718293a4b5c6d7e8f901"},
		{Name: "APP_MOUNT_PATH", Value: "/workspace"},
		{Name: "APP_REPOSITORY_BASE_DIR", Value: "/orders-service/function"},
	}
	withAuth := func(typ string) func(*v1alpha2.Function) {
		return func(fn *v1alpha2.Function) {
			fn.Spec.Source.GitRepository.Auth = &v1alpha2.RepositoryAuth{Type: typ, SecretName: "git-creds"}
		}
	}
	tests := []struct {
		name string
		fn   *v1alpha2.Function
		env  []corev1.EnvVar
	}{
		{"public repository", gitFunction(), base},
		{"basic auth", gitFunction(withAuth("basic")), append(append([]corev1.EnvVar{}, base...),
			corev1.EnvVar{Name: "APP_REPOSITORY_AUTH_TYPE", Value: "basic"},
			secretRef("APP_REPOSITORY_USERNAME", "username", false),
			secretRef("APP_REPOSITORY_PASSWORD", "password", false))},
		{"ssh key, passphrase optional", gitFunction(withAuth("key")), append(append([]corev1.EnvVar{}, base...),
			corev1.EnvVar{Name: "APP_REPOSITORY_AUTH_TYPE", Value: "key"},
			secretRef("APP_REPOSITORY_KEY", "key", false),
			secretRef("APP_REPOSITORY_PASSWORD", "password", true),
			secretRef("APP_REPOSITORY_KNOWN_HOSTS", "knownHosts", true))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			job := BuildJob(inputs(tt.fn), "")
			pod := job.Spec.Template.Spec
			assert.Equal(t, []string{"credentials", "registry-config", "runtime", "workspace"}, volumeNames(pod.Volumes))
			assert.NotNil(t, pod.Volumes[3].EmptyDir)

			require.Len(t, pod.InitContainers, 1)
			init := pod.InitContainers[0]
			assert.Equal(t, "repo-fetcher", init.Name)
			assert.Equal(t, "europe-docker.pkg.dev/kyma-project/prod/serverless-function-controller:0.1.0", init.Image)
			assert.Equal(t, corev1.PullIfNotPresent, init.ImagePullPolicy)
			assert.Equal(t, []string{"/function-controller", "fetch"}, init.Command)
			assert.Empty(t, init.Args)
			assert.Equal(t, tt.env, init.Env)
			assert.Equal(t, []mount{{"workspace", "/workspace", ""}}, mounts(init.VolumeMounts))
			assert.True(t, *init.SecurityContext.ReadOnlyRootFilesystem)
			assert.True(t, resource.MustParse("256Mi").Equal(init.Resources.Limits[corev1.ResourceMemory]))

			c := pod.Containers[0]
			assert.Equal(t, []mount{
				{"credentials", "/docker", ""},
				{"workspace", "/workspace/src", "orders-service/function"},
				{"runtime", "/workspace/Dockerfile", "Dockerfile"},
				{"registry-config", "/workspace/registry-config/.npmrc", ".npmrc"},
			}, mounts(c.VolumeMounts))
			assert.False(t, c.VolumeMounts[1].ReadOnly, "the workspace is written by the build")
		})
	}
}

func TestJobDestination(t *testing.T) {
	job := func(containers ...corev1.Container) *batchv1.Job {
		j := &batchv1.Job{}
		j.Spec.Template.Spec.Containers = containers
		return j
	}
	tests := []struct {
		name string
		job  *batchv1.Job
		want string
	}{
		{"executor", job(corev1.Container{Name: "executor", Args: []string{"--insecure", "--destination=r/ns-fn:abc", "--context=dir:///workspace"}}), "r/ns-fn:abc"},
		{"single container of another name (1.8.4 reads the first)", job(corev1.Container{Name: "kaniko", Args: []string{"--destination=r/x:1"}}), "r/x:1"},
		{"executor among several", job(corev1.Container{Name: "sidecar", Args: []string{"--destination=no"}}, corev1.Container{Name: "executor", Args: []string{"--destination=yes"}}), "yes"},
		{"no destination", job(corev1.Container{Name: "executor", Args: []string{"--insecure"}}), ""},
		{"no containers", job(), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { assert.Equal(t, tt.want, JobDestination(tt.job)) })
	}
}
