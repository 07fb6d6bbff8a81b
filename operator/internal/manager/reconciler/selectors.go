package reconciler

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// keepLiveSelectors returns objs with each Deployment's selector replaced by
// the live Deployment's when they differ and the rendered Pod labels still
// satisfy the live one. A selector is immutable: the chart renders
// serverless-operator 1.x's selectors (so its Deployments are taken over in
// place), and this chart's earlier installs selected by other labels, which
// the Pod templates still carry. Such a Deployment keeps its selector for
// good instead of being deleted and created again (a restart of the
// controller or the registry for nothing). objs are not modified: a changed
// Deployment is a copy.
func (r *Reconciler) keepLiveSelectors(ctx context.Context, objs []*unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	out, copied := objs, false
	for i, o := range objs {
		if o.GroupVersionKind() != appsv1.SchemeGroupVersion.WithKind("Deployment") {
			continue
		}
		live, err := r.live.Object(ctx, o.GroupVersionKind(), client.ObjectKeyFromObject(o))
		if err != nil {
			return nil, fmt.Errorf("reading live Deployment %q: %w", o.GetName(), err)
		}
		kept, changed, err := keepSelector(o, live)
		if err != nil {
			return nil, fmt.Errorf("Deployment %q: %w", o.GetName(), err)
		}
		if !changed {
			continue
		}
		if !copied {
			out, copied = append([]*unstructured.Unstructured(nil), objs...), true
		}
		out[i] = kept
	}
	return out, nil
}

// keepSelector decides for one Deployment: it returns a copy of rendered
// carrying live's selector when the two differ and rendered's Pod template
// labels match live's selector; else rendered, unchanged. live may be nil
// or hold metadata only (a Deployment the cache does not hold).
func keepSelector(rendered, live *unstructured.Unstructured) (*unstructured.Unstructured, bool, error) {
	if live == nil {
		return rendered, false, nil
	}
	liveSel, found, err := selectorOf(live)
	if err != nil || !found {
		return rendered, false, err
	}
	want, _, err := selectorOf(rendered)
	if err != nil {
		return rendered, false, err
	}
	if equality.Semantic.DeepEqual(liveSel, want) {
		return rendered, false, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(liveSel)
	if err != nil {
		return rendered, false, fmt.Errorf("live selector: %w", err)
	}
	podLabels, _, _ := unstructured.NestedStringMap(rendered.Object, "spec", "template", "metadata", "labels")
	if sel.Empty() || !sel.Matches(labels.Set(podLabels)) {
		// The apply fails and says so: the Pods would not be selected.
		return rendered, false, nil
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(liveSel)
	if err != nil {
		return rendered, false, err
	}
	kept := rendered.DeepCopy()
	if err := unstructured.SetNestedField(kept.Object, content, "spec", "selector"); err != nil {
		return rendered, false, err
	}
	return kept, true, nil
}

// selectorOf reads spec.selector; found is false when the object has none.
func selectorOf(o *unstructured.Unstructured) (*metav1.LabelSelector, bool, error) {
	raw, found, err := unstructured.NestedMap(o.Object, "spec", "selector")
	if err != nil || !found {
		return nil, false, err
	}
	sel := &metav1.LabelSelector{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, sel); err != nil {
		return nil, false, fmt.Errorf("decoding spec.selector: %w", err)
	}
	return sel, true, nil
}
