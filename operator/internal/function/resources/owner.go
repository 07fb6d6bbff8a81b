package resources

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
)

// ownerReferences makes the Function the controller owner of a child, so
// that garbage collection removes the child with the Function (no finalizer).
func ownerReferences(fn *v1alpha2.Function) []metav1.OwnerReference {
	return []metav1.OwnerReference{*metav1.NewControllerRef(fn, v1alpha2.GroupVersion.WithKind("Function"))}
}

// childMeta is the metadata shared by every child but the Service:
// generateName <fn><suffix>, the Function's namespace, functionLabels, owner.
func childMeta(fn *v1alpha2.Function, suffix string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		GenerateName:    fn.Name + suffix,
		Namespace:       fn.Namespace,
		Labels:          FunctionLabels(fn),
		OwnerReferences: ownerReferences(fn),
	}
}
