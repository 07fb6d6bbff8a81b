// Package module holds the names every part of the module agrees on: the
// identities of its binaries, the labels that mark the module's objects,
// the finalizer and the chart objects the manager reads. Binaries, tests and
// hack tools import it; nothing else defines these names.
package module

import (
	"k8s.io/apimachinery/pkg/labels"
)

const (
	// Name of the module.
	Name = "serverless"
	// DefaultNamespace is where the module is usually installed.
	DefaultNamespace = "kyma-system"

	// ManagerName identifies the Serverless Manager as field manager, event
	// source and user agent.
	ManagerName = "serverless-manager"
	// ManagedBy is the value of LabelManagedBy on every object the manager
	// applies; uninstall and the manager's cache select by it.
	ManagedBy = "serverless-manager"
	// ManagerLeaseName is the Lease the manager elects its one writer with
	// when it runs in the cluster.
	ManagerLeaseName = "serverless-manager.operator.kyma-project.io"
	// FunctionControllerLeaseName is the Lease the Function controller
	// elects its one writer with (1.8.4's APP_LEADER_ELECTION_ID default).
	FunctionControllerLeaseName = "serverless-controller-leader-election-helper"
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

	LabelPartOf    = "app.kubernetes.io/part-of"
	LabelManagedBy = "app.kubernetes.io/managed-by"
	LabelModule    = "kyma-project.io/module"
)

// Identity is how one binary of the module is known: to the API server (its
// ServiceAccount, user agent and field manager), in events, on disk and in
// its image. Each binary has its own, so audit logs, managedFields and
// events tell them apart.
type Identity struct {
	// Name is the field manager, the event source and the user agent.
	Name string
	// ServiceAccount the binary runs as, in the module namespace; empty for
	// a binary that does not talk to the API server.
	ServiceAccount string
	// Binary is the file name under bin/ and the entrypoint of its image.
	Binary string
	// Package is the binary's main package, relative to the repository root.
	Package string
	// MetricsPort and HealthPort are where it serves metrics and probes in
	// its Pod (0: not served).
	MetricsPort, HealthPort int
}

// User is the API server's name for the identity's ServiceAccount in namespace.
func (i Identity) User(namespace string) string {
	return "system:serviceaccount:" + namespace + ":" + i.ServiceAccount
}

// Manager is the Serverless Manager: it installs the module from the
// Serverless CR.
func Manager() Identity {
	return Identity{
		Name: ManagerName, ServiceAccount: "serverless-manager",
		Binary: "manager", Package: "./operator/cmd/manager",
		MetricsPort: 8080, HealthPort: 8081,
	}
}

// FunctionController builds and runs Functions. Its ServiceAccount and
// ports are those of the chart's controller Deployment, and its name is
// the event source 1.8.4 used, so tools that read events keep working.
func FunctionController() Identity {
	return Identity{
		Name: "function-controller", ServiceAccount: "serverless-controller-manager",
		Binary: "function-controller", Package: "./operator/cmd/function-controller",
		MetricsPort: 8080, HealthPort: 8090,
	}
}

// RegistryAgent is the internal registry's sidecar (GET /usage, POST /gc
// on the registry's volume). It is its own binary so that the registry's
// storage code it links stays out of the controllers. It runs in the
// registry's Pod, which mounts no ServiceAccount token: it has no
// ServiceAccount of its own. Its probes are served on the agent's port
// (registryagent.Port).
func RegistryAgent() Identity {
	return Identity{
		Name: "registry-agent", Binary: "registry-agent", Package: "./operator/cmd/registry-agent",
		HealthPort: 5002,
	}
}

// Leases are the leader election Leases the module's Pods create in the
// module namespace (the chart renders none); an uninstall removes them.
func Leases() []string {
	return []string{FunctionControllerLeaseName, ActivatorLeaseName}
}

// Binaries are every binary of the module, in build order; each has its
// own image.
func Binaries() []Identity {
	return []Identity{Manager(), FunctionController(), RegistryAgent(), Activator()}
}

// APIClients are the binaries that talk to the API server, each as its own
// ServiceAccount (the audit log records exactly these).
func APIClients() []Identity {
	var ids []Identity
	for _, id := range Binaries() {
		if id.ServiceAccount != "" {
			ids = append(ids, id)
		}
	}
	return ids
}

// Labels are set on every object the manager applies; uninstall and the
// manager's own cache select by them.
func Labels() map[string]string {
	return map[string]string{
		LabelPartOf:    Name,
		LabelManagedBy: ManagedBy,
		LabelModule:    Name,
	}
}

// Selector selects the objects the manager applied.
func Selector() labels.Selector {
	return labels.SelectorFromSet(labels.Set{LabelManagedBy: ManagedBy, LabelModule: Name})
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
	// RegistryAgentServiceName is the ClusterIP Service of the internal
	// registry's registry-agent sidecar (port registryagent.Port).
	RegistryAgentServiceName = "serverless-docker-registry-agent"
	// RegistryRepositoriesName is the Function controller's ConfigMap of
	// the external registry's repositories it pushed Function images to
	// (the only ones its opt-in clean-up may touch).
	RegistryRepositoriesName = "serverless-registry-repositories"
)
