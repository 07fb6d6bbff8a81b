// Package module holds the names every part of the manager agrees on: the
// labels that mark the module's objects, the field manager and the finalizer.
package module

import (
	"k8s.io/apimachinery/pkg/labels"
)

const (
	// Name of the module.
	Name = "serverless"
	// ManagerName identifies the manager as field manager, event source and
	// in the managed-by label.
	ManagerName = "serverless-manager"
	// Finalizer keeps a Serverless CR until the module is uninstalled.
	Finalizer = "operator.kyma-project.io/serverless-manager"
	// DigestAnnotation carries the digest of the rendered object last applied.
	DigestAnnotation = "operator.kyma-project.io/applied-digest"
	// EstablishRequestedAnnotation on a CRD records when the manager last
	// touched it so that kube-apiserver establishes it (see the reconciler).
	EstablishRequestedAnnotation = "operator.kyma-project.io/establish-requested-at"
	// PauseAnnotation on a Serverless CR with the value "paused" stops all changes.
	PauseAnnotation = "operator.kyma-project.io/reconcile"
	// PausedValue of PauseAnnotation.
	PausedValue = "paused"
	// DefaultNamespace is where the module is usually installed.
	DefaultNamespace = "kyma-system"

	LabelPartOf    = "app.kubernetes.io/part-of"
	LabelManagedBy = "app.kubernetes.io/managed-by"
	LabelModule    = "kyma-project.io/module"
)

// Labels are set on every object the manager applies; uninstall and the
// manager's own cache select by them.
func Labels() map[string]string {
	return map[string]string{
		LabelPartOf:    Name,
		LabelManagedBy: ManagerName,
		LabelModule:    Name,
	}
}

// Selector selects the objects the manager applied.
func Selector() labels.Selector {
	return labels.SelectorFromSet(labels.Set{LabelManagedBy: ManagerName, LabelModule: Name})
}

// Names of chart objects the manager reads to keep the installation stable.
const (
	// RegistrySecretName holds the registry configuration (and the internal
	// registry's credentials).
	RegistrySecretName = "serverless-registry-config-default"
	// RegistryServiceName is the internal registry's NodePort Service.
	RegistryServiceName = "serverless-docker-registry"
	// RegistryPVCName is the internal registry's volume.
	RegistryPVCName = "serverless-docker-registry"
)
