// Package apply sends rendered objects to the cluster with server-side apply,
// in dependency order, skipping what is already in place, and prunes objects
// that left the chart.
package apply

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/inventory"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
)

// LiveReader returns the live metadata of an object, usually from the
// manager's watch cache; nil without error when the object does not exist.
type LiveReader interface {
	LiveMeta(ctx context.Context, gvk schema.GroupVersionKind, key types.NamespacedName) (metav1.Object, error)
}

// Writer is the part of the API client the applier writes with.
type Writer interface {
	Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error
	Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error
}

// Applier applies and prunes the module's objects.
type Applier struct {
	writer Writer
	api    client.Reader
	live   LiveReader
	mapper meta.RESTMapper
}

// New returns an Applier writing with writer, deciding with live what needs a
// write and resolving kinds with mapper. api reads from the API server
// itself: what to prune is decided on its word, not the cache's.
func New(writer Writer, api client.Reader, live LiveReader, mapper meta.RESTMapper) *Applier {
	return &Applier{writer: writer, api: api, live: live, mapper: mapper}
}

// Result of one Apply.
type Result struct {
	// Inventory after the apply: every object applied or confirmed, plus,
	// after a failure, the previous entries that were not reached.
	Inventory inventory.Inventory
	// Applied lists the IDs that were sent to the API server.
	Applied []string
	// Pruned lists the IDs deleted because they left the chart.
	Pruned []string
	// Dropped lists the IDs removed from the inventory without a delete:
	// entries that cannot be the manager's, or objects it never applied.
	Dropped []string
	// Objects are the prepared objects in apply order; those that were sent
	// hold the API server's response (with generation and status).
	Objects []*unstructured.Unstructured
	// Waiting is set when the apply stopped early to wait for the cluster,
	// for example for a CRD to be established before its objects.
	Waiting string
}

// Pins names, by inventory ID, the objects rendered from their own live
// content (the internal registry's credentials, read from their Secret),
// each with the UID of the object that content came from.
type Pins map[string]types.UID

// Apply makes the cluster hold objs (rendered for namespace). prev is the
// inventory of the last apply. An object is sent only when it does not
// exist, its digest differs from the recorded one, the live object lacks
// that digest, or someone else changed it since (its generation, or
// resourceVersion for kinds without generation, moved); never while it is
// being deleted. A pinned object is written only to the object its content
// came from: when the API server refuses it because that one is gone or
// replaced, the apply stops Waiting, so that the next render starts from
// what is there (a deleted registry Secret gets new credentials, not the
// old ones back). Objects in prev but not in objs are pruned once every
// object applied cleanly. On error the returned inventory still holds
// prev's entries, so a later attempt can finish the job.
func (a *Applier) Apply(ctx context.Context, namespace string, objs []*unstructured.Unstructured, prev inventory.Inventory, pins Pins) (Result, error) {
	next := make(inventory.Inventory, len(prev))
	maps.Copy(next, prev)
	res := Result{Inventory: next}

	prepared := make([]*unstructured.Unstructured, 0, len(objs))
	for _, o := range objs {
		p := o.DeepCopy()
		if err := a.prepare(p, namespace); err != nil {
			if meta.IsNoMatchError(err) && Tier(p.GroupVersionKind().GroupKind()) > 0 {
				// Its CRD is not served yet; come back once it is.
				res.Waiting = fmt.Sprintf("waiting for the API of %s to be served", p.GroupVersionKind().Kind)
				return res, nil
			}
			return res, fmt.Errorf("%s %q: %w", p.GetKind(), p.GetName(), err)
		}
		prepared = append(prepared, p)
	}
	SortForApply(prepared)
	res.Objects = prepared

	current := make(map[string]bool, len(prepared))
	for _, obj := range prepared {
		id := inventory.ID(obj)
		current[id] = true
		digest := obj.GetAnnotations()[module.DigestAnnotation]
		live, err := a.live.LiveMeta(ctx, obj.GroupVersionKind(), client.ObjectKeyFromObject(obj))
		if err != nil {
			return res, fmt.Errorf("reading live %s %q: %w", obj.GetKind(), obj.GetName(), err)
		}
		if !needsApply(live, digest, prev[id]) {
			continue // next holds prev's entry, if any
		}
		// A pinned object is sent with its UID whatever the cache says (it
		// lacks objects not labelled yet, as upstream's): the API server
		// refuses an apply with a UID that no object of that name has.
		uid, pinned := pins[id]
		if pinned {
			obj.SetUID(uid)
		}
		if err := a.writer.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj),
			client.FieldOwner(module.ManagerName), client.ForceOwnership); err != nil {
			if pinned && refusedForUID(err) {
				res.Waiting = replacedMeanwhile(obj)
				return res, nil
			}
			return res, fmt.Errorf("applying %s %q: %w", obj.GetKind(), obj.GetName(), err)
		}
		res.Applied = append(res.Applied, id)
		next[id] = v1alpha1.InventoryEntry{ID: id, Digest: digest, Version: versionOf(obj)}
		if Tier(obj.GroupVersionKind().GroupKind()) == 0 {
			// A new CRD changes what the API serves.
			a.resetMapper()
		}
	}

	pruned, dropped, err := a.prune(ctx, namespace, ManagedKinds().WithCRDs(prepared), prev, current)
	for _, id := range append(pruned, dropped...) {
		delete(next, id)
	}
	res.Pruned, res.Dropped = pruned, dropped
	return res, err
}

// prepare completes a rendered object: namespace for namespaced kinds, the
// module labels, and the digest annotation computed over everything else.
func (a *Applier) prepare(obj *unstructured.Unstructured, namespace string) error {
	mapping, err := a.mapper.RESTMapping(obj.GroupVersionKind().GroupKind(), obj.GroupVersionKind().Version)
	if err != nil {
		return err
	}
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		if obj.GetNamespace() == "" {
			obj.SetNamespace(namespace)
		}
	} else {
		obj.SetNamespace("")
	}
	labels := obj.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, module.Labels())
	obj.SetLabels(labels)

	annotations := obj.GetAnnotations()
	delete(annotations, module.DigestAnnotation)
	obj.SetAnnotations(annotations)
	digest, err := inventory.Digest(obj)
	if err != nil {
		return fmt.Errorf("digesting: %w", err)
	}
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[module.DigestAnnotation] = digest
	obj.SetAnnotations(annotations)
	return nil
}

// needsApply says whether the object with digest must be sent, given its
// live metadata (nil: missing) and its entry of the last apply.
func needsApply(live metav1.Object, digest string, recorded v1alpha1.InventoryEntry) bool {
	switch {
	case live == nil:
		return true
	case live.GetDeletionTimestamp() != nil:
		// No apply stops a deletion (a CRD, for one, stays while its
		// instances are removed); the deletion event brings the reconcile
		// that creates the object again, and until then it is not ready.
		return false
	case recorded.ID == "" || recorded.Digest != digest || recorded.Version == "":
		return true
	case live.GetAnnotations()[module.DigestAnnotation] != digest:
		return true
	}
	return versionOf(live) != recorded.Version
}

// refusedForUID tells the API server's answers to an apply whose UID is not
// the object's: a conflict when there is no object, an immutable
// metadata.uid when there is another.
func refusedForUID(err error) bool {
	if apierrors.IsConflict(err) {
		return true
	}
	var status apierrors.APIStatus
	if !apierrors.IsInvalid(err) || !errors.As(err, &status) || status.Status().Details == nil {
		return false
	}
	for _, c := range status.Status().Details.Causes {
		if c.Field == "metadata.uid" {
			return true
		}
	}
	return false
}

// replacedMeanwhile is the Waiting message for a pinned object that is gone
// or another one since its content was read.
func replacedMeanwhile(obj *unstructured.Unstructured) string {
	return fmt.Sprintf("%s %q was deleted or replaced after the manager read it; reading it again", obj.GetKind(), obj.GetName())
}

// versionOf is what tells a later reconcile whether someone else changed
// the object: the generation for kinds that count spec changes, else the
// resourceVersion.
func versionOf(obj metav1.Object) string {
	if g := obj.GetGeneration(); g > 0 {
		return "g" + strconv.FormatInt(g, 10)
	}
	return "rv" + obj.GetResourceVersion()
}

func (a *Applier) resetMapper() {
	if r, ok := a.mapper.(meta.ResettableRESTMapper); ok {
		r.Reset()
	}
}
