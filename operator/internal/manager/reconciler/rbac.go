package reconciler

// Least privilege for the manager (config/rbac/role.yaml is generated from
// these markers). Three parts:
//
//  1. Cluster-scoped objects of the chart: list/watch (the cache, by label)
//     and create cannot be limited by name; get, patch (server-side apply)
//     and delete are limited to the names the chart renders (and rendered
//     before: the webhook's, for uninstalling older installs; upstream's
//     1.10+ controller role, for the takeover).
//  2. Namespaced objects of the module: ClusterRole
//     serverless-manager-namespaced (package scope/namespaced, its own
//     file config/rbac/role_namespaced.yaml), bound in the manager's
//     namespace by config/rbac and, for a CR in another namespace, by the
//     manager there (package scope) while the module lives there.
//  3. Kubernetes lets the manager create the Function controller's
//     ClusterRole only with every permission in it (no escalate, and bind
//     only on its own namespaced ClusterRole: with more it could grant
//     anything to anyone), so it holds that ClusterRole's rules
//     cluster-wide, verb for verb; a test checks the coverage.
//
// The StorageClass of the internal registry's claim (may it grow?):
// +kubebuilder:rbac:groups=storage.k8s.io,resources=storageclasses,verbs=get
//
// Cluster-scoped objects of the chart:
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=list;watch;create
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;patch;delete,resourceNames=functions.serverless.kyma-project.io
// +kubebuilder:rbac:groups=scheduling.k8s.io,resources=priorityclasses,verbs=list;watch;create
// +kubebuilder:rbac:groups=scheduling.k8s.io,resources=priorityclasses,verbs=get;patch;delete,resourceNames=serverless-priority
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=clusterroles;clusterrolebindings,verbs=list;watch;create
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=clusterroles;clusterrolebindings,verbs=get;patch;delete,resourceNames=serverless;serverless-webhook;serverless-activator
// The Function controller's ClusterRole and binding of serverless-operator
// 1.10 and later, which the takeover deletes:
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=clusterroles;clusterrolebindings,verbs=get;delete,resourceNames=serverless-manager-role;serverless-manager-rolebinding
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations;mutatingwebhookconfigurations,verbs=list;watch
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations;mutatingwebhookconfigurations,verbs=get;delete,resourceNames=validation.webhook.serverless.kyma-project.io;defaulting.webhook.serverless.kyma-project.io
// The admission policy that warns about Functions, and its binding:
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingadmissionpolicies;validatingadmissionpolicybindings,verbs=list;watch;create
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingadmissionpolicies;validatingadmissionpolicybindings,verbs=get;patch;delete,resourceNames=serverless-function-warnings
//
// The Function controller's ClusterRole (charts/serverless/files/function-controller-rbac),
// which the manager also uses to delete the controller's copies in user
// namespaces on uninstall and to find a free NodePort:
// +kubebuilder:rbac:groups="",resources=configmaps;secrets;serviceaccounts;services,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups="",resources=namespaces;pods,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=pods/resize,verbs=patch
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups=apps,resources=replicasets,verbs=list
// +kubebuilder:rbac:groups="",resources=events,verbs=list
// +kubebuilder:rbac:groups=autoscaling,resources=horizontalpodautoscalers,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=discovery.k8s.io,resources=endpointslices,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=endpoints,verbs=delete
// +kubebuilder:rbac:groups=serverless.kyma-project.io,resources=functions,verbs=get;list;watch
// +kubebuilder:rbac:groups=serverless.kyma-project.io,resources=functions/finalizers,verbs=update
// +kubebuilder:rbac:groups=serverless.kyma-project.io,resources=functions/status,verbs=patch
//
// The activator's ClusterRole (charts/serverless/files/activator-rbac),
// beyond what the lines above hold:
// +kubebuilder:rbac:groups=serverless.kyma-project.io,resources=functions/scale,verbs=get;update
// +kubebuilder:rbac:groups=discovery.k8s.io,resources=endpointslices,verbs=list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
