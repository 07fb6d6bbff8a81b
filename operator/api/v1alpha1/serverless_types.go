package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Serverless is the configuration of the Kyma Serverless module and the report
// of its state. It is the only API of the Serverless Manager.
//
// Contract:
//   - Exactly one Serverless per cluster is served (status.served=True); it is
//     the oldest one (ties broken by namespace/name), and once served it stays
//     served until deleted. Every other one is left untouched apart from its
//     status: state Warning, Configured=False with reason ServerlessDuplicated.
//   - The served CR's spec is turned into values for the embedded Serverless
//     chart; the rendered objects are applied with server-side apply into the
//     CR's namespace (and cluster scope) and watched. status.state is
//     Processing until every applied object is ready, Ready afterwards, Error
//     when the configuration is invalid or an object failed, Warning when the
//     module works but something needs the user's attention, and Deleting
//     while the module is being removed.
//   - status.observedGeneration equals metadata.generation once the manager
//     has acted on the current spec; the remaining status fields echo the
//     configuration in effect, including defaults the manager picked.
//   - Deleting the CR removes everything the manager installed, but only when
//     no Function is left in the cluster; user Functions and Secrets are never
//     deleted.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories={kyma-modules,kyma-serverless}
// +kubebuilder:printcolumn:name="Configured",type="string",JSONPath=".status.conditions[?(@.type=='Configured')].status"
// +kubebuilder:printcolumn:name="Installed",type="string",JSONPath=".status.conditions[?(@.type=='Installed')].status"
// +kubebuilder:printcolumn:name="Generation",type="integer",JSONPath=".metadata.generation"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
// +kubebuilder:printcolumn:name="State",type="string",JSONPath=".status.state"
type Serverless struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ServerlessSpec   `json:"spec,omitempty"`
	Status ServerlessStatus `json:"status,omitempty"`
}

// ServerlessList is a list of Serverless resources.
//
// +kubebuilder:object:root=true
type ServerlessList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Serverless `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Serverless{}, &ServerlessList{})
}
