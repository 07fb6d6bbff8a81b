package scope

import (
	"context"
	"fmt"
	"slices"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/internal/manager/scope/namespaced"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
)

// What the Binder needs: create a RoleBinding anywhere (create cannot be
// limited by name), read and delete only its own, and bind only the
// manager's namespaced ClusterRole (bind instead of holding its rules
// cluster-wide, which is what the split into a Role avoids):
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=rolebindings,verbs=create
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=rolebindings,verbs=get;delete,resourceNames=serverless-manager-namespaced
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
		// The module's labels: the namespace cache holds it, so its deletion
		// brings a reconcile, which binds again (Scope.Enter). Created, not
		// applied: the uninstall's sweep of what the manager applied leaves
		// it to Unbind, the uninstall's last step before the finalizer.
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: namespaced.ClusterRole, Labels: module.Labels()},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: namespaced.ClusterRole},
		Subjects:   []rbacv1.Subject{b.subject},
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
	if live.RoleRef != want.RoleRef || !slices.Contains(live.Subjects, b.subject) {
		return fmt.Errorf("RoleBinding %s/%s exists and does not bind ClusterRole %s to ServiceAccount %s/%s; delete it to let the manager create its own",
			namespace, want.Name, namespaced.ClusterRole, b.subject.Namespace, b.subject.Name)
	}
	return nil
}

// Unbind removes the manager's RoleBinding from namespace (never from its
// own namespace, where config/rbac binds it).
func (b *Binder) Unbind(ctx context.Context, namespace string) error {
	if namespace == b.home {
		return nil
	}
	err := b.client.Delete(ctx, b.RoleBinding(namespace))
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("removing RoleBinding %s/%s: %w", namespace, namespaced.ClusterRole, err)
	}
	return nil
}
