package resources

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/pkg/build"
	"github.com/kyma-project/serverless-manager/operator/pkg/fips"
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

func envMap(env []corev1.EnvVar) map[string]string {
	out := map[string]string{}
	for _, e := range env {
		out[e.Name] = e.Value
	}
	return out
}

func volumesOf(c corev1.Container) []string {
	out := make([]string, 0, len(c.VolumeMounts))
	for _, m := range c.VolumeMounts {
		out = append(out, m.Name)
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

func TestBuildJobSteps(t *testing.T) {
	tests := []struct {
		name     string
		fn       *v1alpha2.Function
		base     string
		install  string
		depsFile string
	}{
		{"node", newFunction(v1alpha2.RuntimeNodejs20), testBase, "npm install", "package.json"},
		{"override is the base image", newFunction(v1alpha2.RuntimePython312, func(fn *v1alpha2.Function) {
			fn.Spec.RuntimeImageOverride = "my.registry/python:3"
		}), "my.registry/python:3", "pip install", "requirements.txt"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := inputs(tt.fn)
			in.PackageConfigDigest = "sha256:cfg"
			job := BuildJob(in, "hello-vbrth")
			pod := job.Spec.Template.Spec
			require.Len(t, pod.InitContainers, 2)
			prepare, deps := pod.InitContainers[0], pod.InitContainers[1]
			require.Len(t, pod.Containers, 1)
			b := pod.Containers[0]

			assert.Equal(t, "prepare", prepare.Name)
			assert.Equal(t, []string{"/function-controller", "build", "prepare"}, prepare.Command)
			assert.Equal(t, "build", b.Name)
			assert.Equal(t, []string{"/function-controller", "build", "image"}, b.Command)
			for _, c := range []corev1.Container{prepare, b} {
				assert.Equal(t, testConfig().Build.RepoFetcherImage, c.Image, "%s runs the controller's own image", c.Name)
				assert.Equal(t, map[string]string{
					build.EnvRuntime: string(tt.fn.Spec.Runtime), build.EnvBaseImage: tt.base,
					build.EnvDestination: PushImage(in), build.EnvCacheRepository: "k3d-kyma-registry:5000/serverless-dependencies",
					build.EnvPackageConfigDigest: "sha256:cfg", build.EnvInsecure: "true", build.EnvSkipTLSVerify: "true",
					build.EnvCache: "true", build.EnvDockerConfig: "/docker/.docker",
					build.EnvSourceDir: "/workspace/src", build.EnvStateDir: "/state", build.EnvDependenciesDir: "/deps",
				}, envMap(c.Env), c.Name)
				assert.NotContains(t, volumesOf(c), "registry-config", "%s never sees the package registry configuration", c.Name)
			}
			assert.Equal(t, PushImage(in), JobDestination(job))

			assert.Equal(t, "dependencies", deps.Name)
			assert.Equal(t, tt.base, deps.Image, "dependencies install in the runtime image itself")
			require.Len(t, deps.Command, 3)
			assert.Equal(t, []string{"/bin/sh", "-c"}, deps.Command[:2])
			assert.Contains(t, deps.Command[2], `if [ -e "$APP_BUILD_STATE_DIR/cached" ]; then`, "kept dependencies are not installed again")
			assert.Contains(t, deps.Command[2], `cd "$APP_BUILD_DEPENDENCIES_DIR" && `)
			assert.Subset(t, deps.Env, []corev1.EnvVar{{Name: build.EnvStateDir, Value: "/state"}, {Name: build.EnvDependenciesDir, Value: "/deps"}})
			assert.Contains(t, deps.Command[2], tt.install)
			assert.Equal(t, corev1.TerminationMessageFallbackToLogsOnError, deps.TerminationMessagePolicy)
			assert.Contains(t, volumesOf(deps), "registry-config")
			for _, m := range deps.VolumeMounts {
				assert.Equal(t, m.Name != "dependencies" && m.Name != "tmp", m.ReadOnly, "%s of the dependency step", m.MountPath)
			}
			for _, m := range b.VolumeMounts {
				assert.Equal(t, m.Name != "tmp", m.ReadOnly, "%s of the build step", m.MountPath)
			}
			// The sources as the runtime's files.
			src := pod.Volumes[len(pod.Volumes)-1]
			assert.Equal(t, "hello-vbrth", src.ConfigMap.Name)
			assert.Contains(t, src.ConfigMap.Items, corev1.KeyToPath{Key: "dependencies", Path: tt.depsFile})
		})
	}
}

func TestBuildJobInline(t *testing.T) {
	for _, rt := range v1alpha2.Runtimes() {
		t.Run(string(rt), func(t *testing.T) {
			fn := newFunction(rt, func(fn *v1alpha2.Function) {
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
			assert.False(t, *pod.AutomountServiceAccountToken, "no API token in a build Pod")
			sc := pod.SecurityContext
			assert.True(t, *sc.RunAsNonRoot)
			assert.Equal(t, int64(1000), *sc.RunAsUser)
			assert.Equal(t, int64(1000), *sc.RunAsGroup)
			assert.Equal(t, int64(1000), *sc.FSGroup)
			assert.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, sc.SeccompProfile.Type)

			assert.Equal(t, []string{"credentials", "registry-config", "dependencies", "state", "tmp", "sources"}, volumeNames(pod.Volumes))
			assert.Equal(t, "serverless-registry-config-default", pod.Volumes[0].Secret.SecretName)
			assert.Equal(t, []corev1.KeyToPath{{Key: ".dockerconfigjson", Path: ".docker/config.json"}}, pod.Volumes[0].Secret.Items)
			assert.Equal(t, "serverless-package-registry-config", pod.Volumes[1].Secret.SecretName)
			assert.True(t, *pod.Volumes[1].Secret.Optional)

			require.Len(t, pod.InitContainers, 2)
			all := append(append([]corev1.Container{}, pod.InitContainers...), pod.Containers...)
			for _, c := range all {
				csc := c.SecurityContext
				assert.False(t, *csc.Privileged, c.Name)
				assert.False(t, *csc.AllowPrivilegeEscalation, c.Name)
				assert.True(t, *csc.ReadOnlyRootFilesystem, c.Name)
				assert.Equal(t, []corev1.Capability{"ALL"}, csc.Capabilities.Drop, c.Name)
				assert.Empty(t, csc.Capabilities.Add, c.Name)
				assert.Equal(t, corev1.PullIfNotPresent, c.ImagePullPolicy, c.Name)
				assert.Contains(t, mounts(c.VolumeMounts), mount{"sources", "/workspace/src", ""}, c.Name)
			}
			for _, c := range []corev1.Container{pod.InitContainers[1], pod.Containers[0]} {
				assert.True(t, resource.MustParse("1100Mi").Equal(c.Resources.Limits[corev1.ResourceMemory]), c.Name)
				assert.True(t, resource.MustParse("500m").Equal(c.Resources.Requests[corev1.ResourceCPU]), c.Name)
			}
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
			assert.Equal(t, []string{"credentials", "registry-config", "dependencies", "state", "tmp", "workspace"}, volumeNames(pod.Volumes))
			assert.NotNil(t, pod.Volumes[5].EmptyDir)

			require.Len(t, pod.InitContainers, 3)
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

			// The later steps read the fetched baseDir, as the tag names it.
			for _, c := range append(pod.InitContainers[1:], pod.Containers...) {
				assert.Contains(t, mounts(c.VolumeMounts), mount{"workspace", "/workspace/src", "orders-service/function"}, c.Name)
			}
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
		{"our build step", job(corev1.Container{Name: "build", Env: []corev1.EnvVar{{Name: "APP_BUILD_RUNTIME", Value: "nodejs22"}, {Name: "APP_BUILD_DESTINATION", Value: "r/ns-fn:def"}}}), "r/ns-fn:def"},
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

// The cache's slim Job still names its destination, for our Jobs and for
// the kaniko Jobs of 1.8.4, and keeps what the reconciler reads.
func TestSlimJobKeepsTheDestination(t *testing.T) {
	fn := newFunction(v1alpha2.RuntimeNodejs22)
	ours := BuildJob(inputs(fn), "hello-vbrth")
	ours.Annotations = map[string]string{"serverless.kyma-project.io/function-generation": "3"}
	kaniko := ours.DeepCopy()
	kaniko.Spec.Template.Spec.InitContainers = nil
	kaniko.Spec.Template.Spec.Containers = []corev1.Container{{Name: ContainerExecutor, Args: []string{"--insecure", "--destination=r.example/fn:abc", "--cache=true"}}}
	for name, j := range map[string]*batchv1.Job{"ours": ours, "kaniko": kaniko} {
		t.Run(name, func(t *testing.T) {
			j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
			slim := SlimJob(j)
			assert.NotEmpty(t, JobDestination(j))
			assert.Equal(t, JobDestination(j), JobDestination(slim))
			assert.Equal(t, j.Labels, slim.Labels)
			assert.Equal(t, j.Annotations, slim.Annotations)
			assert.Equal(t, j.OwnerReferences, slim.OwnerReferences)
			assert.Equal(t, j.Status, slim.Status)
			assert.Empty(t, slim.Spec.Template.Spec.InitContainers)
			assert.Empty(t, slim.Spec.Template.Spec.Volumes)
		})
	}
}

// In FIPS mode every build step that runs the controller's binary (fetch,
// prepare, build) gets the switch and GODEBUG=fips140=only, without which
// it would refuse to start; the dependency step runs the runtime image and
// gets neither. Outside FIPS mode no step does.
func TestBuildJobFIPSMode(t *testing.T) {
	for _, tc := range []struct {
		name string
		fn   *v1alpha2.Function
		fips bool
		ours []string
	}{
		{name: "inline, FIPS mode", fn: newFunction(v1alpha2.RuntimeNodejs24), fips: true, ours: []string{"prepare", "build"}},
		{name: "Git, FIPS mode", fn: gitFunction(), fips: true, ours: []string{"repo-fetcher", "prepare", "build"}},
		{name: "Git, not FIPS mode", fn: gitFunction(), ours: []string{"repo-fetcher", "prepare", "build"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := inputs(tc.fn)
			cfg := *in.Config
			cfg.FIPSMode = tc.fips
			in.Config = &cfg
			pod := BuildJob(in, "").Spec.Template.Spec
			var seen []string
			for _, c := range append(pod.InitContainers, pod.Containers...) {
				env := envMap(c.Env)
				ours := c.Image == cfg.Build.RepoFetcherImage
				if ours {
					seen = append(seen, c.Name)
				}
				if ours && tc.fips {
					assert.Equal(t, "true", env[fips.EnvMode], c.Name)
					assert.Equal(t, fips.GODEBUG, env[fips.EnvGODEBUG], c.Name)
					continue
				}
				assert.NotContains(t, env, fips.EnvMode, c.Name)
				assert.NotContains(t, env, fips.EnvGODEBUG, c.Name)
			}
			assert.Equal(t, tc.ours, seen)
		})
	}
}
