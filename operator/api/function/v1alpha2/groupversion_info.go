// Package v1alpha2 is the Function API that the Serverless chart installs
// (serverless.kyma-project.io/v1alpha2). The manager does not reconcile
// Functions; these types exist to generate the CRD with its validation and to
// give tests typed Functions.
// +kubebuilder:object:generate=true
// +groupName=serverless.kyma-project.io
package v1alpha2

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion of Functions.
	GroupVersion = schema.GroupVersion{Group: "serverless.kyma-project.io", Version: "v1alpha2"}
	// SchemeBuilder registers the Function types.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}
	// AddToScheme adds the Function types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
