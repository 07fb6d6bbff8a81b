package scope

import (
	"context"
	"fmt"
	"slices"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/kyma-project/serverless-manager/operator/internal/manager/scope/namespaced"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
)

// What the Binder needs: create a RoleBinding anywhere (create cannot be
// limited by name), read and delete only its own, and bind only the
// manager's namespaced ClusterRole (bind instead of holding its rules
// cluster-wide, which is what the split into a Role avoids):
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=rolebindings,verbs=create
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=rolebindings,verbs=get;patch;delete,resourceNames=serverless-manager-namespaced
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=clusterroles,verbs=bind,resourceNames=serverless-manager-namespaced

// Binder grants the manager's ServiceAccount namespaced.ClusterRole in a
// namespace other than its own, by a RoleBinding of the same name; in its
// own namespace config/rbac binds it.
type Binder struct {
	client  client.Client
	api     client.Reader
	home    string
	subject rbacv1.Subject
}

// NewBinder binds ServiceAccount serviceAccount of namespace home; c writes,
// api reads (the manager does not cache RoleBindings outside the module).
func NewBinder(c client.Client, api client.Reader, home, serviceAccount string) *Binder {
	return &Binder{client: c, api: api, home: home,
		subject: rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: serviceAccount, Namespace: home}}
}

// RoleBinding is the binding Bind creates in namespace.
func (b *Binder) RoleBinding(namespace string) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{
		// The module's labels: the namespace cache holds it, so its loss
		// brings a reconcile, which binds again (Scope.Enter). Created, not
		// applied: the uninstall's sweep of what the manager applied leaves
		// it to Unbind, the uninstall's last step before the CR's finalizer.
		// Its own finalizer keeps the manager's rights while the namespace
		// is deleted with the CR in it (the namespace controller deletes
		// every RoleBinding at once): the uninstall there can still finish.
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: namespaced.ClusterRole, Labels: module.Labels(),
			Finalizers: []string{module.Finalizer}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: namespaced.ClusterRole},
		Subjects: []rbacv1.Subject{b.subject},
	}
}

// Bind makes sure the manager holds its namespaced permissions in
// namespace. A RoleBinding of that name that grants something else is left
// alone and reported: it is not the manager's to change.
func (b *Binder) Bind(ctx context.Context, namespace string) error {
	if namespace == b.home {
		return nil
	}
	want := b.RoleBinding(namespace)
	live := &rbacv1.RoleBinding{}
	err := b.api.Get(ctx, client.ObjectKeyFromObject(want), live)
	if apierrors.IsNotFound(err) {
		err = b.client.Create(ctx, want, client.FieldOwner(module.ManagerName))
		if err == nil {
			return nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("binding ClusterRole %s in namespace %s: %w", namespaced.ClusterRole, namespace, err)
		}
		err = b.api.Get(ctx, client.ObjectKeyFromObject(want), live)
	}
	if err != nil {
		return fmt.Errorf("reading RoleBinding %s/%s: %w", namespace, want.Name, err)
	}
	if !b.ours(live) {
		return fmt.Errorf("RoleBinding %s/%s exists and does not bind ClusterRole %s to ServiceAccount %s/%s; delete it to let the manager create its own",
			namespace, want.Name, namespaced.ClusterRole, b.subject.Namespace, b.subject.Name)
	}
	return nil
}

// Unbind removes the manager's RoleBinding from namespace (never from its
// own namespace, where config/rbac binds it, nor a RoleBinding of that name
// that is not the manager's): its finalizer first, then the object.
func (b *Binder) Unbind(ctx context.Context, namespace string) error {
	if namespace == b.home {
		return nil
	}
	live := &rbacv1.RoleBinding{}
	err := b.api.Get(ctx, client.ObjectKey{Namespace: namespace, Name: namespaced.ClusterRole}, live)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading RoleBinding %s/%s: %w", namespace, namespaced.ClusterRole, err)
	}
	if !b.ours(live) {
		return nil
	}
	if controllerutil.ContainsFinalizer(live, module.Finalizer) {
		patch := client.MergeFromWithOptions(live.DeepCopy(), client.MergeFromWithOptimisticLock{})
		controllerutil.RemoveFinalizer(live, module.Finalizer)
		if err := b.client.Patch(ctx, live, patch); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("releasing RoleBinding %s/%s: %w", namespace, live.Name, err)
		}
	}
	if live.DeletionTimestamp != nil {
		return nil // going already; the finalizer was all that kept it
	}
	err = b.client.Delete(ctx, live, client.Preconditions{UID: &live.UID})
	if client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("removing RoleBinding %s/%s: %w", namespace, live.Name, err)
	}
	return nil
}

// ours tells whether rb grants the manager's namespaced ClusterRole to it.
func (b *Binder) ours(rb *rbacv1.RoleBinding) bool {
	want := b.RoleBinding(rb.Namespace)
	return rb.RoleRef == want.RoleRef && slices.Contains(rb.Subjects, b.subject)
}
