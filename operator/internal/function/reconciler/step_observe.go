package reconciler

import (
	"context"
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/internal/function/resources"
)

// observe lists the Function's children from the cache by the three
// internal labels (names are random, contract §8.1). Objects already being
// deleted are left out. Lists are sorted oldest first, so "the first" is
// stable between passes.
func (r *Reconciler) observe(ctx context.Context, p *pass) error {
	opts := []client.ListOption{client.InNamespace(p.fn.Namespace), client.MatchingLabels(resources.InternalLabels(p.fn))}
	var (
		cms  corev1.ConfigMapList
		jobs batchv1.JobList
		deps appsv1.DeploymentList
		svcs corev1.ServiceList
		hpas autoscalingv1.HorizontalPodAutoscalerList
		pods corev1.PodList
	)
	for _, l := range []client.ObjectList{&cms, &jobs, &deps, &svcs, &hpas, &pods} {
		if err := r.client.List(ctx, l, opts...); err != nil {
			return fmt.Errorf("listing %T: %w", l, err)
		}
	}
	p.configMaps = live(cms.Items)
	p.jobs = live(jobs.Items)
	p.deployments = live(deps.Items)
	p.services = live(svcs.Items)
	p.hpas = live(hpas.Items)
	p.buildPods = pods.Items
	return nil
}

// live keeps the objects not being deleted, oldest first (ties by name).
func live[T any, P interface {
	*T
	metav1.Object
}](items []T) []T {
	out := make([]T, 0, len(items))
	for i := range items {
		if P(&items[i]).GetDeletionTimestamp() == nil {
			out = append(out, items[i])
		}
	}
	slices.SortStableFunc(out, func(a, b T) int {
		ma, mb := P(&a), P(&b)
		if c := ma.GetCreationTimestamp().Time.Compare(mb.GetCreationTimestamp().Time); c != 0 {
			return c
		}
		if ma.GetName() < mb.GetName() {
			return -1
		}
		if ma.GetName() > mb.GetName() {
			return 1
		}
		return 0
	})
	return out
}
