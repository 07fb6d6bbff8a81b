package framework

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/pkg/kinds"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
	"github.com/kyma-project/serverless-manager/tests/support/upstreamtest"
)

// The custom resources a test may leave behind, and their CRDs.
var (
	serverlessGVK = schema.GroupVersionKind{Group: "operator.kyma-project.io", Version: "v1alpha1", Kind: "Serverless"}
	functionGVK   = schema.GroupVersionKind{Group: "serverless.kyma-project.io", Version: "v1alpha2", Kind: "Function"}
	leaseGVK      = schema.GroupVersionKind{Group: "coordination.k8s.io", Version: "v1", Kind: "Lease"}
)

// moduleCRDs are the CRDs whose deletion a test may leave half done.
var moduleCRDs = []string{"serverlesses.operator.kyma-project.io", "functions.serverless.kyma-project.io"}

// ResetTimeout bounds ResetModule: long enough for a CRD's cleanup of its
// objects and for namespaced deletions on a loaded machine.
const ResetTimeout = 2 * time.Minute

// ResetModule forces the cluster back to "module not installed", whatever
// a test left (stopped managers first: nobody may write meanwhile): every
// Serverless CR and Function goes, finalizers dropped, and so does every
// object with the module labels and every Lease of the module; it then
// waits until none is left and no module CRD is still being deleted, so
// that the next test can install its CRDs again. It returns what it had to
// remove ("" when the cluster was clean, as after a passing test) and, on
// timeout, what it still saw.
//
// It deletes by force what a test's uninstall did not remove; a test checks
// its own uninstall before calling it.
func (c *Cluster) ResetModule(ctx context.Context) (string, error) {
	var removed []string
	err := Poll(ctx, ResetTimeout, "the module to be gone", func(ctx context.Context) (bool, string, error) {
		left, err := c.moduleLeftovers(ctx)
		if err != nil {
			return false, "", err
		}
		terminating, err := c.terminatingCRDs(ctx)
		if err != nil {
			return false, "", err
		}
		if len(left) == 0 && len(terminating) == 0 {
			return true, "", nil
		}
		var errs []error
		for _, o := range left {
			name := o.GetObjectKind().GroupVersionKind().Kind + " " + path(o)
			if !slices.Contains(removed, name) {
				removed = append(removed, name)
			}
			errs = append(errs, c.forceDelete(ctx, o))
		}
		detail := fmt.Sprintf("left: %s; CRDs being deleted: %s", strings.Join(names(left), ", "), strings.Join(terminating, ", "))
		return false, detail, errors.Join(errs...)
	})
	return strings.Join(removed, ", "), err
}

// moduleLeftovers lists the module's custom resources and the objects
// labelled as the manager's or, in takeover tests, as upstream's operator's.
func (c *Cluster) moduleLeftovers(ctx context.Context) ([]*metav1.PartialObjectMetadata, error) {
	req, err := labels.NewRequirement(module.LabelManagedBy, selection.In, []string{module.ManagedBy, upstreamtest.Manager})
	if err != nil {
		return nil, err
	}
	managers := labels.NewSelector().Add(*req)
	var out []*metav1.PartialObjectMetadata
	gvks := []schema.GroupVersionKind{serverlessGVK, functionGVK}
	for _, k := range kinds.Managed() {
		gvks = append(gvks, k.GVK)
	}
	for i, gvk := range gvks {
		var opts []client.ListOption
		if i >= 2 { // the custom resources carry no module labels
			opts = append(opts, client.MatchingLabelsSelector{Selector: managers})
		}
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := c.client.List(ctx, list, opts...); err != nil {
			if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
				continue // its CRD is not installed
			}
			return nil, fmt.Errorf("listing %s: %w", gvk.Kind, err)
		}
		for j := range list.Items {
			o := &list.Items[j]
			o.SetGroupVersionKind(gvk)
			out = append(out, o)
		}
	}
	// The module's Leases carry no labels: known by name. Left held by a
	// Pod gone, one would keep the next test's leader waiting until it
	// expires. The manager's too: a manager Pod whose manifest is deleted
	// loses its RBAC before it can release its Lease.
	leases := &metav1.PartialObjectMetadataList{}
	leases.SetGroupVersionKind(leaseGVK.GroupVersion().WithKind("LeaseList"))
	if err := c.client.List(ctx, leases); err != nil {
		return nil, fmt.Errorf("listing Leases: %w", err)
	}
	for j := range leases.Items {
		if o := &leases.Items[j]; slices.Contains(module.Leases(), o.Name) || o.Name == module.ManagerLeaseName {
			o.SetGroupVersionKind(leaseGVK)
			out = append(out, o)
		}
	}
	return out, nil
}

// terminatingCRDs names the module CRDs that exist with a deletion timestamp.
func (c *Cluster) terminatingCRDs(ctx context.Context) ([]string, error) {
	var out []string
	for _, name := range moduleCRDs {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		err := c.client.Get(ctx, types.NamespacedName{Name: name}, crd)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return nil, err
		case crd.DeletionTimestamp != nil:
			out = append(out, name)
		}
	}
	return out, nil
}

// forceDelete drops the object's finalizers (the manager's, upstream's, the
// Function controller's: nobody runs to remove them) and deletes it.
func (c *Cluster) forceDelete(ctx context.Context, o *metav1.PartialObjectMetadata) error {
	if len(o.Finalizers) > 0 {
		patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))
		if err := c.client.Patch(ctx, o.DeepCopy(), patch); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("releasing %s: %w", path(o), err)
		}
	}
	if o.DeletionTimestamp != nil {
		return nil
	}
	err := c.client.Delete(ctx, o.DeepCopy(), client.PropagationPolicy(metav1.DeletePropagationBackground))
	if client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting %s: %w", path(o), err)
	}
	return nil
}

func path(o client.Object) string {
	if o.GetNamespace() == "" {
		return o.GetName()
	}
	return o.GetNamespace() + "/" + o.GetName()
}

func names(objs []*metav1.PartialObjectMetadata) []string {
	out := make([]string, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.GetObjectKind().GroupVersionKind().Kind+" "+path(o))
	}
	return out
}
