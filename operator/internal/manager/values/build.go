package values

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/pkg/buildflags"
)

// minHMACKeyBytes is the shortest HMAC key FIPS 140-only mode accepts.
const minHMACKeyBytes = 112 / 8

// Keys an external registry Secret must hold.
var RegistrySecretKeys = []string{"username", "password", "serverAddress", "registryAddress"}

// Credentials of the internal registry.
type Credentials struct {
	Username string
	Password string
	// From is the UID of the Secret they were read from (empty when new):
	// the apply writes them to that Secret only, never to a successor.
	From types.UID
}

// Facts are what the manager learned about the cluster for one render.
type Facts struct {
	// Namespace the module is installed into.
	Namespace string
	// Nodes in the cluster, for the default presets.
	Nodes int
	// TracingServiceExists tells whether the telemetry traces Service is there.
	TracingServiceExists bool
	// InternalCredentials already in use by the internal registry, if any;
	// they are kept so that pushes and pulls keep working across renders.
	InternalCredentials *Credentials
	// NodePort for the internal registry: the one in use, or a free one.
	NodePort int32
	// PVCSize of an existing registry volume ("" when there is none), its
	// StorageClass and whether that class allows the volume to grow.
	PVCSize         string
	PVCStorageClass string
	PVCExpandable   bool
	// RegistrySecret is the data of the Secret spec.dockerRegistry.secretName
	// names; nil when it does not exist.
	RegistrySecret map[string][]byte
	// ImageOverrides replace chart images, keyed like global.images.
	ImageOverrides map[string]string
	// NewSecret returns a fresh random alphanumeric string of length n.
	NewSecret func(n int) string
	// Mode is what the Function mode depends on besides spec.functionMode.
	Mode ModeFacts
	// FIPSMode is the manager's KYMA_FIPS_MODE_ENABLED: the installation
	// runs in FIPS mode, whatever the CR says (as release 1.13's).
	FIPSMode bool
}

// ConfigError is a spec the manager cannot act on; Reason goes into the
// Configured condition.
type ConfigError struct {
	Reason  string
	Message string
}

func (e *ConfigError) Error() string { return e.Message }

// Result of Build.
type Result struct {
	Values    Values
	Effective v1alpha1.EffectiveConfiguration
	// Warnings the user should see; the module still works (state Warning).
	Warnings []Notice
	// Notes on values taken with a slightly different meaning; the
	// Configured message says them, the state stays Ready.
	Notes []Notice
}

// Build derives chart values and the effective configuration from spec and facts.
func Build(spec v1alpha1.ServerlessSpec, f Facts) (Result, error) {
	if err := checkSpec(spec); err != nil {
		return Result{}, err
	}
	cpu, err := wholeNumber("targetCPUUtilizationPercentage", spec.TargetCPUUtilizationPercentage, DefaultTargetCPUUtilizationPercentage)
	if err != nil {
		return Result{}, err
	}
	jobs, err := wholeNumber("functionBuildMaxSimultaneousJobs", spec.FunctionBuildMaxSimultaneousJobs, DefaultFunctionBuildMaxSimultaneousJobs)
	if err != nil {
		return Result{}, err
	}
	buildPreset, podPreset := DefaultPresets(f.Nodes)
	logs := logSettings(spec)
	v := Values{
		FunctionMode: FunctionMode(spec.FunctionMode, f.Mode),
		Global:       Global{RegistryNodePort: DefaultRegistryNodePort},
		Controller: Controller{
			LogLevel:  logs.Level,
			LogFormat: logs.Format,
			Configuration: Configuration{
				TargetCPUUtilizationPercentage:   cpu,
				FunctionRequeueDuration:          or(spec.FunctionRequeueDuration, DefaultFunctionRequeueDuration),
				FunctionBuildExecutorArgs:        or(spec.FunctionBuildExecutorArgs, DefaultFunctionBuildExecutorArgs),
				FunctionBuildMaxSimultaneousJobs: jobs,
				HealthzLivenessTimeout:           or(spec.HealthzLivenessTimeout, DefaultHealthzLivenessTimeout),
				FunctionPublisherProxyAddress:    DefaultEventingEndpoint,
			},
			ResourcesConfiguration: ResourcesConfiguration{
				Function: PresetChoice{DefaultPreset{or(spec.DefaultRuntimePodPreset, podPreset)}},
				BuildJob: PresetChoice{DefaultPreset{or(spec.DefaultBuildJobPreset, buildPreset)}},
			},
		},
		NetworkPolicies: Toggle{Enabled: spec.EnableNetworkPolicies},
		Containers:      Containers{Manager: ManagerContainer{FipsModeEnabled: f.FIPSMode}},
	}
	if spec.Eventing != nil {
		v.Controller.Configuration.FunctionPublisherProxyAddress = spec.Eventing.Endpoint
	}
	if mesh := scaleToZeroMesh(spec); mesh != "" {
		v.Activator = &Activator{Mesh: mesh}
	}
	switch {
	case spec.Tracing != nil:
		v.Controller.Configuration.FunctionTraceCollectorEndpoint = spec.Tracing.Endpoint
	case f.TracingServiceExists:
		v.Controller.Configuration.FunctionTraceCollectorEndpoint = TracingEndpoint(f.Namespace)
	}
	if len(f.ImageOverrides) > 0 {
		v.Global.Images = map[string]Image{}
		for key, ref := range f.ImageOverrides {
			v.Global.Images[key] = Image{Image: ref}
		}
	}

	res := Result{}
	registryShown, warnings, err := registry(spec.DockerRegistry, f, &v)
	if err != nil {
		return Result{}, err
	}
	for _, w := range warnings {
		res.Warnings = append(res.Warnings, Notice{Cause: v1alpha1.ReasonBothRegistries, Message: w})
	}
	res.Warnings = append(res.Warnings, logs.Warnings...)
	res.Notes = logs.Notes
	res.Values = v
	c := v.Controller.Configuration
	res.Effective = v1alpha1.EffectiveConfiguration{
		FunctionMode:             v.FunctionMode,
		DockerRegistry:           registryShown,
		EventingEndpoint:         c.FunctionPublisherProxyAddress,
		TracingEndpoint:          c.FunctionTraceCollectorEndpoint,
		CPUUtilizationPercentage: strconv.Itoa(int(c.TargetCPUUtilizationPercentage)),
		RequeueDuration:          c.FunctionRequeueDuration,
		BuildExecutorArgs:        c.FunctionBuildExecutorArgs,
		BuildExecutorArgsIgnored: strings.Join(buildflags.Parse(buildflags.Split(c.FunctionBuildExecutorArgs)).Ignored, ","),
		BuildMaxSimultaneousJobs: strconv.Itoa(int(c.FunctionBuildMaxSimultaneousJobs)),
		HealthzLivenessTimeout:   c.HealthzLivenessTimeout,
		DefaultBuildJobPreset:    v.Controller.ResourcesConfiguration.BuildJob.Resources.DefaultPreset,
		DefaultRuntimePodPreset:  v.Controller.ResourcesConfiguration.Function.Resources.DefaultPreset,
		LogLevel:                 v.Controller.LogLevel,
		LogFormat:                v.Controller.LogFormat,
		NetworkPoliciesEnabled:   upstreamBool(v.NetworkPolicies.Enabled),
		ScaleToZeroMesh:          scaleToZeroMesh(spec),
	}
	return res, nil
}

// scaleToZeroMesh is spec.scaleToZero.mesh, "" when unset.
func scaleToZeroMesh(spec v1alpha1.ServerlessSpec) string {
	if spec.ScaleToZero == nil {
		return ""
	}
	return spec.ScaleToZero.Mesh
}

// registry fills the registry values and returns what the status shows.
func registry(spec *v1alpha1.DockerRegistry, f Facts, v *Values) (string, []string, error) {
	internal := spec != nil && spec.EnableInternal != nil && *spec.EnableInternal
	secretName := ""
	if spec != nil && spec.SecretName != nil {
		secretName = *spec.SecretName
	}
	var warnings []string
	switch {
	case internal:
		if secretName != "" {
			warnings = append(warnings, fmt.Sprintf("dockerRegistry: both enableInternal and secretName are set; the internal registry is used and Secret %q is ignored", secretName))
		}
		creds := f.InternalCredentials
		if creds == nil || creds.Username == "" || creds.Password == "" {
			creds = &Credentials{Username: f.NewSecret(20), Password: f.NewSecret(40)}
		}
		v.DockerRegistry = DockerRegistry{
			EnableInternal: true,
			Username:       creds.Username,
			Password:       creds.Password,
			HTTPSecret:     httpSecret(creds.Password),
		}
		size, warning, err := volumeSize(spec.VolumeSize, f)
		if err != nil {
			return "", nil, err
		}
		if warning != "" {
			warnings = append(warnings, warning)
		}
		if size != "" {
			v.DockerRegistry.Persistence = &Persistence{Size: size}
		}
		if f.NodePort != 0 {
			v.Global.RegistryNodePort = f.NodePort
		}
		return InternalRegistry, warnings, nil
	case secretName != "":
		if f.RegistrySecret == nil {
			return "", nil, &ConfigError{Reason: v1alpha1.ReasonRegistrySecretError,
				Message: fmt.Sprintf("registry Secret %s/%s not found; create it with the keys %s", f.Namespace, secretName, strings.Join(RegistrySecretKeys, ", "))}
		}
		var missing []string
		for _, k := range RegistrySecretKeys {
			if len(strings.TrimSpace(string(f.RegistrySecret[k]))) == 0 {
				missing = append(missing, k)
			}
		}
		if len(missing) > 0 {
			sort.Strings(missing)
			return "", nil, &ConfigError{Reason: v1alpha1.ReasonRegistrySecretError,
				Message: fmt.Sprintf("registry Secret %s/%s lacks the keys %s", f.Namespace, secretName, strings.Join(missing, ", "))}
		}
		v.DockerRegistry = DockerRegistry{
			Username:        string(f.RegistrySecret["username"]),
			Password:        string(f.RegistrySecret["password"]),
			ServerAddress:   string(f.RegistrySecret["serverAddress"]),
			RegistryAddress: string(f.RegistrySecret["registryAddress"]),
		}
		v.Controller.Configuration.DeleteUnusedExternalImages = deleteExternal(spec)
		return v.DockerRegistry.ServerAddress, nil, nil
	default:
		v.DockerRegistry = DockerRegistry{ServerAddress: FallbackRegistryAddress, RegistryAddress: FallbackRegistryAddress}
		v.Controller.Configuration.DeleteUnusedExternalImages = deleteExternal(spec)
		return FallbackRegistryAddress, nil, nil
	}
}

// deleteExternal is the opt-in to clean an external registry; the
// internal one is always cleaned.
func deleteExternal(spec *v1alpha1.DockerRegistry) bool {
	return spec != nil && spec.DeleteUnusedExternalImages != nil && *spec.DeleteUnusedExternalImages
}

// httpSecret derives the registry's HTTP secret from its password: stable
// while the credentials are, without storing another secret. FIPS 140-only
// mode refuses HMAC keys under 112 bits (a panic); a password that short
// (never one the manager generates: 40 characters) keys it with its SHA-256.
func httpSecret(password string) string {
	key := []byte(password)
	if len(key) < minHMACKeyBytes {
		sum := sha256.Sum256(key)
		key = sum[:]
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte("serverless-docker-registry-http-secret"))
	return hex.EncodeToString(mac.Sum(nil))[:32]
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// upstreamBool writes a flag the way upstream's status does: "True"/"False".
func upstreamBool(b bool) string {
	if b {
		return "True"
	}
	return "False"
}

// volumeSize is the internal registry's claim size to render ("": the
// chart's default) and a warning when the asked size cannot be had: a claim
// only grows, and only where its StorageClass allows expansion.
func volumeSize(asked *resource.Quantity, f Facts) (string, string, error) {
	if asked != nil && asked.Sign() <= 0 {
		return "", "", &ConfigError{Reason: v1alpha1.ReasonConfigurationInvalid,
			Message: fmt.Sprintf("dockerRegistry.volumeSize %s: must be larger than 0", asked.String())}
	}
	if f.PVCSize == "" {
		if asked == nil {
			return "", "", nil
		}
		return asked.String(), "", nil
	}
	current, err := resource.ParseQuantity(f.PVCSize)
	if err != nil || asked == nil {
		return f.PVCSize, "", nil //nolint:nilerr // an unreadable live size is kept as it is
	}
	switch c := asked.Cmp(current); {
	case c == 0:
		return f.PVCSize, "", nil
	case c < 0:
		return f.PVCSize, fmt.Sprintf("dockerRegistry.volumeSize %s: the internal registry's volume stays %s: a volume cannot shrink", asked.String(), f.PVCSize), nil
	case !f.PVCExpandable:
		return f.PVCSize, fmt.Sprintf("dockerRegistry.volumeSize %s: the internal registry's volume stays %s: its StorageClass %q does not allow volume expansion", asked.String(), f.PVCSize, f.PVCStorageClass), nil
	}
	return asked.String(), "", nil
}
