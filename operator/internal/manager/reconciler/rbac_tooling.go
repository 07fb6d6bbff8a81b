package reconciler

// The chart's user-facing ClusterRoles (kyma-functions-edit/-view, which
// aggregate Functions into the built-in edit and view roles). Kubernetes
// lets the manager apply a ClusterRole only with every permission in it or
// with `escalate` on it; holding Function write verbs cluster-wide would
// give the manager more than it uses, so it gets `escalate` on these two
// names only (server-side apply sends the name, so resourceNames apply).
//
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=clusterroles,verbs=get;patch;delete;escalate,resourceNames=kyma-functions-edit;kyma-functions-view
