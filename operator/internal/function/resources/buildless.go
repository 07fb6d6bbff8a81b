package resources

import (
	"maps"
	"path"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/internal/function/config"
	"github.com/kyma-project/serverless-manager/operator/internal/function/git"
	"github.com/kyma-project/serverless-manager/operator/pkg/fips"
)

// Buildless mode: a Function is one Deployment running its runtime's image with
// the source in the Pod (inline: in the env; Git: cloned by an init container)
// and dependencies installed when the Pod starts, and one Service. Every field
// release 1.13 compares before it rolls Pods
// (docs/contributor/upstream-contract.md#what-rolls-buildless-pods) is built
// here exactly as 1.13 builds it, so that its Deployments are adopted without a
// rollout.

// Names and values of the buildless Pod
// (docs/contributor/upstream-contract.md#buildless-deployment).
const (
	// ContainerGitInit clones a Git Function's sources.
	ContainerGitInit = "init"

	// volumeSources and volumeTmp as in the build Pod.
	volumePackageRegistry = "package-registry-config"
	volumeGitRepository   = "git-repository"
	volumeLocal           = "local"
	gitRepositoryPath     = "/git-repository"
	gitRepositoryRepo     = "/git-repository/repo"

	// The Kyma runtime's image rewrites and pull Secrets ("rt-cfg"), asked for
	// on every buildless Pod.
	AnnotationAlterImageRegistry = "rt-cfg.kyma-project.io/alter-img-registry"
	AnnotationAddImagePullSecret = "rt-cfg.kyma-project.io/add-img-pull-secret"
)

// BuildlessInputs is what a Function's buildless Deployment is made of
// besides the Function and the configuration.
type BuildlessInputs struct {
	Function *v1alpha2.Function
	Config   *config.Config
	// Commit is the commit a Git Function's reference resolved to.
	Commit string
	// GitAuth names the keys of the auth Secret (nil: no auth).
	GitAuth *git.SecretKeys
	// Live is the Function's Deployment in the cluster (nil: none yet):
	// annotations others put on its Pod template are kept.
	Live *appsv1.Deployment
}

// runtimeFamily is what differs between Node.js and Python in a buildless Pod.
type runtimeFamily struct {
	workDir               string
	emptyDeps             string // the script line writing the empty dependency file
	handlerFile, depsFile string
	gitPrefix             []string // script lines before a Git Function's copy
	install, start        string
	env                   []corev1.EnvVar // after the general variables, before spec.env
	pathEnv               corev1.EnvVar   // the last variable
	volumes               []corev1.Volume // after git-repository
	registryConfig        string          // the file of the package registry Secret
	mounts                []corev1.VolumeMount
}

func familyOf(rt v1alpha2.Runtime) runtimeFamily {
	if isPython(rt) {
		const workDir = "/kubeless"
		return runtimeFamily{
			workDir:     workDir,
			emptyDeps:   `echo "" > requirements.txt;`,
			handlerFile: "handler.py", depsFile: "requirements.txt",
			install: "export PYTHONPATH=\"/kubeless/.local:${PYTHONPATH}\"\n" +
				"PIP_CONFIG_FILE=package-registry-config/pip.conf pip install --target=/kubeless/.local --no-cache-dir -r requirements.txt;",
			start: "cd ..;\n" +
				"if [ -f \"./kubeless.py\" ]; then\n" +
				"  # old file location support\n" +
				"  python kubeless.py;\n" +
				"else\n" +
				"  python server.py;\n" +
				"fi",
			env: []corev1.EnvVar{
				{Name: "PYTHONUNBUFFERED", Value: "TRUE"},
				{Name: "MOD_NAME", Value: "handler"},
				{Name: "FUNC_HANDLER", Value: "main"},
			},
			pathEnv: corev1.EnvVar{Name: "FUNCTION_PATH", Value: workDir},
			volumes: []corev1.Volume{emptyDir(volumeLocal)},
			mounts: []corev1.VolumeMount{
				{Name: volumeLocal, MountPath: "/.local"},
				{Name: volumePackageRegistry, MountPath: path.Join(workDir, "package-registry-config/pip.conf"), SubPath: "pip.conf"},
			},
		}
	}
	const workDir = "/usr/src/app/function"
	return runtimeFamily{
		workDir:     workDir,
		emptyDeps:   `echo "{}" > package.json;`,
		handlerFile: "handler.js", depsFile: "package.json",
		gitPrefix: []string{`echo "{}" > package.json;`},
		install:   "NPM_CONFIG_USERCONFIG=package-registry-config/.npmrc npm install --prefer-offline --no-audit --progress=false;",
		start:     "cd ..;\nnpm start;",
		pathEnv:   corev1.EnvVar{Name: "HANDLER_PATH", Value: "./function/handler.js"},
		mounts: []corev1.VolumeMount{
			{Name: volumePackageRegistry, MountPath: path.Join(workDir, "package-registry-config/.npmrc"), SubPath: ".npmrc"},
		},
	}
}

// BuildlessDeployment is release 1.13's Deployment for the Function
// (docs/contributor/upstream-contract.md#buildless-deployment): generateName
// "<fn>-", the Function's labels, its replicas, the runtime image started by
// `sh -c` with the source script.
func BuildlessDeployment(in BuildlessInputs) *appsv1.Deployment {
	fn := in.Function
	family := familyOf(fn.Spec.Runtime)
	fromGit := fn.Spec.Source.GitRepository != nil

	volumes := []corev1.Volume{
		emptyDir(volumeSources),
		{Name: volumePackageRegistry, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: in.Config.PackageRegistryConfigSecretName,
			Optional:   ptr.To(true),
		}}},
		emptyDir(volumeTmp),
	}
	mounts := []corev1.VolumeMount{
		{Name: volumeSources, MountPath: family.workDir},
		{Name: volumeTmp, MountPath: "/tmp"},
	}
	var initContainers []corev1.Container
	if fromGit {
		volumes = append(volumes, emptyDir(volumeGitRepository))
		mounts = append(mounts, corev1.VolumeMount{Name: volumeGitRepository, MountPath: gitRepositoryPath})
		initContainers = []corev1.Container{gitInitContainer(in, family.workDir)}
	}
	volumes = append(volumes, family.volumes...)
	mounts = append(mounts, family.mounts...)
	secrets, secretMounts := secretVolumes(fn.Spec.SecretMounts,
		volumeSources, volumePackageRegistry, volumeTmp, volumeGitRepository, volumeLocal)
	volumes = append(volumes, secrets...)
	mounts = append(mounts, secretMounts...)

	functionResources, _ := in.Config.Resources.Function.Resolve(fn.Spec.Runtime, functionRequirements(fn))
	functionResources, cpuAfterStart := startupCPU(fn, in.Config.StartupCPULimit, functionResources)
	replicas := int32(1)
	if fn.Spec.Replicas != nil {
		replicas = *fn.Spec.Replicas
	}
	// 1.13's startup probe (every 5 s): buildless mode's Deployment is
	// release 1.13's, field for field.
	startup := probe(0, 5, 0, 30)
	startup.SuccessThreshold = 1
	return &appsv1.Deployment{
		ObjectMeta: childMeta(fn, "-"),
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: SelectorLabels(fn)},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels(fn), Annotations: withCPULimitAfterStart(buildlessAnnotations(fn, in.Live), cpuAfterStart)},
				Spec: corev1.PodSpec{
					Volumes:        volumes,
					InitContainers: initContainers,
					Containers: []corev1.Container{{
						Name:            ContainerFunction,
						Image:           BuildlessRuntimeImage(fn, in.Config),
						WorkingDir:      family.workDir,
						Command:         []string{"sh", "-c", runtimeScript(fn, family)},
						Resources:       functionResources,
						Env:             buildlessEnv(fn, in.Config, family),
						VolumeMounts:    mounts,
						Ports:           []corev1.ContainerPort{{ContainerPort: FunctionPort, Protocol: corev1.ProtocolTCP}},
						StartupProbe:    startup,
						ReadinessProbe:  probe(0, 5, 2, 1),
						LivenessProbe:   probe(0, 5, 4, 3),
						SecurityContext: BuildlessContainerSecurityContext(fn),
					}},
					SecurityContext: BuildlessPodSecurityContext(fn),
				},
			},
		},
	}
}

// BuildlessService is release 1.13's Service: 1.8.4's without annotations
// (an adopted Service keeps the ones it has).
func BuildlessService(fn *v1alpha2.Function) *corev1.Service {
	svc := Service(Inputs{Function: fn})
	svc.Annotations = nil
	return svc
}

// BuildlessRuntimeImage is what the function container runs:
// spec.runtimeImageOverride, else the runtime's configured image.
func BuildlessRuntimeImage(fn *v1alpha2.Function, cfg *config.Config) string {
	if fn.Spec.RuntimeImageOverride != "" {
		return fn.Spec.RuntimeImageOverride
	}
	return cfg.Buildless.RuntimeImages[fn.Spec.Runtime]
}

// BuildlessPodSecurityContext is release 1.13's: user, group, fsGroup and
// supplemental group 1000, seccomp RuntimeDefault where the Function sets none.
func BuildlessPodSecurityContext(fn *v1alpha2.Function) *corev1.PodSecurityContext {
	return podSecurityContext(fn, &corev1.PodSecurityContext{
		RunAsUser:          ptr.To[int64](1000),
		RunAsGroup:         ptr.To[int64](1000),
		FSGroup:            ptr.To[int64](1000),
		SupplementalGroups: []int64{1000},
		SeccompProfile:     &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	})
}

// BuildlessContainerSecurityContext is release 1.13's: not privileged, no
// capabilities, read-only root, no privilege escalation, non-root, where
// the Function sets none.
func BuildlessContainerSecurityContext(fn *v1alpha2.Function) *corev1.SecurityContext {
	return containerSecurityContext(fn, &corev1.SecurityContext{
		Privileged:               ptr.To(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		ReadOnlyRootFilesystem:   ptr.To(true),
		AllowPrivilegeEscalation: ptr.To(false),
		RunAsNonRoot:             ptr.To(true),
	})
}

// buildlessAnnotations are the Pod template's annotations, merged as 1.13
// merges them
// (docs/contributor/upstream-contract.md#buildless-pod-annotations): the live
// template's annotations except those the Function set last time
// (status.functionAnnotations), then spec.annotations, then the Istio and
// rt-cfg defaults; the native-sidecar annotation "true" unless one of them set
// it already (1.13 lays it under the others, not over them).
func buildlessAnnotations(fn *v1alpha2.Function, live *appsv1.Deployment) map[string]string {
	out := map[string]string{}
	if live != nil {
		for k, v := range live.Spec.Template.Annotations {
			if _, previous := fn.Status.FunctionAnnotations[k]; !previous {
				out[k] = v
			}
		}
	}
	maps.Copy(out, fn.Spec.Annotations)
	out[AnnotationIstioProxyConfig] = IstioProxyConfig
	out[AnnotationAlterImageRegistry] = "true"
	out[AnnotationAddImagePullSecret] = "true"
	if _, ok := out[AnnotationIstioNativeSidecar]; !ok {
		out[AnnotationIstioNativeSidecar] = "true"
	}
	return out
}

// buildlessEnv is the function container's env in 1.13's order: the
// general variables, spec.env as given, the source variables. A name set
// twice is left twice; Kubernetes takes the last.
func buildlessEnv(fn *v1alpha2.Function, cfg *config.Config, family runtimeFamily) []corev1.EnvVar {
	env := make([]corev1.EnvVar, 0, len(fn.Spec.Env)+11)
	env = append(env,
		corev1.EnvVar{Name: "FUNC_NAME", Value: fn.Name},
		corev1.EnvVar{Name: "FUNC_RUNTIME", Value: string(fn.Spec.Runtime)},
		corev1.EnvVar{Name: "SERVICE_NAMESPACE", Value: fn.Namespace},
		corev1.EnvVar{Name: "TRACE_COLLECTOR_ENDPOINT", Value: cfg.TraceCollectorEndpoint},
		corev1.EnvVar{Name: "PUBLISHER_PROXY_ADDRESS", Value: cfg.PublisherProxyAddress},
	)
	env = append(env, family.env...)
	for _, e := range fn.Spec.Env {
		env = append(env, *e.DeepCopy())
	}
	return append(env, buildlessSourceEnv(fn, family)...)
}

// buildlessSourceEnv are the variables after spec.env: the inline source
// and the handler's path.
func buildlessSourceEnv(fn *v1alpha2.Function, family runtimeFamily) []corev1.EnvVar {
	var env []corev1.EnvVar
	if inline := fn.Spec.Source.Inline; inline != nil {
		env = append(env,
			corev1.EnvVar{Name: "FUNC_HANDLER_SOURCE", Value: inline.Source},
			corev1.EnvVar{Name: "FUNC_HANDLER_DEPENDENCIES", Value: inline.Dependencies})
	}
	return append(env, family.pathEnv)
}

// runtimeScript is the `sh -c` script of the function container, line by
// line as 1.13 writes it: the command is compared byte for byte.
func runtimeScript(fn *v1alpha2.Function, family runtimeFamily) string {
	lines := []string{"set -e;"}
	if inline := fn.Spec.Source.Inline; inline != nil {
		lines = append(lines, family.emptyDeps, `echo "${FUNC_HANDLER_SOURCE}" > `+family.handlerFile+";")
		if inline.Dependencies != "" {
			lines = append(lines, `echo "${FUNC_HANDLER_DEPENDENCIES}" > `+family.depsFile+";")
		}
	} else {
		lines = append(lines, family.gitPrefix...)
		lines = append(lines, "cp -r /git-repository/src/* .;")
	}
	return strings.Join(append(lines, family.install, family.start), "\n")
}

// gitInitContainer clones the resolved commit into the git-repository
// volume and copies baseDir to its src directory.
func gitInitContainer(in BuildlessInputs, workDir string) corev1.Container {
	repo := in.Function.Spec.Source.GitRepository
	script := strings.Join([]string{
		"rm -rf /git-repository/*",
		"/app/gitcloner",
		"mkdir /git-repository/src;cp -r '/git-repository/repo/" + strings.Trim(repo.BaseDir, "/ ") + "'/* /git-repository/src;",
	}, "\n")
	env := []corev1.EnvVar{
		{Name: "APP_REPOSITORY_URL", Value: repo.URL},
		{Name: "APP_REPOSITORY_REFERENCE", Value: repo.Reference},
		{Name: "APP_REPOSITORY_COMMIT", Value: in.Commit},
		{Name: "APP_DESTINATION_PATH", Value: gitRepositoryRepo},
	}
	if in.Config.FIPSMode {
		// 1.13's Git init container in FIPS mode, variable for variable and
		// before the credentials: its image refuses to start without both,
		// and 1.13's FIPS Deployments are adopted without a rollout.
		env = append(env,
			corev1.EnvVar{Name: fips.UpstreamEnvMode, Value: "true"},
			corev1.EnvVar{Name: fips.EnvGODEBUG, Value: fips.UpstreamGODEBUG})
	}
	if repo.Auth != nil && in.GitAuth != nil {
		env = append(env, corev1.EnvVar{Name: "APP_REPOSITORY_AUTH_TYPE", Value: repo.Auth.Type})
		for _, ref := range []struct{ env, key string }{
			{"APP_REPOSITORY_KEY", in.GitAuth.Key},
			{"APP_REPOSITORY_USERNAME", in.GitAuth.Username},
			{"APP_REPOSITORY_PASSWORD", in.GitAuth.Password},
		} {
			if ref.key == "" {
				continue
			}
			env = append(env, corev1.EnvVar{Name: ref.env, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: repo.Auth.SecretName},
				Key:                  ref.key,
			}}})
		}
	}
	return corev1.Container{
		Name:       ContainerGitInit,
		Image:      in.Config.Buildless.InitImage,
		WorkingDir: workDir,
		Command:    []string{"sh", "-c", script},
		Env:        env,
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m"), corev1.ResourceMemory: resource.MustParse("512Mi")},
		},
		VolumeMounts: []corev1.VolumeMount{{Name: volumeGitRepository, MountPath: gitRepositoryPath}},
		SecurityContext: &corev1.SecurityContext{
			Privileged:             ptr.To(false),
			Capabilities:           &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			ProcMount:              ptr.To(corev1.DefaultProcMount),
			ReadOnlyRootFilesystem: ptr.To(true),
		},
	}
}
