// Package kinds is the table of the kinds the Serverless chart renders and
// the manager manages. The same table drives what the manager caches and
// watches, how it checks readiness, the order it applies and deletes in, and
// what tests list to compare the cluster with the manager's inventory.
package kinds

import "k8s.io/apimachinery/pkg/runtime/schema"

// Kind is one managed kind and how the manager caches it.
type Kind struct {
	GVK schema.GroupVersionKind
	// Full kinds are cached as whole objects because their status tells
	// readiness, or their data is read; the others as metadata only.
	Full bool
	// Namespaced kinds are cached in the module namespace only.
	Namespaced bool
}

// Managed lists every kind the chart may render, or rendered in an older
// version. A kind the chart renders must be here, or its drift goes
// unnoticed (a test checks this).
func Managed() []Kind {
	gvk := func(group, version, kind string) schema.GroupVersionKind {
		return schema.GroupVersionKind{Group: group, Version: version, Kind: kind}
	}
	return []Kind{
		{GVK: gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition"), Full: true},
		{GVK: gvk("scheduling.k8s.io", "v1", "PriorityClass")},
		{GVK: gvk("rbac.authorization.k8s.io", "v1", "ClusterRole")},
		{GVK: gvk("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding")},
		// The chart renders no webhook any more (README: Why no admission
		// webhook); the kinds stay so the manager prunes, and uninstalls, the
		// configurations an older chart installed.
		{GVK: gvk("admissionregistration.k8s.io", "v1", "ValidatingWebhookConfiguration")},
		{GVK: gvk("admissionregistration.k8s.io", "v1", "MutatingWebhookConfiguration")},
		// Admission warnings about Functions (never rejections).
		{GVK: gvk("admissionregistration.k8s.io", "v1", "ValidatingAdmissionPolicy")},
		{GVK: gvk("admissionregistration.k8s.io", "v1", "ValidatingAdmissionPolicyBinding")},
		{GVK: gvk("", "v1", "ServiceAccount"), Namespaced: true},
		{GVK: gvk("rbac.authorization.k8s.io", "v1", "Role"), Namespaced: true},
		{GVK: gvk("rbac.authorization.k8s.io", "v1", "RoleBinding"), Namespaced: true},
		{GVK: gvk("", "v1", "ConfigMap"), Namespaced: true},
		{GVK: gvk("networking.k8s.io", "v1", "NetworkPolicy"), Namespaced: true},
		// The activator's: one replica stays through node drains.
		{GVK: gvk("policy", "v1", "PodDisruptionBudget"), Namespaced: true},
		// Secrets and Services as metadata only, like every kind, only the
		// module's (by label): the namespace may hold thousands. The few whose
		// content the manager reads are read from the API server, and the
		// users' among them (the registry Secret a CR names, the telemetry
		// Service) are watched by name.
		{GVK: gvk("", "v1", "Secret"), Namespaced: true},
		{GVK: gvk("", "v1", "Service"), Namespaced: true},
		{GVK: gvk("", "v1", "PersistentVolumeClaim"), Namespaced: true, Full: true},
		{GVK: gvk("apps", "v1", "Deployment"), Namespaced: true, Full: true},
	}
}

// HasStatus tells whether the readiness of a kind shows in its status: the
// kinds cached in full.
func HasStatus(gvk schema.GroupVersionKind) bool {
	for _, k := range Managed() {
		if k.GVK == gvk {
			return k.Full
		}
	}
	return false
}
