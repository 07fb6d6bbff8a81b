package apply

import (
	"context"
	"errors"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ErrNotConfirmed wraps every reason why the API server could not confirm
// how many instances a CRD has; a CRD is never deleted on such an answer.
var ErrNotConfirmed = errors.New("the API server could not confirm that no instance exists")

// Instances is what the API server said about a CRD and its objects.
type Instances struct {
	// CRD as the API server holds it; nil when it does not exist (then no
	// instance can exist either).
	CRD *apiextensionsv1.CustomResourceDefinition
	// Count of the CRD's objects in the cluster.
	Count int
	// Names of up to ten of them, "namespace/name" or "name".
	Names []string
}

// CountInstances asks the API server itself, never a cache, how many objects
// of the CRD named crdName exist. The CRD is read first: it must be
// Established, and the objects are listed at a version it serves, so that
// an answer of "none" is the API server's and never a missing discovery
// entry or an unserved API taken for an empty list. Every doubt is an error
// wrapping ErrNotConfirmed.
func CountInstances(ctx context.Context, api client.Reader, crdName string) (Instances, error) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	err := api.Get(ctx, client.ObjectKey{Name: crdName}, crd)
	if apierrors.IsNotFound(err) {
		return Instances{}, nil
	}
	if err != nil {
		return Instances{}, fmt.Errorf("%w: reading CustomResourceDefinition %s: %w", ErrNotConfirmed, crdName, err)
	}
	res := Instances{CRD: crd}
	if !established(crd) {
		return res, fmt.Errorf("%w: CustomResourceDefinition %s is not Established, its objects cannot be listed", ErrNotConfirmed, crdName)
	}
	version := servedVersion(crd)
	if version == "" {
		return res, fmt.Errorf("%w: CustomResourceDefinition %s serves no version", ErrNotConfirmed, crdName)
	}
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(schema.GroupVersionKind{Group: crd.Spec.Group, Version: version, Kind: crd.Spec.Names.ListKind})
	if list.Kind == "" {
		list.Kind = crd.Spec.Names.Kind + "List"
	}
	// Any error, NoMatch and NotFound included, is a doubt: an API that is
	// not served may still hold objects in etcd.
	if err := api.List(ctx, list, client.Limit(10)); err != nil {
		return res, fmt.Errorf("%w: listing %s: %w", ErrNotConfirmed, crd.Spec.Names.Plural, err)
	}
	for _, o := range list.Items {
		name := o.Name
		if o.Namespace != "" {
			name = o.Namespace + "/" + o.Name
		}
		res.Names = append(res.Names, name)
	}
	res.Count = len(list.Items)
	if list.RemainingItemCount != nil {
		res.Count += int(*list.RemainingItemCount)
	} else if list.Continue != "" {
		res.Count++ // more exist; how many the API server did not say
	}
	return res, nil
}

func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established {
			return c.Status == apiextensionsv1.ConditionTrue
		}
	}
	return false
}

// servedVersion prefers the storage version; any served one lists the same objects.
func servedVersion(crd *apiextensionsv1.CustomResourceDefinition) string {
	served := ""
	for _, v := range crd.Spec.Versions {
		if !v.Served {
			continue
		}
		if v.Storage {
			return v.Name
		}
		if served == "" {
			served = v.Name
		}
	}
	return served
}
