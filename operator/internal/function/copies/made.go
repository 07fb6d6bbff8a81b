package copies

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
)

// Made lists, from the API server and as metadata only, the copies this
// controller made in every namespace but base: what is left of build mode
// after a switch to buildless mode, where nothing is copied and the cache
// holds no copies. The objects are typed (ConfigMap, Secret,
// ServiceAccount) with their metadata only.
func Made(ctx context.Context, api client.Reader, base string) ([]client.Object, error) {
	var out []client.Object
	for _, kind := range []client.Object{&corev1.ConfigMap{}, &corev1.Secret{}, &corev1.ServiceAccount{}} {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(kindOf(kind) + "List"))
		selector := client.MatchingLabels{v1alpha2.LabelManagedBy: v1alpha2.ManagedByController, v1alpha2.LabelConfig: configValue(kind)}
		opts := []client.ListOption{selector, client.Limit(500)}
		for {
			if err := api.List(ctx, list, opts...); err != nil {
				return nil, fmt.Errorf("listing the %s copies: %w", kindOf(kind), err)
			}
			for i := range list.Items {
				obj := newOfKind(kind)
				obj.GetObjectKind().SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(kindOf(kind)))
				list.Items[i].ObjectMeta.DeepCopyInto(objectMeta(obj))
				if obj.GetNamespace() != base && IsCopy(obj) {
					out = append(out, obj)
				}
			}
			if list.Continue == "" {
				break
			}
			opts = []client.ListOption{selector, client.Limit(500), client.Continue(list.Continue)}
		}
	}
	return out, nil
}

func objectMeta(obj client.Object) *metav1.ObjectMeta {
	switch o := obj.(type) {
	case *corev1.ConfigMap:
		return &o.ObjectMeta
	case *corev1.Secret:
		return &o.ObjectMeta
	default:
		return &obj.(*corev1.ServiceAccount).ObjectMeta
	}
}
