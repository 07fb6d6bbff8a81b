package reconciler

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/apply"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/inventory"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/values"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
)

// ownership is what an uninstall may delete besides the objects the
// manager provably applied (apply.AppliedByManager): the chart's fixed
// identities and the names of the Function controller's per-namespace
// copies. Labels alone prove nothing: a Secret copied with
// `kubectl get -o yaml` keeps them.
type ownership struct {
	// chart holds every object the chart renders, with the spec's values
	// and with every optional part switched on.
	chart map[inventory.Ref]bool
	// copies are the names of the copies in user namespaces, by kind.
	copies map[schema.GroupKind]map[string]bool
	// kinds the module may own: the managed kinds and those of the chart's CRDs.
	kinds apply.Kinds
}

// owns tells whether the chart renders the object ref names.
func (o ownership) owns(ref inventory.Ref) bool { return o.chart[ref] }

// ownsCopy tells whether obj, in a user namespace, is a copy the Function
// controller made: a known name, and not taken over by its user.
func (o ownership) ownsCopy(gk schema.GroupKind, obj metav1.Object) bool {
	return o.copies[gk][obj.GetName()] && obj.GetLabels()[v1alpha2.LabelManagedBy] != v1alpha2.ManagedByUser
}

// ownership is ownershipOf(s.cr), rendered once per reconcile: several
// uninstall steps of one pass ask for it, and it depends only on the CR.
func (r *Reconciler) ownership(s *state) (ownership, error) {
	if s.own == nil {
		own, err := r.ownershipOf(s.cr)
		s.own = &ownershipResult{own: own, err: err}
	}
	return s.own.own, s.own.err
}

type ownershipResult struct {
	own ownership
	err error
}

// ownershipOf renders the chart for cr's namespace to learn the names it
// gives its objects: once with the values of cr's spec, once with the
// internal registry and the NetworkPolicies on, so that objects of either
// setting count. The uninstall does not read the cluster for values: the
// names do not depend on it. A render that fails leaves only the objects
// the manager provably applied deletable, which is the safe side.
func (r *Reconciler) ownershipOf(cr *v1alpha1.Serverless) (ownership, error) {
	own := ownership{chart: map[inventory.Ref]bool{}, kinds: apply.ManagedKinds(), copies: map[schema.GroupKind]map[string]bool{
		{Kind: "Secret"}:    {module.RegistrySecretName: true},
		{Kind: "ConfigMap"}: {},
	}}
	for _, rt := range v1alpha2.Runtimes() {
		own.copies[schema.GroupKind{Kind: "ConfigMap"}]["dockerfile-"+string(rt)] = true
	}
	if r.renderer == nil {
		return own, nil
	}
	every := *cr.Spec.DeepCopy()
	every.EnableNetworkPolicies = true
	every.DockerRegistry = &v1alpha1.DockerRegistry{EnableInternal: ptr.To(true)}
	facts := values.Facts{Namespace: cr.Namespace, ImageOverrides: r.opts.ImageOverrides, FIPSMode: r.opts.FIPSMode,
		NewSecret: func(n int) string { return strings.Repeat("x", n) }}
	var rendered []*unstructured.Unstructured
	for _, spec := range []v1alpha1.ServerlessSpec{cr.Spec, every} {
		built, err := values.Build(spec, facts)
		if err != nil {
			continue // e.g. an external registry Secret that is gone; the other render counts
		}
		vals, err := built.Values.Map()
		if err != nil {
			return own, err
		}
		objs, err := r.renderer.Render(cr.Namespace, vals)
		if err != nil {
			return own, err
		}
		rendered = append(rendered, objs...)
	}
	own.kinds = own.kinds.WithCRDs(rendered)
	for _, o := range rendered {
		gk := o.GroupVersionKind().GroupKind()
		namespaced, ok := own.kinds[gk]
		if !ok {
			continue
		}
		ref := inventory.Ref{GroupKind: gk, Name: o.GetName()}
		if namespaced {
			ref.Namespace = cr.Namespace
		}
		own.chart[ref] = true
		if _, isCopy := o.GetLabels()[v1alpha2.LabelConfig]; isCopy && namespaced {
			if own.copies[gk] == nil {
				own.copies[gk] = map[string]bool{}
			}
			own.copies[gk][o.GetName()] = true
		}
	}
	return own, nil
}

// deletable tells whether an uninstall may delete live (a leftover of the
// module namespace or cluster-scoped): the chart renders it, or the
// manager applied it (live must then come from the API server: the cache
// holds no managedFields).
func (o ownership) deletable(l leftover) bool {
	return o.owns(l.ref) || apply.AppliedByManager(l.live)
}
