// Package readiness tells whether applied objects have rolled out, using
// kstatus (sigs.k8s.io/cli-utils) on the live objects from the cache: the
// observed generation caught up, replicas updated and available, PVCs bound,
// CRDs established.
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
}

// Ready is true when nothing is pending or failed.
func (r Report) Ready() bool { return len(r.NotReady) == 0 && len(r.Failed) == 0 }

// Summary is a one-line message for a condition.
func (r Report) Summary() string {
	switch {
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
		switch res.Status {
		case status.CurrentStatus:
		case status.FailedStatus:
			rep.Failed = append(rep.Failed, what+": "+res.Message)
		default:
			rep.NotReady = append(rep.NotReady, what)
			rep.Details = append(rep.Details, what+": "+res.Message)
		}
	}
	return rep, nil
}
