// Package namespaced holds the manager's permissions in the module
// namespace, generated (make manifests) into ClusterRole ClusterRole in
// config/rbac/role_namespaced.yaml. config/rbac binds it in the manager's
// own namespace; for a Serverless CR in another namespace the manager binds
// it there itself (scope.Binder) and unbinds it after the uninstall. A
// ClusterRole bound per namespace, not a Role: a Role exists in one
// namespace only, and the manager may not create one elsewhere holding
// rights it does not hold there (no escalate).
package namespaced

// ClusterRole is the name of the ClusterRole, and of the RoleBindings
// granting it.
const ClusterRole = "serverless-manager-namespaced"

// The module's namespaced objects (server-side apply: patch):
// +kubebuilder:rbac:groups="",resources=serviceaccounts;configmaps;secrets;services;persistentvolumeclaims,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=roles;rolebindings,verbs=get;list;watch;create;patch;delete
// The manager's leader election (its own namespace) and the Function
// controller's leader election Role (the module namespace), with events:
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
