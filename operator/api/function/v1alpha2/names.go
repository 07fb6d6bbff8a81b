package v1alpha2

// Runtimes the module ships.
const (
	RuntimeNodejs20  Runtime = "nodejs20"
	RuntimeNodejs22  Runtime = "nodejs22"
	RuntimeNodejs24  Runtime = "nodejs24"
	RuntimePython312 Runtime = "python312"
)

// Runtimes lists every supported runtime.
func Runtimes() []Runtime {
	return []Runtime{RuntimeNodejs20, RuntimeNodejs22, RuntimeNodejs24, RuntimePython312}
}

// Deprecated reports whether the runtime still runs but is to be replaced
// (release 1.13 flags nodejs20 so, in the ConfigurationReady message).
func (r Runtime) Deprecated() bool { return r == RuntimeNodejs20 }

// Labels the Function controller puts on what it creates. Children of a
// Function are found by the three internal labels (function name, managed
// by, uid), never by name: Functions created by release 1.8.4 have random
// child names that must be reused.
const (
	LabelFunctionName = "serverless.kyma-project.io/function-name"
	LabelManagedBy    = "serverless.kyma-project.io/managed-by"
	LabelUUID         = "serverless.kyma-project.io/uuid"
	// LabelResource marks the Deployment's Pods (selector label).
	LabelResource      = "serverless.kyma-project.io/resource"
	ResourceDeployment = "deployment"
	// ManagedByController is the value of LabelManagedBy on children.
	ManagedByController = "function-controller"
	// ManagedByUser on a per-namespace copy keeps the controller from
	// overwriting or deleting it.
	ManagedByUser = "user"

	// LabelConfig marks the base objects copied into Function namespaces.
	LabelConfig          = "serverless.kyma-project.io/config"
	ConfigRuntime        = "runtime"
	ConfigCredentials    = "credentials"
	ConfigServiceAccount = "service-account"

	// AnnotationContinuousGitCheckout "true" checks the Git remote on every pass.
	AnnotationContinuousGitCheckout = "serverless.kyma-project.io/continuousGitCheckout"
	// AnnotationScaleToZeroAfter is how long a Function with
	// scaleConfig.minReplicas 0 may go without a request before it is
	// scaled to zero (a Go duration such as 90s or 5m).
	AnnotationScaleToZeroAfter = "serverless.kyma-project.io/scale-to-zero-after"
	// AnnotationWakeTimeout is how long a request to a Function at zero is
	// held while it wakes (a Go duration, at most the Function's
	// FUNC_TIMEOUT); the activator's hold timeout without it. Clusters
	// whose nodes come up on demand need longer than the default.
	AnnotationWakeTimeout = "serverless.kyma-project.io/wake-timeout"
	// AnnotationCPULimitAfterStart, on the Pod template of a scale-to-zero
	// Function whose Pods start with more CPU than their own limit, is that
	// limit: the controller resizes each Pod to it in place once it is
	// ready. Absent: the Pods start with their own limit.
	AnnotationCPULimitAfterStart = "serverless.kyma-project.io/cpu-limit-after-start"
)

// Condition types of a Function.
const (
	ConditionConfigurationReady = "ConfigurationReady"
	ConditionBuildReady         = "BuildReady"
	ConditionRunning            = "Running"
)

// Condition reasons of a Function, as release 1.8.4 writes them (tools key
// on them), plus the ones this controller adds where 1.8.4 said nothing.
const (
	ReasonInvalidFunctionSpec = "InvalidFunctionSpec"
	ReasonConfigMapCreated    = "ConfigMapCreated"
	ReasonConfigMapUpdated    = "ConfigMapUpdated"
	ReasonSourceUpdated       = "SourceUpdated"
	ReasonSourceUpdateFailed  = "SourceUpdateFailed"

	ReasonJobCreated  = "JobCreated"
	ReasonJobUpdated  = "JobUpdated"
	ReasonJobRunning  = "JobRunning"
	ReasonJobFinished = "JobFinished"
	ReasonJobFailed   = "JobFailed"
	ReasonJobsDeleted = "JobsDeleted"

	ReasonDeploymentCreated       = "DeploymentCreated"
	ReasonDeploymentUpdated       = "DeploymentUpdated"
	ReasonDeploymentFailed        = "DeploymentFailed"
	ReasonDeploymentWaiting       = "DeploymentWaiting"
	ReasonDeploymentReady         = "DeploymentReady"
	ReasonMinReplicasNotAvailable = "MinReplicasNotAvailable"
	ReasonServiceCreated          = "ServiceCreated"
	ReasonServiceUpdated          = "ServiceUpdated"
	ReasonServiceFailed           = "ServiceFailed"
	ReasonHPACreated              = "HorizontalPodAutoscalerCreated"
	ReasonHPAUpdated              = "HorizontalPodAutoscalerUpdated"

	// Added by this controller.
	// ReasonPrerequisitesMissing (ConfigurationReady False): a per-namespace
	// copy the Function needs (registry Secret, Dockerfile ConfigMap, Function
	// ServiceAccount) is missing or unusable; the message names it.
	ReasonPrerequisitesMissing = "PrerequisitesMissing"
	// ReasonFunctionConfigured (ConfigurationReady True): the source
	// ConfigMap was already up to date (1.8.4 wrote True InvalidFunctionSpec).
	ReasonFunctionConfigured = "FunctionConfigured"
	// ReasonJobWaiting (BuildReady Unknown): the build Job is not created
	// yet: the internal registry has no ready endpoint. (A build waiting
	// for a slot was JobWaiting too; it is JobQueued now.)
	ReasonJobWaiting = "JobWaiting"
	// ReasonJobQueued (BuildReady Unknown): the build waits behind the
	// module's limit of simultaneous builds; the message says how many
	// Functions are ahead of it.
	ReasonJobQueued = "JobQueued"
	// ReasonJobPodUnschedulable (BuildReady Unknown): the build Job's Pod
	// is not placed on a node; the message is the scheduler's.
	ReasonJobPodUnschedulable = "JobPodUnschedulable"
	// ReasonJobPodRefused (BuildReady False): the API server refuses the
	// build Job's Pod (a ResourceQuota, a LimitRange, an admission
	// policy); the message is its answer.
	ReasonJobPodRefused = "JobPodRefused"

	// Why a Function's replica cannot start (Running); the message names
	// the Deployment, the Pod and what the cluster said.
	// ReasonReplicaUnschedulable (Running Unknown): a Pod is not placed on
	// a node; the scheduler keeps trying, so it may still be.
	ReasonReplicaUnschedulable = "ReplicaUnschedulable"
	// NotPlacedSeparator ends the part of a ReplicaUnschedulable or
	// JobPodUnschedulable message that names the Deployment or Job and the
	// Pod; the scheduler's own words follow it, which the activator passes
	// on to callers (they name nodes and resources only).
	NotPlacedSeparator = " is not placed: "
	// ReasonReplicaRefused (Running False): the API server refuses the
	// Function's Pods (ReplicaSet ReplicaFailure FailedCreate: a
	// ResourceQuota, a LimitRange, an admission policy).
	ReasonReplicaRefused = "ReplicaRefused"
	// ReasonReplicaImagePullFailed (Running False): the node cannot pull
	// the Function's image.
	ReasonReplicaImagePullFailed = "ReplicaImagePullFailed"
	// ReasonReplicaCrashLoop (Running False): a container ends with an
	// error or is OOM-killed, and is restarted again and again.
	ReasonReplicaCrashLoop = "ReplicaCrashLoop"
	// ReasonReplicaConfigError (Running False): a container cannot be
	// created from its settings, for example a missing Secret or
	// ConfigMap key (CreateContainerConfigError).
	ReasonReplicaConfigError = "ReplicaConfigError"

	// Release 1.13's (buildless mode).
	// ReasonFunctionSpecValidated (ConfigurationReady True): the Function is
	// valid and its sources resolved.
	ReasonFunctionSpecValidated = "FunctionSpecValidated"

	// ReasonScaledToZero (Running True): a Function with
	// scaleConfig.minReplicas 0 has no replica; the next request starts one
	// (docs/contributor/scale-to-zero.md).
	ReasonScaledToZero = "ScaledToZero"

	// The reasons of the activator's 503 answers to requests it held for a
	// Function at zero, and of the Warning event it records on the Function
	// once per failed wake (the same text in X-Serverless-Activator-Reason).

	// ReasonWakeFailed: the Function could not be asked for a replica.
	ReasonWakeFailed = "WakeFailed"
	// ReasonStartFailed: the Function reports that its replicas cannot start
	// (an image that cannot be pulled, a crashing container).
	ReasonStartFailed = "StartFailed"
	// ReasonWakeTimeout: no replica became ready within the hold timeout.
	ReasonWakeTimeout = "WakeTimeout"
)

// CannotStart reports whether a Running condition False with reason says
// that the Function's replicas cannot start until something is changed
// (its spec, a Secret, a quota): waiting longer does not help. A replica
// that is not placed (ReasonReplicaUnschedulable) is not among them: a
// node autoscaler or freed capacity may still place it.
func CannotStart(reason string) bool {
	switch reason {
	case ReasonDeploymentFailed, ReasonReplicaRefused, ReasonReplicaImagePullFailed, ReasonReplicaCrashLoop, ReasonReplicaConfigError:
		return true
	}
	return false
}
