package resources

import (
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
)

// Volume names and paths of the build Pod (contract §3.3).
const (
	volumeCredentials    = "credentials"
	volumeRegistryConfig = "registry-config"
	volumeRuntime        = "runtime"
	volumeSources        = "sources"
	volumeWorkspace      = "workspace"

	workspacePath  = "/workspace"
	destinationArg = "--destination="
)

// Git auth types and the keys read from the auth Secret (contract §4.2–4.3).
const (
	GitAuthBasic = "basic"
	GitAuthKey   = "key"
)

// BuildJob is the build Job of a Function (contract §3.3): kaniko builds the
// image from the source ConfigMap (inline; sourceConfigMap is its name) or
// from the repository fetched by an init container (Git). Unlike 1.8.4 it
// has a TTL (the build is remembered in the Function status) and a deadline
// (§11.13).
func BuildJob(in Inputs, sourceConfigMap string) *batchv1.Job {
	fn := in.Function
	files := filesOf(fn.Spec.Runtime)
	git := fn.Spec.Source.Inline == nil && fn.Spec.Source.GitRepository != nil

	volumes := []corev1.Volume{
		{Name: volumeCredentials, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: in.Config.ImageRegistryDefaultDockerConfigSecretName,
			Items:      []corev1.KeyToPath{{Key: RegistryKeyDockerConfigJSON, Path: ".docker/config.json"}},
		}}},
		{Name: volumeRegistryConfig, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: in.Config.PackageRegistryConfigSecretName,
			Optional:   ptr.To(true),
		}}},
		{Name: volumeRuntime, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: DockerfileConfigMapName(fn.Spec.Runtime)},
		}}},
	}
	dockerfile := corev1.VolumeMount{Name: volumeRuntime, ReadOnly: true, MountPath: workspacePath + "/Dockerfile", SubPath: DockerfileKey}
	credentials := corev1.VolumeMount{Name: volumeCredentials, ReadOnly: true, MountPath: "/docker"}
	packageConfig := corev1.VolumeMount{Name: volumeRegistryConfig, ReadOnly: true,
		MountPath: workspacePath + "/registry-config/" + files.packageConfig, SubPath: files.packageConfig}

	var mounts []corev1.VolumeMount
	var initContainers []corev1.Container
	if git {
		volumes = append(volumes, corev1.Volume{Name: volumeWorkspace, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
		mounts = []corev1.VolumeMount{
			credentials,
			// baseDir from the status, as the tag: the Job builds what the tag names (§11.6).
			{Name: volumeWorkspace, MountPath: workspacePath + "/src", SubPath: strings.TrimPrefix(fn.Status.BaseDir, "/")},
			dockerfile,
			packageConfig,
		}
		initContainers = []corev1.Container{repoFetcher(in)}
	} else {
		volumes = append(volumes, corev1.Volume{Name: volumeSources, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: sourceConfigMap},
		}}})
		mounts = []corev1.VolumeMount{
			{Name: volumeSources, ReadOnly: true, MountPath: workspacePath + "/src/" + files.dependencies, SubPath: DependenciesKey},
			{Name: volumeSources, ReadOnly: true, MountPath: workspacePath + "/src/" + files.handler, SubPath: SourceKey},
			dockerfile,
			credentials,
			packageConfig,
		}
	}

	args := make([]string, 0, len(in.Config.Build.ExecutorArgs)+3)
	args = append(args, in.Config.Build.ExecutorArgs...)
	args = append(args, destinationArg+PushImage(in), "--context=dir://"+workspacePath)
	if fn.Spec.RuntimeImageOverride != "" {
		args = append(args, "--build-arg=base_image="+fn.Spec.RuntimeImageOverride)
	}
	buildResources, _ := in.Config.Resources.BuildJob.Resolve(fn.Spec.Runtime, buildRequirements(fn))

	return &batchv1.Job{
		ObjectMeta: childMeta(fn, "-build-"),
		Spec: batchv1.JobSpec{
			Parallelism:             ptr.To[int32](1),
			Completions:             ptr.To[int32](1),
			BackoffLimit:            ptr.To[int32](0),
			ActiveDeadlineSeconds:   ptr.To(int64(JobDeadline.Seconds())),
			TTLSecondsAfterFinished: ptr.To(int32(JobTTL.Seconds())),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{
					Labels:      FunctionLabels(fn),
					Annotations: map[string]string{AnnotationIstioInject: "false"},
				},
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					SecurityContext: &corev1.PodSecurityContext{
						RunAsUser:      ptr.To[int64](0),
						RunAsGroup:     ptr.To[int64](0),
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					},
					Volumes:        volumes,
					InitContainers: initContainers,
					Containers: []corev1.Container{{
						Name:            ContainerExecutor,
						Image:           in.Config.Build.ExecutorImage,
						ImagePullPolicy: corev1.PullIfNotPresent,
						Args:            args,
						Env: []corev1.EnvVar{
							{Name: "DOCKER_CONFIG", Value: "/docker/.docker/"},
							{Name: "GOOGLE_APPLICATION_CREDENTIALS", Value: "/dev/null"},
						},
						Resources:    buildResources,
						VolumeMounts: mounts,
						SecurityContext: &corev1.SecurityContext{
							Privileged: ptr.To(false),
							Capabilities: &corev1.Capabilities{
								Drop: []corev1.Capability{"ALL"},
								Add:  []corev1.Capability{"CHOWN", "FOWNER", "SETGID", "DAC_OVERRIDE"},
							},
							ProcMount:              ptr.To(corev1.DefaultProcMount),
							ReadOnlyRootFilesystem: ptr.To(false),
						},
					}},
				},
			},
		},
	}
}

// repoFetcher writes the files of status.commit (only status.baseDir) into
// the workspace (contract §3.3, §4.3).
func repoFetcher(in Inputs) corev1.Container {
	fn := in.Function
	repo := fn.Spec.Source.GitRepository
	env := []corev1.EnvVar{
		{Name: "APP_REPOSITORY_URL", Value: repo.URL},
		{Name: "APP_REPOSITORY_COMMIT", Value: fn.Status.Commit},
		{Name: "APP_MOUNT_PATH", Value: workspacePath},
		// New: the fetcher writes only baseDir (the executor mounts just that).
		{Name: "APP_REPOSITORY_BASE_DIR", Value: fn.Status.BaseDir},
	}
	if auth := repo.Auth; auth != nil {
		fromSecret := func(name, key string, optional bool) corev1.EnvVar {
			ref := &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: auth.SecretName}, Key: key}
			if optional {
				ref.Optional = ptr.To(true)
			}
			return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: ref}}
		}
		env = append(env, corev1.EnvVar{Name: "APP_REPOSITORY_AUTH_TYPE", Value: auth.Type})
		switch auth.Type {
		case GitAuthBasic:
			env = append(env, fromSecret("APP_REPOSITORY_USERNAME", "username", false), fromSecret("APP_REPOSITORY_PASSWORD", "password", false))
		case GitAuthKey:
			// 1.8.4 adds the passphrase only if the Secret had one when the Job
			// was built; an optional reference needs no Secret read here.
			env = append(env, fromSecret("APP_REPOSITORY_KEY", "key", false), fromSecret("APP_REPOSITORY_PASSWORD", "password", true),
				// New: optional pinned SSH host keys (known_hosts format).
				fromSecret("APP_REPOSITORY_KNOWN_HOSTS", "knownHosts", true))
		}
	}
	return corev1.Container{
		Name: ContainerRepoFetcher,
		// The controller's own image (the chart passes it as the fetcher
		// image) run as `function-controller fetch`; 1.8.4 ran a separate
		// image. A versioned image: no pull on every build.
		Image:           in.Config.Build.RepoFetcherImage,
		Command:         []string{"/" + module.FunctionController().Binary, "fetch"},
		ImagePullPolicy: corev1.PullIfNotPresent,
		Env:             env,
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m"), corev1.ResourceMemory: resource.MustParse("256Mi")},
		},
		VolumeMounts: []corev1.VolumeMount{{Name: volumeWorkspace, MountPath: workspacePath}},
		SecurityContext: &corev1.SecurityContext{
			Privileged:             ptr.To(false),
			Capabilities:           &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			ProcMount:              ptr.To(corev1.DefaultProcMount),
			ReadOnlyRootFilesystem: ptr.To(true),
		},
	}
}

// JobDestination is the image a build Job pushes (its --destination
// argument), "" when it has none. 1.8.4 compares it to decide on a rebuild.
func JobDestination(j *batchv1.Job) string {
	containers := j.Spec.Template.Spec.Containers
	for i := range containers {
		if containers[i].Name != ContainerExecutor && len(containers) > 1 {
			continue
		}
		for _, arg := range containers[i].Args {
			if dest, ok := strings.CutPrefix(arg, destinationArg); ok {
				return dest
			}
		}
	}
	return ""
}

func buildRequirements(fn *v1alpha2.Function) *v1alpha2.ResourceRequirements {
	if rc := fn.Spec.ResourceConfiguration; rc != nil {
		return rc.Build
	}
	return nil
}

func functionRequirements(fn *v1alpha2.Function) *v1alpha2.ResourceRequirements {
	if rc := fn.Spec.ResourceConfiguration; rc != nil {
		return rc.Function
	}
	return nil
}
