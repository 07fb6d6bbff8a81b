package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Admission rules of the executor arguments (a comment group of its own, so
// that gofmt leaves the CEL string literals alone; controller-gen reads it).
// +kubebuilder:validation:XValidation:rule="!has(self.functionBuildExecutorArgs) || self.functionBuildExecutorArgs == '' || (',' + self.functionBuildExecutorArgs).matches('^(, *--(' + 'insecure|skip-tls-verify|skip-unused-stages|log-format|cache|use-new-run|compressed-caching|cache-ttl|cache-copy-layers|cache-run-layers|snapshot-mode|single-snapshot|verbosity|log-timestamp|cleanup|push-retry|image-fs-extract-retry|image-download-retry|insecure-pull|skip-tls-verify-pull|reproducible|compression|compression-level|build-arg|label|target|custom-platform|ignore-path' + (has(self.functionBuildExecutorAdditionalFlags) ? '|' + self.functionBuildExecutorAdditionalFlags.replace(' ', '').replace('--', '').replace(',', '|') : '') + ')([= ][^,]*)?)+$')",message="functionBuildExecutorArgs: only allow-listed kaniko flags are accepted (the README lists them): another flag, e.g. --registry-mirror or --cache-repo, can redirect, replace or leak Function images; to accept one, list its name in functionBuildExecutorAdditionalFlags",fieldPath=".functionBuildExecutorArgs",reason=FieldValueForbidden
// +kubebuilder:validation:XValidation:rule="!has(self.functionBuildExecutorArgs) || self.functionBuildExecutorArgs == '' || !(',' + self.functionBuildExecutorArgs).matches(', *--(destination|context|dockerfile|no-push)([= ,]|$)')",message="functionBuildExecutorArgs: --destination, --context, --dockerfile and --no-push are set by the Function controller and cannot be given (an extra --destination would push Function images elsewhere)",fieldPath=".functionBuildExecutorArgs",reason=FieldValueForbidden

// ServerlessSpec configures the Serverless module. Every field is optional; the
// manager picks the documented default for a field that is not set and shows
// the value in effect in the status.
type ServerlessSpec struct {
	// DockerRegistry selects where Function images are pushed and pulled from.
	// +optional
	DockerRegistry *DockerRegistry `json:"dockerRegistry,omitempty"`

	// Eventing configures the publisher proxy that Functions send events to.
	// +optional
	Eventing *Endpoint `json:"eventing,omitempty"`

	// Tracing configures the OTLP endpoint that Functions send traces to.
	// Without it, traces go to the telemetry-otlp-traces Service of the
	// module's namespace if that Service exists, and nowhere otherwise.
	// +optional
	Tracing *Endpoint `json:"tracing,omitempty"`

	// TargetCPUUtilizationPercentage is the CPU target of Function
	// autoscalers, in percent of the Function's CPU request (above 100 is
	// valid). Default 50. An integer or, as upstream's CRD typed it, a string
	// of decimal digits ("50"); "" means the default.
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int || self == '' || self.matches('^(0|[1-9][0-9]{0,9})$')",message="targetCPUUtilizationPercentage must be a whole number, given as 50 or \"50\" (decimal digits, no sign, no leading zero): the Function controller cannot start with anything else"
	// +kubebuilder:validation:XValidation:rule="(type(self) == string && !self.matches('^(0|[1-9][0-9]{0,9})$')) || ((type(self) == int ? self : int(self)) >= 1 && (type(self) == int ? self : int(self)) <= 2147483647)",message="targetCPUUtilizationPercentage must be 1 to 2147483647: with 0 or less no Function autoscaler is valid, and larger numbers do not fit the Function controller's setting"
	// +optional
	TargetCPUUtilizationPercentage *intstr.IntOrString `json:"targetCPUUtilizationPercentage,omitempty"`

	// FunctionRequeueDuration is how often a ready Function is checked again
	// (for example for new Git commits). Go duration, default 5m.
	// "" means the default.
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self == '' || self.matches('^[+]?(([0-9]+([.][0-9]*)?|[.][0-9]+)(ns|us|µs|μs|ms|s|m|h))+$') && duration(self) > duration('0s')",message="functionRequeueDuration must be a Go duration above zero with a unit, e.g. 5m or 1h30m: the Function controller cannot start with a bare number such as \"5\""
	// +optional
	FunctionRequeueDuration string `json:"functionRequeueDuration,omitempty"`

	// FunctionBuildExecutorArgs are build flags in kaniko's spelling (the
	// builder of 1.8.4), comma-separated. --insecure, --skip-tls-verify and
	// --cache take effect on the module's own builder; the others are
	// accepted and listed in status.functionBuildExecutorArgsIgnored.
	// Default: --insecure,--skip-tls-verify,--cache=true.
	// Only allow-listed flags (the README lists them; keep it in step with the
	// rule on ServerlessSpec, a regular expression whose cost stays within the
	// API server's budget) and those named in
	// functionBuildExecutorAdditionalFlags are accepted.
	// +kubebuilder:validation:MaxLength=4096
	// +kubebuilder:validation:Pattern=`^(--[^,]+(,[ ]*--[^,]+)*)?$`
	// +optional
	FunctionBuildExecutorArgs string `json:"functionBuildExecutorArgs,omitempty"`

	// FunctionBuildExecutorAdditionalFlags are kaniko flag names,
	// comma-separated (e.g. "--registry-mirror,--insecure-registry"),
	// accepted in functionBuildExecutorArgs besides the built-in allow-list.
	// Whoever may edit this CR decides which builder flags builds may use.
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:Pattern=`^--[a-z0-9][a-z0-9-]*(,[ ]*--[a-z0-9][a-z0-9-]*)*$`
	// +kubebuilder:validation:XValidation:rule="!(',' + self).matches(', *--(destination|context|dockerfile|no-push)(,|$)')",message="functionBuildExecutorAdditionalFlags cannot allow --destination, --context, --dockerfile or --no-push: the Function controller sets them"
	// +optional
	FunctionBuildExecutorAdditionalFlags string `json:"functionBuildExecutorAdditionalFlags,omitempty"`

	// FunctionBuildMaxSimultaneousJobs caps the build Jobs running at once in
	// the cluster. Default 5. An integer or, as upstream's CRD typed it, a
	// string of decimal digits ("5"); "" means the default.
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int || self == '' || self.matches('^(0|[1-9][0-9]{0,9})$')",message="functionBuildMaxSimultaneousJobs must be a whole number, given as 5 or \"5\" (decimal digits, no sign, no leading zero): the Function controller cannot start with anything else"
	// +kubebuilder:validation:XValidation:rule="(type(self) == string && !self.matches('^(0|[1-9][0-9]{0,9})$')) || ((type(self) == int ? self : int(self)) >= 1 && (type(self) == int ? self : int(self)) <= 2147483647)",message="functionBuildMaxSimultaneousJobs must be 1 to 2147483647: with 0 or less no Function is ever built, and larger numbers do not fit the Function controller's setting"
	// +optional
	FunctionBuildMaxSimultaneousJobs *intstr.IntOrString `json:"functionBuildMaxSimultaneousJobs,omitempty"`

	// HealthzLivenessTimeout bounds each step of the Function controller's
	// liveness check. Go duration, default 10s.
	// "" means the default.
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self == '' || self.matches('^[+]?(([0-9]+([.][0-9]*)?|[.][0-9]+)(ns|us|µs|μs|ms|s|m|h))+$') && duration(self) > duration('0s')",message="healthzLivenessTimeout must be a Go duration above zero with a unit, e.g. 10s: the Function controller cannot start with a bare number such as \"10\", and with zero its liveness check always fails"
	// +optional
	HealthzLivenessTimeout string `json:"healthzLivenessTimeout,omitempty"`

	// DefaultBuildJobPreset is the resource preset of build Jobs whose Function
	// names none. Default: slow on clusters with at most two nodes, else normal.
	// +kubebuilder:validation:Enum="";local-dev;slow;normal;fast
	// +optional
	DefaultBuildJobPreset string `json:"defaultBuildJobPreset,omitempty"`

	// DefaultRuntimePodPreset is the resource preset of Function Pods whose
	// Function names none. Default: XS on clusters with at most two nodes, else L.
	// +kubebuilder:validation:Enum="";XS;S;M;L;XL
	// +optional
	DefaultRuntimePodPreset string `json:"defaultRuntimePodPreset,omitempty"`

	// LogLevel of the Function controller; changed without a restart.
	// Default info. debug, info, warn, error and fatal are taken as they
	// are; dpanic and panic (Kyma's Serverless 1.13 documents them) are
	// logged at error. Any other string is accepted, as 1.13's CRD accepted
	// it, with a warning at admission and in the status: the default applies.
	// +optional
	LogLevel string `json:"logLevel,omitempty"`

	// LogFormat of the Function controller. Default json. text and console
	// (1.13's name for it) are the same human-readable lines. Any other
	// string is accepted, as 1.13's CRD accepted it, with a warning at
	// admission and in the status: the default applies.
	// +optional
	LogFormat string `json:"logFormat,omitempty"`

	// FunctionMode is how Functions run. "build" builds each Function into
	// an image with a Job and runs that image; "buildless" runs the runtime
	// image with the source and dependency list in the Pod, which installs
	// the dependencies when it starts (Kyma's Serverless 1.9 and later).
	// Unset: the annotation serverless.kyma-project.io/buildless-mode
	// ("enabled" or "disabled") if the CR has it, else the mode in effect
	// (status.functionMode), else the mode of the Serverless installation
	// the manager takes over, else "build". A switch rolls every Function
	// once (README: Buildless mode).
	// +kubebuilder:validation:Enum="";build;buildless
	// +optional
	FunctionMode string `json:"functionMode,omitempty"`

	// EnableNetworkPolicies installs NetworkPolicies that allow exactly the
	// traffic the module needs. Default false.
	// +optional
	EnableNetworkPolicies bool `json:"enableNetworkPolicies,omitempty"`

	// ScaleToZero configures how Functions with scaleConfig.minReplicas 0
	// are scaled to zero and woken. Unset: as without it.
	// +optional
	ScaleToZero *ScaleToZero `json:"scaleToZero,omitempty"`
}

// ScaleToZero configures the activator, which holds the requests of
// Functions at zero, wakes them and scales idle ones to zero.
type ScaleToZero struct {
	// Mesh is the service mesh the Functions run in: "istio" runs the
	// activator with an Istio sidecar, which wraps its requests to the
	// Functions' Pods in the mesh's mutual TLS (for namespaces whose Pods
	// get sidecars and a mesh that requires mutual TLS, as Kyma's Istio
	// module does), and gives each Function that scales to zero a headless
	// Service <function>-private that names its Pods to the mesh. ""
	// (default): the activator has no sidecar and speaks plain HTTP to the
	// Pods, which a mesh in STRICT mode refuses.
	// +kubebuilder:validation:Enum="";istio
	// +optional
	Mesh string `json:"mesh,omitempty"`
}

// DockerRegistry selects the registry for Function images.
// +kubebuilder:validation:XValidation:rule="!has(self.secretName) || size(self.secretName) > 0",message="dockerRegistry.secretName must not be empty when set"
type DockerRegistry struct {
	// EnableInternal installs a registry inside the cluster and uses it.
	// When secretName is set too, the internal registry wins and the status
	// says so with a Warning.
	// +optional
	EnableInternal *bool `json:"enableInternal,omitempty"`

	// SecretName names a Secret in the Serverless CR's namespace that describes
	// an external registry with the keys username, password, serverAddress and
	// registryAddress.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +optional
	SecretName *string `json:"secretName,omitempty"`

	// VolumeSize of the internal registry (default 20Gi). A larger value
	// grows its claim where the StorageClass allows volume expansion; a
	// volume never shrinks. The status says when a size cannot be had.
	// +optional
	VolumeSize *resource.Quantity `json:"volumeSize,omitempty"`

	// DeleteUnusedExternalImages lets the Function controller delete, from
	// the external registry, the Function images no Function uses any more,
	// by the rules it cleans the internal registry with (default false: an
	// external registry is the user's and nothing is deleted from it). Only
	// the repositories the module pushes Function images to are touched
	// (<registryAddress>/<namespace>-<function>, their kaniko cache
	// <...>/cache, <registryAddress>/serverless-dependencies), and only those
	// it knew of while this was on; never any other repository. Manifests
	// are deleted through the registry API: the registry must allow deletes,
	// and it frees their blobs by its own garbage collection. No effect with
	// the internal registry, which is always cleaned.
	// +optional
	DeleteUnusedExternalImages *bool `json:"deleteUnusedExternalImages,omitempty"`
}

// Endpoint is a URL another module listens on.
type Endpoint struct {
	// Endpoint is an absolute http(s) URL; empty means none (Functions get
	// an empty address, as upstream's operator passes it).
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self == '' || isURL(self) && url(self).getScheme() in ['http', 'https'] && url(self).getHostname() != ''",message="endpoint must be an absolute http or https URL, or empty for none"
	Endpoint string `json:"endpoint"`
}

// The modes of spec.functionMode, also the chart value functionMode and the
// Function controller's APP_FUNCTION_MODE.
const (
	FunctionModeBuild     = "build"
	FunctionModeBuildless = "buildless"
)

// MeshIstio is spec.scaleToZero.mesh for Istio, also the chart value
// activator.mesh, the activator's ACTIVATOR_MESH and the Function
// controller's APP_SCALE_TO_ZERO_MESH.
const MeshIstio = "istio"

// BuildlessModeAnnotation on the Serverless CR chose the mode in
// serverless-operator 1.8–1.11: "enabled" for buildless, "disabled" for
// build. It keeps that meaning while spec.functionMode is unset.
const BuildlessModeAnnotation = "serverless.kyma-project.io/buildless-mode"
