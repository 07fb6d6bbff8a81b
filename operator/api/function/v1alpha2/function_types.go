package v1alpha2

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Runtime is a supported Function runtime: the union of what release
// 1.8.4 and release 1.13 accept (nodejs20 is deprecated in both).
// +kubebuilder:validation:Enum=nodejs20;nodejs22;nodejs24;python312
type Runtime string

// FunctionSpec is what a user declares: source, runtime and how to run it.
// Node.js dependencies are checked here as 1.8.4's controller checked them
// (and the controller still does, for objects stored before this rule).
// +kubebuilder:validation:XValidation:rule="!self.runtime.startsWith('nodejs') || !has(self.source.inline) || !has(self.source.inline.dependencies) || size(self.source.inline.dependencies.trim()) == 0 || (self.source.inline.dependencies.trim().startsWith('{') && self.source.inline.dependencies.trim().endsWith('}'))",message="spec.source.inline.dependencies must be a package.json object (start with { and end with }) for Node.js runtimes",fieldPath=".source.inline.dependencies"
type FunctionSpec struct {
	// Runtime the Function's code runs on.
	Runtime Runtime `json:"runtime"`

	// RuntimeImageOverride replaces the runtime's base image. It is an image
	// reference as registries read it ([registry[:port]/]path[:tag][@digest]),
	// checked here so that a bad one is refused now, not inside a build.
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="size(self) == 0 || self.matches('^([a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?([.][a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?)*(:[0-9]+)?/)?[a-z0-9]+(([._]|__|[-]+)[a-z0-9]+)*(/[a-z0-9]+(([._]|__|[-]+)[a-z0-9]+)*)*(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@[A-Za-z][A-Za-z0-9]*([-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?$')",message="spec.runtimeImageOverride must be an image reference: [registry[:port]/]repository[:tag][@digest], lower-case repository, no spaces or shell characters"
	// +optional
	RuntimeImageOverride string `json:"runtimeImageOverride,omitempty"`

	// Source of the Function: inline code or a Git repository.
	Source Source `json:"source"`

	// The message names the first reserved name set, in the list's order,
	// taken from the literals rather than from the user's names: those have
	// no length bound, and the API server refuses a message expression
	// whose estimated cost has none (as it refuses one with join()).

	// Env is added to the Function's container. The names the runtime's
	// server and the buildless Pod's start script read are reserved, as in
	// release 1.13, and a rejection names the (first) one set.
	// +kubebuilder:validation:XValidation:rule="self.all(e, !(e.name in ['FUNC_RUNTIME', 'FUNC_HANDLER', 'FUNC_HANDLER_SOURCE', 'FUNC_HANDLER_DEPENDENCIES', 'FUNC_PORT', 'MOD_NAME', 'NODE_PATH', 'PYTHONPATH']))",messageExpression="'spec.env: ' + ['FUNC_RUNTIME', 'FUNC_HANDLER', 'FUNC_HANDLER_SOURCE', 'FUNC_HANDLER_DEPENDENCIES', 'FUNC_PORT', 'MOD_NAME', 'NODE_PATH', 'PYTHONPATH'].filter(n, self.exists(e, e.name == n))[0] + ' may not be set: the names FUNC_RUNTIME, FUNC_HANDLER, FUNC_HANDLER_SOURCE, FUNC_HANDLER_DEPENDENCIES, FUNC_PORT, MOD_NAME, NODE_PATH and PYTHONPATH are reserved'",message="spec.env: the names FUNC_RUNTIME, FUNC_HANDLER, FUNC_HANDLER_SOURCE, FUNC_HANDLER_DEPENDENCIES, FUNC_PORT, MOD_NAME, NODE_PATH and PYTHONPATH are reserved"
	// +kubebuilder:validation:MaxItems=100
	// +optional
	Env []corev1.EnvVar `json:"env,omitempty"`

	// ResourceConfiguration sizes the Function's Pods and build Jobs.
	// +optional
	ResourceConfiguration *ResourceConfiguration `json:"resourceConfiguration,omitempty"`

	// ScaleConfig turns on autoscaling between minReplicas and maxReplicas
	// when minReplicas is below maxReplicas, in build mode only.
	// Deprecated: scale the Function with its scale subresource instead.
	// +optional
	ScaleConfig *ScaleConfig `json:"scaleConfig,omitempty"`

	// Replicas of the Function's Deployment, at most 1000: a typo must
	// not flood the cluster with Pods.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	// +kubebuilder:default=1
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// Template is not supported any more.
	// Deprecated: use spec.labels and spec.annotations.
	// +kubebuilder:validation:XValidation:rule="!has(self.labels) && !has(self.annotations)",message="spec.template: labels and annotations are not supported, use spec.labels and spec.annotations"
	// +optional
	Template *Template `json:"template,omitempty"`

	// SecretMounts mount Secrets into the Function's container.
	// +kubebuilder:validation:MaxItems=50
	// +optional
	SecretMounts []SecretMount `json:"secretMounts,omitempty"`

	// Labels are added to the Function's Pods.
	// +kubebuilder:validation:XValidation:rule="self.all(k, !k.startsWith('serverless.kyma-project.io/'))",message="spec.labels: the prefix serverless.kyma-project.io/ is reserved"
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) < 64)",message="spec.labels: label names must be shorter than 64 characters"
	// +kubebuilder:validation:MaxProperties=64
	// +optional
	Labels map[string]string `json:"labels,omitempty"`

	// Annotations are added to the Function's Pods.
	// +kubebuilder:validation:XValidation:rule="self.all(k, !k.startsWith('serverless.kyma-project.io/'))",message="spec.annotations: the prefix serverless.kyma-project.io/ is reserved"
	// +kubebuilder:validation:MaxProperties=64
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`

	// PodSecurityContext of the Function's Pod (release 1.13's field). The
	// fields left unset keep the module's defaults.
	// +optional
	PodSecurityContext *corev1.PodSecurityContext `json:"podSecurityContext,omitempty"`

	// ContainerSecurityContext of the Function's container (release 1.13's
	// field). The fields left unset keep the module's defaults.
	// +optional
	ContainerSecurityContext *corev1.SecurityContext `json:"containerSecurityContext,omitempty"`
}

// Source holds exactly one kind of source.
// +kubebuilder:validation:XValidation:rule="has(self.gitRepository) != has(self.inline)",message="spec.source: use exactly one of gitRepository and inline"
type Source struct {
	// GitRepository to build the Function from.
	// +optional
	GitRepository *GitRepositorySource `json:"gitRepository,omitempty"`
	// Inline code of the Function.
	// +optional
	Inline *InlineSource `json:"inline,omitempty"`
}

// InlineSource is code kept in the Function itself. Source and dependencies
// together are at most 512 KiB of UTF-8: the build ConfigMap holds
// both (1 MiB at most), and the Function, JSON-escaped and with up to 256 KiB
// of annotations, stays well under etcd's 1.5 MiB request limit. Larger code
// belongs in a Git repository.
// +kubebuilder:validation:XValidation:rule="size(bytes(self.source)) + (has(self.dependencies) ? size(bytes(self.dependencies)) : 0) <= 524288",message="spec.source.inline: source and dependencies together must not exceed 524288 bytes (512 KiB); use a Git repository for larger code"
type InlineSource struct {
	// Source code of the handler.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=524288
	Source string `json:"source"`
	// Dependencies: package.json for Node.js, requirements.txt for Python.
	// +kubebuilder:validation:MaxLength=524288
	// +optional
	Dependencies string `json:"dependencies,omitempty"`
}

// GitRepositorySource is code in a Git repository.
// +kubebuilder:validation:XValidation:rule="has(self.baseDir) && size(self.baseDir.trim()) > 0",message="spec.source.gitRepository.baseDir is required"
// +kubebuilder:validation:XValidation:rule="has(self.reference) && size(self.reference.trim()) > 0",message="spec.source.gitRepository.reference is required"
type GitRepositorySource struct {
	// URL of the repository: https://, http:// or ssh://, or the SCP-like
	// user@host:path. Not file:// (the controller would read its own file
	// system) nor git:// (no authentication, no transport security).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.matches('^(https|http|ssh)://[^[:space:]/?#]+(/[^[:space:]]*)?$') || (!self.contains('://') && self.matches('^[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:[^[:space:]]+$'))",message="spec.source.gitRepository.url must be an https://, http:// or ssh:// URL or user@host:path (no file://, git:// or other schemes)"
	URL string `json:"url"`
	// Auth for a private repository.
	// +optional
	Auth *RepositoryAuth `json:"auth,omitempty"`
	// Repository is where in the repository and which revision.
	Repository `json:",inline"`
}

// Repository points at a directory and revision.
type Repository struct {
	// BaseDir is the directory holding the handler.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	BaseDir string `json:"baseDir,omitempty"`
	// Reference is a branch, tag or commit.
	// +kubebuilder:validation:MaxLength=256
	// +optional
	Reference string `json:"reference,omitempty"`
}

// RepositoryAuth names a Secret with Git credentials.
type RepositoryAuth struct {
	// Type of the credentials.
	// +kubebuilder:validation:Enum=basic;key
	Type string `json:"type"`
	// SecretName of a Secret in the Function's namespace.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="size(self.trim()) > 0",message="spec.source.gitRepository.auth.secretName is required"
	SecretName string `json:"secretName"`
}

// ResourceConfiguration sizes Pods and build Jobs.
type ResourceConfiguration struct {
	// Build sizes the build Job.
	// Deprecated: build sizing is a module setting.
	// +kubebuilder:validation:XValidation:rule="has(self.profile) != has(self.resources)",message="spec.resourceConfiguration.build: use exactly one of profile and resources"
	// +kubebuilder:validation:XValidation:rule="!has(self.profile) || self.profile in ['local-dev', 'slow', 'normal', 'fast']",message="spec.resourceConfiguration.build.profile must be one of local-dev, slow, normal, fast"
	// +optional
	Build *ResourceRequirements `json:"build,omitempty"`
	// Function sizes the Function's Pods.
	// +kubebuilder:validation:XValidation:rule="has(self.profile) != has(self.resources)",message="spec.resourceConfiguration.function: use exactly one of profile and resources"
	// +kubebuilder:validation:XValidation:rule="!has(self.profile) || self.profile in ['XS', 'S', 'M', 'L', 'XL']",message="spec.resourceConfiguration.function.profile must be one of XS, S, M, L, XL"
	// +optional
	Function *ResourceRequirements `json:"function,omitempty"`
}

// ResourceRequirements is a preset or explicit resources.
type ResourceRequirements struct {
	// Profile names a preset.
	// +kubebuilder:validation:MaxLength=32
	// +optional
	Profile string `json:"profile,omitempty"`
	// Resources set explicitly.
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`
}

// ScaleConfig bounds autoscaling. minReplicas above maxReplicas is admitted,
// as release 1.13 admits it: then no autoscaler runs and the replica count
// stays spec.replicas (admission and ConfigurationReady warn about it).
type ScaleConfig struct {
	// MinReplicas of the autoscaler. 0 scales the Function to zero after a
	// window without a request (annotation scale-to-zero-after, default 5m);
	// the autoscaler then starts from 1.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	MinReplicas *int32 `json:"minReplicas"`
	// MaxReplicas of the autoscaler, at most 1000 as spec.replicas.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	MaxReplicas *int32 `json:"maxReplicas"`
}

// Template is the deprecated Pod template override.
type Template struct {
	// Labels are not supported.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// Annotations are not supported.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// Where the runtime images keep what a Secret mount must not hide (the
// chart's build Dockerfiles and upstream's runtime images): Node.js code and
// dependencies in /usr/src/app/function, the runtime server's dependencies
// in /usr/src/app/node_modules; Python code in /kubeless, dependencies in
// /usr/local/lib/python3.12/site-packages. A mount at or above one of them
// hides it, one inside a dependency directory hides a part of it.

// SecretMount mounts one Secret.
// +kubebuilder:validation:XValidation:rule="self.mountPath.startsWith('/') && !self.mountPath.endsWith('/') && !self.mountPath.contains('//') && !self.mountPath.matches('(^|/)[.][.]?(/|$)')",message="must be an absolute path other than / with no trailing /, no // and no . or .. segments",fieldPath=".mountPath"
// +kubebuilder:validation:XValidation:rule="['/usr/src/app/function', '/usr/src/app/node_modules', '/kubeless', '/usr/local/lib/python3.12/site-packages'].all(d, self.mountPath != d && !d.startsWith(self.mountPath + '/')) && ['/usr/src/app/function/node_modules', '/usr/src/app/node_modules', '/usr/local/lib/python3.12/site-packages'].all(d, !self.mountPath.startsWith(d + '/'))",message="must not hide the runtime's code or dependencies: not at or above /usr/src/app/function, /usr/src/app/node_modules, /kubeless or /usr/local/lib/python3.12/site-packages, nor inside a dependency directory",fieldPath=".mountPath"
type SecretMount struct {
	// SecretName of a Secret in the Function's namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	SecretName string `json:"secretName"`
	// MountPath in the container.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	MountPath string `json:"mountPath"`
}

// FunctionStatus is what the Function controller reports.
type FunctionStatus struct {
	// Runtime last reconciled.
	// +optional
	Runtime Runtime `json:"runtime,omitempty"`
	// FunctionResourceProfile chosen, or "custom".
	// +optional
	FunctionResourceProfile string `json:"functionResourceProfile,omitempty"`
	// BuildResourceProfile chosen, or "custom".
	// Deprecated: follows the deprecated spec field.
	// +optional
	BuildResourceProfile string `json:"buildResourceProfile,omitempty"`
	// Conditions: ConfigurationReady, BuildReady, Running.
	// +optional
	Conditions []Condition `json:"conditions,omitempty"`
	// Repository settings last used.
	// Deprecated: read gitRepository (release 1.13's field); kept filled in.
	Repository `json:",inline"`
	// Commit built.
	// Deprecated: read gitRepository.commit; kept filled in.
	// +optional
	Commit string `json:"commit,omitempty"`
	// GitRepository is the Git source last used, for Git Functions.
	// +optional
	GitRepository *GitRepositoryStatus `json:"gitRepository,omitempty"`
	// FunctionAnnotations are the spec.annotations last put on the Pod
	// template: release 1.13 tells by them which template annotations are
	// the Function's.
	// +optional
	FunctionAnnotations map[string]string `json:"functionAnnotations,omitempty"`
	// PodSecurityContext in effect on the Function's Pod.
	// +optional
	PodSecurityContext *corev1.PodSecurityContext `json:"podSecurityContext,omitempty"`
	// ContainerSecurityContext in effect on the Function's container.
	// +optional
	ContainerSecurityContext *corev1.SecurityContext `json:"containerSecurityContext,omitempty"`
	// Replicas from the Deployment (scale subresource).
	// +optional
	Replicas int32 `json:"replicas,omitempty"`
	// PodSelector of the Deployment (scale subresource).
	// +optional
	PodSelector string `json:"podSelector,omitempty"`
	// RuntimeImage is the base image in use.
	// +optional
	RuntimeImage string `json:"runtimeImage,omitempty"`
	// RuntimeImageOverride mirrors the spec field.
	// Deprecated: read spec.runtimeImageOverride.
	// +optional
	RuntimeImageOverride string `json:"runtimeImageOverride,omitempty"`
	// BuiltImage is the pull reference of the last image built and pushed.
	// It remembers a finished build after its Job is gone: a Function whose
	// inputs give this image again is not rebuilt.
	// +optional
	BuiltImage string `json:"builtImage,omitempty"`
	// ObservedGeneration is the metadata.generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// GitRepositoryStatus is the Git source a Function was last built or run from.
type GitRepositoryStatus struct {
	// URL of the repository.
	URL string `json:"url"`
	// Repository is the directory and reference.
	Repository `json:",inline"`
	// Commit the reference resolved to.
	// +optional
	Commit string `json:"commit,omitempty"`
}

// Condition of a Function. It is written with every field of
// metav1.Condition that release 1.13's clients require (type, status,
// lastTransitionTime, reason, message), and the schema keeps requiring only
// type and status: conditions stored by release 1.8.4 without a reason or
// message stay valid.
type Condition struct {
	// Type: ConfigurationReady, BuildReady or Running.
	Type string `json:"type"`
	// Status: True, False or Unknown.
	// +kubebuilder:validation:Enum=True;False;Unknown
	Status corev1.ConditionStatus `json:"status"`
	// ObservedGeneration is the metadata.generation the condition was set for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// LastTransitionTime of the status.
	// +optional
	LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty"`
	// Reason in CamelCase.
	// +optional
	Reason string `json:"reason"`
	// Message for humans.
	// +optional
	Message string `json:"message"`
}

// Condition returns the condition of type t, or nil. It points into
// Conditions: setting its fields sets the status's.
func (s *FunctionStatus) Condition(t string) *Condition {
	for i := range s.Conditions {
		if s.Conditions[i].Type == t {
			return &s.Conditions[i]
		}
	}
	return nil
}

// Function is a piece of code the Serverless module builds and runs.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.podSelector
// +kubebuilder:resource:categories={kyma-serverless,all},shortName={fn,fns}
// +kubebuilder:printcolumn:name="Configured",type="string",JSONPath=".status.conditions[?(@.type=='ConfigurationReady')].status"
// +kubebuilder:printcolumn:name="Built",type="string",JSONPath=".status.conditions[?(@.type=='BuildReady')].status"
// +kubebuilder:printcolumn:name="Running",type="string",JSONPath=".status.conditions[?(@.type=='Running')].status"
// +kubebuilder:printcolumn:name="Runtime",type="string",JSONPath=".spec.runtime"
// +kubebuilder:printcolumn:name="Version",type="integer",JSONPath=".metadata.generation"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
type Function struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   FunctionSpec   `json:"spec,omitempty"`
	Status FunctionStatus `json:"status,omitempty"`
}

// FunctionList is a list of Functions.
//
// +kubebuilder:object:root=true
type FunctionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Function `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Function{}, &FunctionList{})
}
