package resources

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
)

const (
	volumeTmpDir = "tmp-dir"
	healthPath   = "/healthz"
	// secretVolumeMode is 0666, as 1.8.4 mounts Secrets.
	secretVolumeMode int32 = 0o666
	// pythonPath is 1.8.4's PYTHONPATH, kept literally although Kubernetes
	// cannot expand $(KUBELESS_INSTALL_VOLUME) (no such env var) and the
	// segment reads lib.python3.12: changing it would roll every
	// adopted Python Function. The runtime image sets its own path.
	pythonPath = "$(KUBELESS_INSTALL_VOLUME)/lib.python3.12/site-packages:$(KUBELESS_INSTALL_VOLUME)"
)

// Deployment runs the Function's image
// (docs/contributor/upstream-contract.md#deployment). Its Pod template equals
// 1.8.4's after API defaulting, so adopted Pods are not rolled.
func Deployment(in Inputs) *appsv1.Deployment {
	fn := in.Function
	replicas := int32(1)
	if fn.Spec.Replicas != nil {
		replicas = *fn.Spec.Replicas
	}
	meta := childMeta(fn, "-")
	meta.Annotations = map[string]string{AnnotationPodAnnotationKeys: strings.Join(slices.Sorted(maps.Keys(fn.Spec.Annotations)), ",")}

	volumes, secretMounts := secretVolumes(fn.Spec.SecretMounts, volumeTmpDir)
	volumes = append([]corev1.Volume{{Name: volumeTmpDir, VolumeSource: corev1.VolumeSource{
		EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: ptr.To(resource.MustParse("100Mi"))},
	}}}, volumes...)
	mounts := append([]corev1.VolumeMount{{Name: volumeTmpDir, MountPath: "/tmp"}}, secretMounts...)

	functionResources, _ := in.Config.Resources.Function.Resolve(fn.Spec.Runtime, functionRequirements(fn))
	functionResources, cpuAfterStart := startupCPU(fn, in.Config.StartupCPULimit, functionResources)

	return &appsv1.Deployment{
		ObjectMeta: meta,
		Spec: appsv1.DeploymentSpec{
			Replicas:             ptr.To(replicas),
			RevisionHistoryLimit: ptr.To[int32](0),
			Selector:             &metav1.LabelSelector{MatchLabels: SelectorLabels(fn)},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels(fn), Annotations: withCPULimitAfterStart(podAnnotations(fn), cpuAfterStart)},
				Spec: corev1.PodSpec{
					SecurityContext:    PodSecurityContext(fn),
					ServiceAccountName: in.Config.ImagePullAccountName,
					Volumes:            volumes,
					Containers: []corev1.Container{{
						Name:            ContainerFunction,
						Image:           RunImage(in),
						ImagePullPolicy: corev1.PullIfNotPresent,
						Env:             functionEnv(in),
						Resources:       functionResources,
						VolumeMounts:    mounts,
						StartupProbe:    startupProbe(),
						ReadinessProbe:  probe(0, 5, 2, 1),
						LivenessProbe:   probe(0, 5, 4, 3),
						SecurityContext: ContainerSecurityContext(fn),
					}},
				},
			},
		},
	}
}

// PodSecurityContext is the Function Pod's security context: 1.8.4's
// where spec.podSecurityContext leaves a field unset, the
// Function's value where it sets one (release 1.13's rule, with this mode's
// base). Without spec.podSecurityContext it is exactly 1.8.4's, so adopted
// Pods keep their template.
func PodSecurityContext(fn *v1alpha2.Function) *corev1.PodSecurityContext {
	return podSecurityContext(fn, &corev1.PodSecurityContext{
		RunAsUser:      ptr.To[int64](10001),
		RunAsGroup:     ptr.To[int64](10001),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	})
}

// ContainerSecurityContext is the function container's security context,
// 1.8.4's with spec.containerSecurityContext laid over it field by field,
// as PodSecurityContext.
func ContainerSecurityContext(fn *v1alpha2.Function) *corev1.SecurityContext {
	return containerSecurityContext(fn, &corev1.SecurityContext{
		Privileged:             ptr.To(false),
		Capabilities:           &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		ProcMount:              ptr.To(corev1.DefaultProcMount),
		ReadOnlyRootFilesystem: ptr.To(true),
	})
}

// podSecurityContext is spec.podSecurityContext (release 1.13's rule) with
// these fields taken from base where the Function leaves them unset:
// runAsUser, runAsGroup, fsGroup, supplementalGroups, seccompProfile.
func podSecurityContext(fn *v1alpha2.Function, base *corev1.PodSecurityContext) *corev1.PodSecurityContext {
	out := &corev1.PodSecurityContext{}
	if fn.Spec.PodSecurityContext != nil {
		out = fn.Spec.PodSecurityContext.DeepCopy()
	}
	out.RunAsUser = orDefault(out.RunAsUser, base.RunAsUser)
	out.RunAsGroup = orDefault(out.RunAsGroup, base.RunAsGroup)
	out.FSGroup = orDefault(out.FSGroup, base.FSGroup)
	out.SeccompProfile = orDefault(out.SeccompProfile, base.SeccompProfile)
	if out.SupplementalGroups == nil {
		out.SupplementalGroups = base.SupplementalGroups
	}
	return out
}

// containerSecurityContext is spec.containerSecurityContext with these
// fields taken from base where the Function leaves them unset: privileged,
// capabilities, procMount, readOnlyRootFilesystem, allowPrivilegeEscalation,
// runAsNonRoot.
func containerSecurityContext(fn *v1alpha2.Function, base *corev1.SecurityContext) *corev1.SecurityContext {
	out := &corev1.SecurityContext{}
	if fn.Spec.ContainerSecurityContext != nil {
		out = fn.Spec.ContainerSecurityContext.DeepCopy()
	}
	out.Privileged = orDefault(out.Privileged, base.Privileged)
	out.Capabilities = orDefault(out.Capabilities, base.Capabilities)
	out.ProcMount = orDefault(out.ProcMount, base.ProcMount)
	out.ReadOnlyRootFilesystem = orDefault(out.ReadOnlyRootFilesystem, base.ReadOnlyRootFilesystem)
	out.AllowPrivilegeEscalation = orDefault(out.AllowPrivilegeEscalation, base.AllowPrivilegeEscalation)
	out.RunAsNonRoot = orDefault(out.RunAsNonRoot, base.RunAsNonRoot)
	return out
}

// orDefault is v, or a copy of def when v is unset.
func orDefault[T any, P interface{ *T }](v, def P) P {
	if v != nil || def == nil {
		return v
	}
	c := *def
	return &c
}

// startupProbe is probed every second, 150 times: the 150 s release 1.8.4
// allows a Pod to start, with the Pod Ready as soon as its server listens.
// kubelet runs a startup probe only on its period (readiness it also probes
// at each Pod sync), so 1.8.4's period of 5 s kept every new Pod out of its
// Service for up to 5 s more.
func startupProbe() *corev1.Probe {
	return probe(0, 1, 0, 150)
}

// legacyStartupProbe tells 1.8.4's startup probe (every 5 s, 30 times,
// as the API server stores it). A Deployment with it runs what this
// controller wants: replacing the probe alone would roll every Function's
// Pods at a takeover, so it stays until some compared field changes.
func legacyStartupProbe(p *corev1.Probe) bool {
	return p != nil && p.HTTPGet != nil && p.HTTPGet.Path == healthPath && p.HTTPGet.Port == intstr.FromInt32(FunctionPort) &&
		p.InitialDelaySeconds == 0 && p.PeriodSeconds == 5 && p.FailureThreshold == 30 &&
		p.TimeoutSeconds <= 1 && p.SuccessThreshold <= 1
}

// probe is an HTTP GET /healthz on the Function port; zero fields are left
// to the API defaults, as 1.8.4 leaves them.
func probe(initialDelay, period, timeout, failureThreshold int32) *corev1.Probe {
	return &corev1.Probe{
		ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
			Path: healthPath,
			Port: intstr.FromInt32(FunctionPort),
		}},
		InitialDelaySeconds: initialDelay,
		PeriodSeconds:       period,
		TimeoutSeconds:      timeout,
		FailureThreshold:    failureThreshold,
	}
}

// podAnnotations are the Pod template's annotations: spec.annotations,
// overlaid by the Istio proxy configuration 1.8.4 sets.
func podAnnotations(fn *v1alpha2.Function) map[string]string {
	out := make(map[string]string, len(fn.Spec.Annotations)+1)
	maps.Copy(out, fn.Spec.Annotations)
	out[AnnotationIstioProxyConfig] = IstioProxyConfig
	return out
}

// functionEnv is the function container's env in 1.8.4's order: spec.env, then
// the injected variables (docs/contributor/upstream-contract.md#deployment).
// Order matters: a different order rolls the Pods.
func functionEnv(in Inputs) []corev1.EnvVar {
	fn := in.Function
	env := make([]corev1.EnvVar, 0, len(fn.Spec.Env)+11)
	for _, e := range fn.Spec.Env {
		e = *e.DeepCopy()
		// The API server defaults fieldRef.apiVersion; default it here so the
		// desired env compares equal to the stored one.
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.APIVersion == "" {
			e.ValueFrom.FieldRef.APIVersion = "v1"
		}
		env = append(env, e)
	}
	return append(env, injectedEnv(in)...)
}

// injectedEnv are the variables after spec.env: where spec.env names one
// of them too, the container gets this value (Kubernetes takes the last).
func injectedEnv(in Inputs) []corev1.EnvVar {
	fn := in.Function
	env := []corev1.EnvVar{{Name: "FUNC_RUNTIME", Value: string(fn.Spec.Runtime)}}
	if isPython(fn.Spec.Runtime) {
		env = append(env,
			corev1.EnvVar{Name: "PYTHONPATH", Value: pythonPath},
			corev1.EnvVar{Name: "PYTHONUNBUFFERED", Value: "TRUE"})
	}
	return append(env,
		corev1.EnvVar{Name: "FUNC_NAME", Value: fn.Name},
		corev1.EnvVar{Name: "SERVICE_NAMESPACE", Value: fn.Namespace},
		corev1.EnvVar{Name: "TRACE_COLLECTOR_ENDPOINT", Value: in.Config.TraceCollectorEndpoint},
		corev1.EnvVar{Name: "PUBLISHER_PROXY_ADDRESS", Value: in.Config.PublisherProxyAddress},
		corev1.EnvVar{Name: "FUNC_HANDLER", Value: "main"},
		corev1.EnvVar{Name: "MOD_NAME", Value: "handler"},
		corev1.EnvVar{Name: "FUNC_PORT", Value: strconv.Itoa(FunctionPort)},
	)
}

// secretVolumes are one volume per distinct Secret and one read-only mount
// per secretMount. A volume is named after its Secret, as 1.8.4 does (so
// adopted Pods keep their template), unless that name is not a valid volume
// name or is taken: then it gets a derived name (1.8.4 produced an
// invalid Deployment for Secret names with dots, longer than 63 characters,
// or named like another volume of the Pod, reserved).
func secretVolumes(secretMounts []v1alpha2.SecretMount, reserved ...string) ([]corev1.Volume, []corev1.VolumeMount) {
	volumes := make([]corev1.Volume, 0, len(secretMounts))
	mounts := make([]corev1.VolumeMount, 0, len(secretMounts))
	bySecret := make(map[string]string, len(secretMounts))
	used := make(map[string]bool, len(reserved))
	for _, name := range reserved {
		used[name] = true
	}
	for _, sm := range secretMounts {
		name, ok := bySecret[sm.SecretName]
		if !ok {
			name = secretVolumeName(sm.SecretName, used)
			bySecret[sm.SecretName] = name
			used[name] = true
			volumes = append(volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
				SecretName:  sm.SecretName,
				DefaultMode: ptr.To(secretVolumeMode),
				Optional:    ptr.To(false),
			}}})
		}
		mounts = append(mounts, corev1.VolumeMount{Name: name, ReadOnly: true, MountPath: sm.MountPath})
	}
	return volumes, mounts
}

func secretVolumeName(secret string, used map[string]bool) string {
	if len(validation.IsDNS1123Label(secret)) == 0 && !used[secret] {
		return secret
	}
	sum := sha256.Sum256([]byte(secret))
	digest := hex.EncodeToString(sum[:])
	// 16 hex digits; longer only if a valid Secret name took that name.
	for n := 16; ; n += 8 {
		if name := "secret-" + digest[:min(n, len(digest))]; !used[name] || n >= len(digest) {
			return name
		}
	}
}
