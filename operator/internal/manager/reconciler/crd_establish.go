package reconciler

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/pkg/module"
)

// establishGrace is how long a CRD may have accepted names without being
// Established before the manager touches it; kube-apiserver establishes a
// CRD within milliseconds (5s in HA control planes).
const establishGrace = 10 * time.Second

// stuckCRDs returns the applied CRDs whose names were accepted more than
// establishGrace ago but that are still not Established (to be touched with
// requestEstablish), and when to look again (0: no CRD is waiting for that).
//
// kube-apiserver's establishing controller hears of a CRD only through an
// update event that shows its names accepted. When the API server stops
// between accepting the names and establishing (a crash or restart of a
// single-instance control plane), the restarted one sees the CRD only as
// added and never establishes it: the Functions API would stay unserved
// until the CRD changes. An annotation with the time of the request is such
// a change; the manager's own apply does not touch it.
func (r *Reconciler) stuckCRDs(ctx context.Context, applied []*unstructured.Unstructured, now time.Time) ([]string, time.Duration, error) {
	var stuck []string
	var again time.Duration
	for _, o := range applied {
		if o.GroupVersionKind().GroupKind() != apiextensionsv1.Kind("CustomResourceDefinition") {
			continue
		}
		live, err := r.live.Object(ctx, o.GroupVersionKind(), types.NamespacedName{Name: o.GetName()})
		if err != nil {
			return nil, 0, err
		}
		if live == nil {
			continue // not in the cache yet: its creation event comes
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(live.Object, crd); err != nil {
			return nil, 0, fmt.Errorf("reading CustomResourceDefinition %s: %w", o.GetName(), err)
		}
		touch, wait := establishDue(crd, now)
		if touch {
			stuck = append(stuck, crd.Name)
		}
		if wait > 0 && (again == 0 || wait < again) {
			again = wait
		}
	}
	return stuck, again, nil
}

// establishDue tells whether crd waits too long to be Established (touch it)
// and when to look at it again (0: it does not wait for that).
func establishDue(crd *apiextensionsv1.CustomResourceDefinition, now time.Time) (touch bool, wait time.Duration) {
	var accepted *apiextensionsv1.CustomResourceDefinitionCondition
	for i, c := range crd.Status.Conditions {
		switch {
		case c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue:
			return false, 0
		case c.Type == apiextensionsv1.NamesAccepted && c.Status == apiextensionsv1.ConditionTrue:
			accepted = &crd.Status.Conditions[i]
		}
	}
	if accepted == nil || crd.DeletionTimestamp != nil {
		return false, 0
	}
	since := accepted.LastTransitionTime.Time
	if last, err := time.Parse(time.RFC3339, crd.Annotations[module.EstablishRequestedAnnotation]); err == nil && last.After(since) {
		since = last
	}
	if left := establishGrace - now.Sub(since); left > 0 {
		return false, left
	}
	return true, establishGrace
}

// requestEstablish annotates a stuck CRD with the time of the request.
func (r *Reconciler) requestEstablish(ctx context.Context, name string, now time.Time) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
		module.EstablishRequestedAnnotation: now.UTC().Format(time.RFC3339)}}})
	if err != nil {
		return err
	}
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
	obj.SetName(name)
	if err := r.client.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(module.ManagerName)); err != nil {
		return fmt.Errorf("asking kube-apiserver to establish CustomResourceDefinition %s: %w", name, err)
	}
	return nil
}
