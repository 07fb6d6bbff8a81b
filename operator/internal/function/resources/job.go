package resources

import (
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/internal/function/config"
	"github.com/kyma-project/serverless-manager/operator/pkg/build"
	"github.com/kyma-project/serverless-manager/operator/pkg/buildflags"
	"github.com/kyma-project/serverless-manager/operator/pkg/fips"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
)

// Volume names and paths of the build Pod.
const (
	volumeCredentials    = "credentials"
	volumeRegistryConfig = "registry-config"
	volumeSources        = "sources"
	volumeWorkspace      = "workspace"
	volumeDependencies   = "dependencies"
	volumeState          = "state"
	volumeTmp            = "tmp"

	workspacePath      = "/workspace"
	dockerPath         = "/docker"
	registryConfigPath = "/registry-config"
	destinationArg     = "--destination="
)

// DependencyCacheRepository is where the Function registry keeps the
// dependency layers, one image per key (shared by all Functions).
const DependencyCacheRepository = "serverless-dependencies"

// Git auth types and the keys read from the auth Secret
// (docs/contributor/upstream-contract.md#git-sources).
const (
	GitAuthBasic = "basic"
	GitAuthKey   = "key"
)

// BuildJob is the build Job of a Function: our own steps, no Dockerfile
// interpreter and no root. prepare (this controller's image) finds the
// dependency key and whether its layer is kept; dependencies installs them
// in the runtime image itself, the only container that sees the package
// registry configuration, unless they are kept; build (this controller's
// image) appends the layers to the runtime image and pushes it, its digest
// being the termination message. Git Functions fetch their sources first.
// The Pod passes the restricted Pod Security Standard. Unlike 1.8.4 it has
// a TTL (the build is remembered in the Function status) and a deadline
// (a Pod stuck Pending must not hold a build slot forever).
func BuildJob(in Inputs, sourceConfigMap string) *batchv1.Job {
	fn := in.Function
	git := fn.Spec.Source.Inline == nil && fn.Spec.Source.GitRepository != nil
	rt, _ := build.RuntimeOf(string(fn.Spec.Runtime)) // the CRD admits known runtimes only

	volumes := []corev1.Volume{
		{Name: volumeCredentials, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: in.Config.ImageRegistryDefaultDockerConfigSecretName,
			Items:      []corev1.KeyToPath{{Key: RegistryKeyDockerConfigJSON, Path: ".docker/config.json"}},
		}}},
		{Name: volumeRegistryConfig, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: in.Config.PackageRegistryConfigSecretName,
			Optional:   ptr.To(true),
		}}},
		emptyDir(volumeDependencies), emptyDir(volumeState), emptyDir(volumeTmp),
	}
	sources := corev1.VolumeMount{Name: volumeSources, ReadOnly: true, MountPath: build.DefaultSourceDir}
	var initContainers []corev1.Container
	if git {
		volumes = append(volumes, emptyDir(volumeWorkspace))
		// baseDir from the status, as the tag: the Job builds what the tag names.
		sources = corev1.VolumeMount{Name: volumeWorkspace, ReadOnly: true, MountPath: build.DefaultSourceDir,
			SubPath: strings.TrimPrefix(fn.Status.BaseDir, "/")}
		initContainers = append(initContainers, repoFetcher(in))
	} else {
		volumes = append(volumes, corev1.Volume{Name: volumeSources, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: sourceConfigMap},
			Items: []corev1.KeyToPath{
				{Key: SourceKey, Path: rt.Handler},
				{Key: DependenciesKey, Path: rt.DependencyFile},
			},
		}}})
	}
	state := corev1.VolumeMount{Name: volumeState, MountPath: build.DefaultStateDir}
	readOnlyState := state
	readOnlyState.ReadOnly = true
	deps := corev1.VolumeMount{Name: volumeDependencies, MountPath: build.DefaultDependenciesDir}
	readOnlyDeps := deps
	readOnlyDeps.ReadOnly = true
	tmp := corev1.VolumeMount{Name: volumeTmp, MountPath: "/tmp"}
	credentials := corev1.VolumeMount{Name: volumeCredentials, ReadOnly: true, MountPath: dockerPath}
	stepEnv := append(buildEnv(in), fipsEnv(in.Config)...)
	buildResources, _ := in.Config.Resources.BuildJob.Resolve(fn.Spec.Runtime, buildRequirements(fn))

	initContainers = append(initContainers,
		corev1.Container{
			Name:            ContainerPrepare,
			Image:           in.Config.Build.RepoFetcherImage,
			Command:         []string{"/" + module.FunctionController().Binary, "build", "prepare"},
			ImagePullPolicy: corev1.PullIfNotPresent,
			Env:             stepEnv,
			Resources:       stepResources(),
			VolumeMounts:    []corev1.VolumeMount{sources, state, credentials},
			SecurityContext: restricted(),
		},
		corev1.Container{
			Name:            ContainerDependencies,
			Image:           RuntimeImage(in),
			Command:         []string{"/bin/sh", "-c", dependencyScript(rt)},
			ImagePullPolicy: corev1.PullIfNotPresent,
			Env: []corev1.EnvVar{
				{Name: "SOURCES", Value: build.DefaultSourceDir},
				{Name: build.EnvStateDir, Value: build.DefaultStateDir},
				{Name: build.EnvDependenciesDir, Value: build.DefaultDependenciesDir},
				{Name: "HOME", Value: "/tmp"},
				{Name: "NPM_CONFIG_USERCONFIG", Value: registryConfigPath + "/.npmrc"},
				{Name: "npm_config_cache", Value: "/tmp/.npm"},
				{Name: "PIP_CONFIG_FILE", Value: registryConfigPath + "/pip.conf"},
			},
			Resources: buildResources,
			VolumeMounts: []corev1.VolumeMount{sources, readOnlyState, deps, tmp,
				{Name: volumeRegistryConfig, ReadOnly: true, MountPath: registryConfigPath}},
			// The last lines of the npm or pip error are the message.
			TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
			SecurityContext:          restricted(),
		},
	)

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
					// No step talks to the API server.
					AutomountServiceAccountToken: ptr.To(false),
					SecurityContext: &corev1.PodSecurityContext{
						RunAsNonRoot:   ptr.To(true),
						RunAsUser:      ptr.To(buildUser),
						RunAsGroup:     ptr.To(buildUser),
						FSGroup:        ptr.To(buildUser),
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					},
					Volumes:        volumes,
					InitContainers: initContainers,
					Containers: []corev1.Container{{
						Name:            ContainerBuild,
						Image:           in.Config.Build.RepoFetcherImage,
						Command:         []string{"/" + module.FunctionController().Binary, "build", "image"},
						ImagePullPolicy: corev1.PullIfNotPresent,
						Env:             stepEnv,
						Resources:       buildResources,
						VolumeMounts:    []corev1.VolumeMount{sources, readOnlyState, readOnlyDeps, credentials, tmp},
						SecurityContext: restricted(),
					}},
				},
			},
		},
	}
}

// buildUser is the uid and gid of every build step (the runtime images'
// user 1000).
const buildUser int64 = 1000

// RuntimeImage is the image the Function is built on: the override or the
// runtime's base image.
func RuntimeImage(in Inputs) string {
	if in.Function.Spec.RuntimeImageOverride != "" {
		return in.Function.Spec.RuntimeImageOverride
	}
	return in.BaseImage
}

// buildEnv is the environment of our two build steps.
func buildEnv(in Inputs) []corev1.EnvVar {
	flags := buildflags.Parse(in.Config.Build.ExecutorArgs)
	return []corev1.EnvVar{
		{Name: build.EnvRuntime, Value: string(in.Function.Spec.Runtime)},
		{Name: build.EnvBaseImage, Value: RuntimeImage(in)},
		{Name: build.EnvDestination, Value: PushImage(in)},
		{Name: build.EnvCacheRepository, Value: in.Registry.PushAddress + "/" + DependencyCacheRepository},
		{Name: build.EnvPackageConfigDigest, Value: in.PackageConfigDigest},
		{Name: build.EnvInsecure, Value: strconv.FormatBool(flags.Insecure)},
		{Name: build.EnvSkipTLSVerify, Value: strconv.FormatBool(flags.SkipTLSVerify)},
		{Name: build.EnvCache, Value: strconv.FormatBool(flags.Cache)},
		{Name: build.EnvDockerConfig, Value: dockerPath + "/.docker"},
		{Name: build.EnvSourceDir, Value: build.DefaultSourceDir},
		{Name: build.EnvStateDir, Value: build.DefaultStateDir},
		{Name: build.EnvDependenciesDir, Value: build.DefaultDependenciesDir},
	}
}

// dependencyScript installs the dependencies into the dependencies volume
// unless prepare found their layer kept. Its directories come from the
// environment, like our steps' own.
func dependencyScript(rt build.Runtime) string {
	return `if [ -e "$` + build.EnvStateDir + "/" + build.StateCached + `" ]; then echo "dependencies kept: nothing to install"; exit 0; fi` + "\n" +
		`cd "$` + build.EnvDependenciesDir + `" && ` + rt.Install
}

// restricted is the security context the restricted Pod Security Standard
// asks of every container, with a read-only root: each step writes only to
// its volumes.
func restricted() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		Privileged:               ptr.To(false),
		AllowPrivilegeEscalation: ptr.To(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		ReadOnlyRootFilesystem:   ptr.To(true),
	}
}

func stepResources() corev1.ResourceRequirements {
	return corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m"), corev1.ResourceMemory: resource.MustParse("256Mi")},
	}
}

func emptyDir(name string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
}

// fipsEnv is what the build steps, which run this controller's binary,
// need in FIPS mode to start at all: the switch and Go's enforcement
// (docs/contributor/fips.md).
func fipsEnv(c *config.Config) []corev1.EnvVar {
	if c == nil || !c.FIPSMode {
		return nil
	}
	return []corev1.EnvVar{{Name: fips.EnvMode, Value: "true"}, {Name: fips.EnvGODEBUG, Value: fips.GODEBUG}}
}

// repoFetcher writes the files of status.commit (only status.baseDir) into
// the workspace (docs/contributor/upstream-contract.md#build-job).
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
	env = append(env, fipsEnv(in.Config)...)
	return corev1.Container{
		Name: ContainerRepoFetcher,
		// The controller's own image (the chart passes it as the fetcher
		// image) run as `function-controller fetch`; 1.8.4 ran a separate
		// image. A versioned image: no pull on every build.
		Image:           in.Config.Build.RepoFetcherImage,
		Command:         []string{"/" + module.FunctionController().Binary, "fetch"},
		ImagePullPolicy: corev1.PullIfNotPresent,
		Env:             env,
		Resources:       stepResources(),
		VolumeMounts:    []corev1.VolumeMount{{Name: volumeWorkspace, MountPath: workspacePath}},
		SecurityContext: restricted(),
	}
}

// JobDestination is the image a build Job pushes, "" when it names none:
// the build container's destination, or the --destination argument of the
// kaniko Jobs of 1.8.4 and earlier versions, which compare it to decide on
// a rebuild.
func JobDestination(j *batchv1.Job) string {
	containers := j.Spec.Template.Spec.Containers
	for i := range containers {
		if containers[i].Name != ContainerBuild {
			continue
		}
		for _, e := range containers[i].Env {
			if e.Name == build.EnvDestination {
				return e.Value
			}
		}
	}
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

// SlimJob is what the controller keeps of a build Job in its cache: its
// metadata and status, and of its template only what JobDestination reads.
// A build Job's template is most of its size, and every Job stays cached
// until its TTL ends.
func SlimJob(j *batchv1.Job) *batchv1.Job {
	slim := &batchv1.Job{TypeMeta: j.TypeMeta, ObjectMeta: j.ObjectMeta, Status: j.Status}
	slim.ManagedFields = nil
	for _, c := range j.Spec.Template.Spec.Containers {
		kept := corev1.Container{Name: c.Name}
		for _, e := range c.Env {
			if e.Name == build.EnvDestination {
				kept.Env = append(kept.Env, e)
			}
		}
		for _, a := range c.Args {
			if strings.HasPrefix(a, destinationArg) {
				kept.Args = append(kept.Args, a)
			}
		}
		slim.Spec.Template.Spec.Containers = append(slim.Spec.Template.Spec.Containers, kept)
	}
	return slim
}
