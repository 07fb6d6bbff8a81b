package apply

import (
	"sort"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// tiers orders kinds so that every object finds what it depends on: CRDs
// before their objects, identities and configuration before the workloads
// that mount them, admission webhooks last so they never block the rest.
var tiers = map[schema.GroupKind]int{
	{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}: 0,
	{Kind: "Namespace"}: 1,
	{Group: "scheduling.k8s.io", Kind: "PriorityClass"}:              2,
	{Group: "storage.k8s.io", Kind: "StorageClass"}:                  2,
	{Kind: "ServiceAccount"}:                                         3,
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole"}:        3,
	{Group: "rbac.authorization.k8s.io", Kind: "Role"}:               3,
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRoleBinding"}: 3,
	{Group: "rbac.authorization.k8s.io", Kind: "RoleBinding"}:        3,
	{Kind: "ConfigMap"}:                                     4,
	{Kind: "Secret"}:                                        4,
	{Kind: "PersistentVolumeClaim"}:                         5,
	{Group: "networking.k8s.io", Kind: "NetworkPolicy"}:     5,
	{Group: "policy", Kind: "PodDisruptionBudget"}:          5,
	{Kind: "Service"}:                                       6,
	{Group: "apps", Kind: "Deployment"}:                     7,
	{Group: "apps", Kind: "StatefulSet"}:                    7,
	{Group: "apps", Kind: "DaemonSet"}:                      7,
	{Group: "batch", Kind: "Job"}:                           7,
	{Group: "batch", Kind: "CronJob"}:                       7,
	{Group: "autoscaling", Kind: "HorizontalPodAutoscaler"}: 7,
	// The Function admission policy only warns: nothing waits for it.
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingAdmissionPolicy"}:        8,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingAdmissionPolicyBinding"}: 8,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingWebhookConfiguration"}:   9,
	{Group: "admissionregistration.k8s.io", Kind: "MutatingWebhookConfiguration"}:     9,
	{Group: "apiregistration.k8s.io", Kind: "APIService"}:                             9,
}

// unknownTier is for kinds the table does not know: after the workloads,
// before the webhooks.
const unknownTier = 8

// Tier returns the apply position of a kind; lower goes first.
func Tier(gk schema.GroupKind) int {
	if t, ok := tiers[gk]; ok {
		return t
	}
	return unknownTier
}

// SortForApply orders objects by tier, keeping the given order within a tier.
func SortForApply(objs []*unstructured.Unstructured) {
	sort.SliceStable(objs, func(i, j int) bool {
		return Tier(objs[i].GroupVersionKind().GroupKind()) < Tier(objs[j].GroupVersionKind().GroupKind())
	})
}
