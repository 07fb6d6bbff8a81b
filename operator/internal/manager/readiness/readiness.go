// Package readiness tells whether applied objects have rolled out, using
// kstatus (sigs.k8s.io/cli-utils) on the live objects from the cache: the
// observed generation caught up, replicas updated and available, PVCs bound,
// CRDs established. A workload whose controller cannot create its Pods
// (condition ReplicaFailure, e.g. a ResourceQuota forbids them) is reported
// at once: kstatus would call it progressing until its deadline.
package readiness

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
)

// Getter returns a live object, nil when it does not exist.
type Getter interface {
	Object(ctx context.Context, gvk schema.GroupVersionKind, key types.NamespacedName) (*unstructured.Unstructured, error)
}

// Report sums up the readiness of a set of objects.
type Report struct {
	// NotReady names each object still rolling out, e.g.
	// "Deployment kyma-system/serverless-ctrl-mngr". The names stay the same
	// through a rollout's stages, so the status is not rewritten at each one.
	NotReady []string
	// Details say why each object is not ready yet (kstatus' message), for logs.
	Details []string
	// Failed describes each object whose rollout failed.
	Failed []string
	// ReplicaFailures describes each object whose Pods cannot be created or
	// deleted, with Kubernetes' reason and message, e.g. "Deployment
	// ns/name: FailedCreate: pods ... is forbidden: exceeded quota: ...".
	ReplicaFailures []string
}

// Ready is true when nothing is pending or failed.
func (r Report) Ready() bool {
	return len(r.NotReady) == 0 && len(r.Failed) == 0 && len(r.ReplicaFailures) == 0
}

// Summary is a one-line message for a condition.
func (r Report) Summary() string {
	switch {
	case len(r.ReplicaFailures) > 0:
		return "replica failure: " + strings.Join(r.ReplicaFailures, "; ")
	case len(r.Failed) > 0:
		return "rollout failed: " + strings.Join(r.Failed, "; ")
	case len(r.NotReady) > 0:
		return "waiting for " + strings.Join(r.NotReady, "; ")
	default:
		return "all objects are ready"
	}
}

// Check computes the readiness of objs, reading each with get. Only the kinds
// whose readiness shows in their status are checked (isWatchedInFull tells);
// the rest count as ready once applied.
func Check(ctx context.Context, get Getter, objs []*unstructured.Unstructured, hasStatus func(schema.GroupVersionKind) bool) (Report, error) {
	var rep Report
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		if !hasStatus(gvk) {
			continue
		}
		key := types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}
		live, err := get.Object(ctx, gvk, key)
		if err != nil {
			return rep, fmt.Errorf("reading %s %s: %w", gvk.Kind, key, err)
		}
		what := gvk.Kind + " " + strings.TrimPrefix(key.String(), "/")
		if live == nil {
			rep.NotReady = append(rep.NotReady, what)
			rep.Details = append(rep.Details, what+": not found yet")
			continue
		}
		if o.GetGeneration() > live.GetGeneration() {
			// Just applied and the cache lags behind: the apply response is newer.
			live = o
		}
		res, err := status.Compute(live)
		if err != nil {
			return rep, fmt.Errorf("computing status of %s: %w", what, err)
		}
		if res.Status == status.CurrentStatus {
			continue
		}
		if failure, ok := replicaFailure(live); ok {
			rep.ReplicaFailures = append(rep.ReplicaFailures, what+": "+failure)
			continue
		}
		switch res.Status {
		case status.FailedStatus:
			rep.Failed = append(rep.Failed, what+": "+res.Message)
		default:
			rep.NotReady = append(rep.NotReady, what)
			rep.Details = append(rep.Details, what+": "+res.Message)
		}
	}
	return rep, nil
}

// replicaFailure returns "<reason>: <message>" of a True ReplicaFailure
// condition (Deployments copy their ReplicaSet's, e.g. FailedCreate with the
// admission error of a ResourceQuota), but only when the status is about the
// object's current generation: a condition from before the last change may
// be gone once the controller looks at the new one.
func replicaFailure(live *unstructured.Unstructured) (string, bool) {
	observed, found, err := unstructured.NestedInt64(live.Object, "status", "observedGeneration")
	if err != nil || !found || observed < live.GetGeneration() {
		return "", false
	}
	conds, _, _ := unstructured.NestedSlice(live.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok || m["type"] != "ReplicaFailure" || m["status"] != "True" {
			continue
		}
		reason, _ := m["reason"].(string)
		msg, _ := m["message"].(string)
		return strings.TrimSuffix(reason+": "+msg, ": "), true
	}
	return "", false
}
