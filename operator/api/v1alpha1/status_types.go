package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// State is the module state that Kyma's lifecycle-manager reads.
// +kubebuilder:validation:Enum=Processing;Deleting;Ready;Error;Warning
type State string

const (
	StateProcessing State = "Processing"
	StateDeleting   State = "Deleting"
	StateReady      State = "Ready"
	StateError      State = "Error"
	StateWarning    State = "Warning"
)

// Condition types of the Serverless status.
const (
	// ConditionConfigured is True when the spec was turned into chart values.
	ConditionConfigured = "Configured"
	// ConditionInstalled is True when every object of the chart is applied and ready.
	ConditionInstalled = "Installed"
	// ConditionDeleted reports the progress of an uninstall.
	ConditionDeleted = "Deleted"
	// ConditionDeploymentFailure (upstream's type) is True, with
	// ReasonDeploymentReplicaFailure, while a module Deployment cannot create
	// its Pods; absent otherwise.
	ConditionDeploymentFailure = "DeploymentFailure"
)

// Causes of the Serverless status, one per meaning (README's troubleshooting
// table explains each). A cause is the condition's reason unless upstream's
// operator names that situation with a reason of its own (UpstreamReason):
// then the condition carries upstream's reason, its message starts with
// "<cause>: ", and the Warning event of a failure carries the cause.
const (
	ReasonConfigured = "Configured"
	// ReasonConfigurationInvalid: the spec could not be turned into chart values.
	ReasonConfigurationInvalid = "ConfigurationInvalid"
	// ReasonClusterReadFailed: reading what the reconcile depends on (other
	// Serverless CRs, Secrets, Services, nodes, the applied objects) failed;
	// retried with backoff.
	ReasonClusterReadFailed    = "ClusterReadFailed"
	ReasonServerlessDuplicated = "ServerlessDuplicated"
	ReasonRegistrySecretError  = "RegistrySecretError"
	ReasonBothRegistries       = "InternalRegistryWins"
	ReasonRenderFailed         = "RenderFailed"
	// ReasonApplyFailed: the API server rejected or did not take a write of a
	// chart object.
	ReasonApplyFailed = "ApplyFailed"
	// ReasonScopeFailed: the manager could not take up the CR's namespace
	// (its RoleBinding there, the cache of that namespace).
	ReasonScopeFailed = "ScopeFailed"
	// ReasonTakeoverFailed: taking over serverless-operator's installation
	// (moving its field ownership, deleting what only its chart rendered or
	// its manifest cache Secret) failed.
	ReasonTakeoverFailed = "TakeoverFailed"
	// ReasonFinalizerFailed: the manager's finalizer could not be added to the CR.
	ReasonFinalizerFailed = "FinalizerFailed"
	ReasonInstalling      = "Installing"
	ReasonInstalled       = "Installed"
	ReasonRolloutFailed   = "RolloutFailed"
	ReasonPaused          = "Paused"
	ReasonFunctionsExist  = "FunctionsExist"
	ReasonDeleting        = "Deleting"
	ReasonDeletionFailed  = "DeletionFailed"
	// ReasonRegistryAlmostFull (in the Installed message of a Warning
	// state): the internal registry's volume is more than 80 % full.
	ReasonRegistryAlmostFull = "RegistryAlmostFull"
	// ReasonLogSettingUnknown (Configured=True, state Warning):
	// spec.logLevel or spec.logFormat names no level or format the Function
	// controller knows; it logs with the default instead.
	ReasonLogSettingUnknown = "LogSettingUnknown"
	// ReasonLogLevelMapped (Configured=True, the state stays Ready):
	// spec.logLevel is dpanic or panic (release 1.13's levels), which the
	// Function controller logs at error.
	ReasonLogLevelMapped = "LogLevelMapped"

	// ReasonDeploymentReplicaFailure (upstream's name): a module Deployment
	// reports ReplicaFailure (e.g. FailedCreate: a ResourceQuota forbids its
	// Pods); the message names the Deployment and Kubernetes' reason.
	ReasonDeploymentReplicaFailure = "DeploymentReplicaFailure"
	// ReasonInventoryEntryIgnored (a Warning event, no condition): entries of
	// status.inventory that cannot be the module's (a kind the chart never
	// renders, an object outside the module namespace) were dropped.
	ReasonInventoryEntryIgnored = "InventoryEntryIgnored"
)

// ServerlessStatus reports the module state and the configuration in effect.
type ServerlessStatus struct {
	// State of the module.
	// +optional
	State State `json:"state,omitempty"`

	// Served is True for the one Serverless CR of the cluster that the manager
	// acts on and False for every other one.
	// +kubebuilder:validation:Enum=True;False
	// +optional
	Served metav1.ConditionStatus `json:"served,omitempty"`

	// ObservedGeneration is the generation of the spec the status reports on.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Configured, Installed, (while uninstalling) Deleted and
	// (while a module Deployment cannot create its Pods) DeploymentFailure.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// ChartVersion is the version of the installed Serverless chart.
	// +optional
	ChartVersion string `json:"chartVersion,omitempty"`

	EffectiveConfiguration `json:",inline"`

	// InternalRegistry is how full the internal registry is (absent with an
	// external registry), as its registry-agent last measured it.
	// +optional
	InternalRegistry *RegistryUsage `json:"internalRegistry,omitempty"`

	// Inventory lists the objects the manager applied, for pruning and for
	// skipping unchanged objects. The manager trusts no entry by itself:
	// entries of kinds the chart never renders or outside the module
	// namespace are dropped with a Warning event, and an object is deleted
	// only when the chart renders it or the manager applied it. The bounds
	// keep a hand-written status small; the chart renders a few dozen objects.
	// +kubebuilder:validation:MaxItems=256
	// +optional
	Inventory []InventoryEntry `json:"inventory,omitempty"`
}

// EffectiveConfiguration is the configuration in effect, defaults included.
type EffectiveConfiguration struct {
	// FunctionMode in effect: "build" or "buildless".
	// +kubebuilder:validation:Enum=build;buildless
	// +optional
	FunctionMode string `json:"functionMode,omitempty"`
	// DockerRegistry is "internal" or the external registry's server address.
	DockerRegistry string `json:"dockerRegistry,omitempty"`
	// EventingEndpoint Functions publish events to.
	EventingEndpoint string `json:"eventingEndpoint,omitempty"`
	// TracingEndpoint Functions send traces to; empty when there is none.
	TracingEndpoint string `json:"tracingEndpoint,omitempty"`
	// CPUUtilizationPercentage of Function autoscalers.
	CPUUtilizationPercentage string `json:"targetCPUUtilizationPercentage,omitempty"`
	// RequeueDuration of ready Functions.
	RequeueDuration string `json:"functionRequeueDuration,omitempty"`
	// BuildExecutorArgs of build Jobs.
	BuildExecutorArgs string `json:"functionBuildExecutorArgs,omitempty"`
	// BuildExecutorArgsIgnored are the flags of BuildExecutorArgs that have
	// no effect on the module's builder (kaniko flags without a meaning
	// there), comma-separated.
	// +optional
	BuildExecutorArgsIgnored string `json:"functionBuildExecutorArgsIgnored,omitempty"`
	// BuildMaxSimultaneousJobs in the cluster.
	BuildMaxSimultaneousJobs string `json:"functionBuildMaxSimultaneousJobs,omitempty"`
	// HealthzLivenessTimeout of the Function controller.
	HealthzLivenessTimeout string `json:"healthzLivenessTimeout,omitempty"`
	// DefaultBuildJobPreset in effect.
	DefaultBuildJobPreset string `json:"defaultBuildJobPreset,omitempty"`
	// DefaultRuntimePodPreset in effect.
	DefaultRuntimePodPreset string `json:"defaultRuntimePodPreset,omitempty"`
	// LogLevel of the Function controller.
	LogLevel string `json:"logLevel,omitempty"`
	// LogFormat of the Function controller.
	LogFormat string `json:"logFormat,omitempty"`
	// NetworkPoliciesEnabled tells whether the module's NetworkPolicies are
	// installed: "True" or "False", the values upstream's operator writes.
	// +kubebuilder:validation:Enum=True;False
	NetworkPoliciesEnabled string `json:"networkPoliciesEnabled,omitempty"`
	// ScaleToZeroMesh is the service mesh the activator runs in ("istio");
	// absent without one.
	// +kubebuilder:validation:Enum=istio
	// +optional
	ScaleToZeroMesh string `json:"scaleToZeroMesh,omitempty"`
}

// RegistryUsage is how full the internal registry's volume is.
type RegistryUsage struct {
	// UsedBytes the registry's storage takes.
	UsedBytes int64 `json:"usedBytes"`
	// TotalBytes of its volume.
	TotalBytes int64 `json:"totalBytes"`
	// Images stored (tags).
	Images int `json:"images"`
	// UsedPercent is UsedBytes of TotalBytes, rounded down.
	UsedPercent int `json:"usedPercent"`
}

// InventoryEntry is one applied object.
type InventoryEntry struct {
	// ID is "<group>/<kind>/<namespace>/<name>" (empty group and namespace stay empty).
	// +kubebuilder:validation:MaxLength=640
	// +kubebuilder:validation:Pattern=`^[a-z0-9.-]*/[A-Za-z][A-Za-z0-9]*/[a-z0-9-]*/[^/]+$`
	ID string `json:"id"`
	// Digest of the rendered object that was applied.
	// +kubebuilder:validation:MaxLength=64
	Digest string `json:"digest"`
	// Version is the object's generation (for kinds that track one) or
	// resourceVersion right after the apply: a different live value means
	// someone else changed the object.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	Version string `json:"version,omitempty"`
}
