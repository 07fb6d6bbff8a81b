package reconciler

import (
	"context"
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/internal/function/resources"
	"github.com/kyma-project/serverless-manager/operator/internal/steps"
	"github.com/kyma-project/serverless-manager/operator/pkg/scaletozero"
)

// observe lists the Function's children from the cache by the three internal
// labels (names are random,
// docs/contributor/upstream-contract.md#identity-labels). Objects already being
// deleted are left out. Lists are sorted oldest first, so "the first" is stable
// between passes.
func (r *Reconciler) observe(ctx context.Context, p *pass) (steps.Outcome, error) {
	if _, err := r.observeRunning(ctx, p); err != nil {
		return steps.Outcome{}, err
	}
	var (
		cms  corev1.ConfigMapList
		jobs batchv1.JobList
		hpas autoscalingv2.HorizontalPodAutoscalerList
		pods corev1.PodList
	)
	if err := r.list(ctx, p, &cms, &jobs, &hpas, &pods); err != nil {
		return steps.Outcome{}, err
	}
	p.configMaps = live(cms.Items)
	p.jobs = live(jobs.Items)
	p.hpas = live(hpas.Items)
	p.buildPods = pods.Items
	return steps.Next(), nil
}

// observeRunning lists what runs the Function: its Deployments and
// Services (the private one of mesh mode apart, by its name), and the
// EndpointSlices of scale to zero (in buildless mode the cache holds no
// other kind).
func (r *Reconciler) observeRunning(ctx context.Context, p *pass) (steps.Outcome, error) {
	var (
		deps appsv1.DeploymentList
		svcs corev1.ServiceList
		eps  discoveryv1.EndpointSliceList
	)
	if err := r.list(ctx, p, &deps, &svcs, &eps); err != nil {
		return steps.Outcome{}, err
	}
	p.deployments = live(deps.Items)
	p.services, p.privateServices = nil, nil
	private := scaletozero.PrivateServiceName(p.fn.Name)
	for _, svc := range live(svcs.Items) {
		if svc.Name == private {
			p.privateServices = append(p.privateServices, svc)
			continue
		}
		p.services = append(p.services, svc)
	}
	p.endpointSlices = live(eps.Items)
	return steps.Next(), nil
}

func (r *Reconciler) list(ctx context.Context, p *pass, lists ...client.ObjectList) error {
	opts := []client.ListOption{client.InNamespace(p.fn.Namespace), client.MatchingLabels(resources.InternalLabels(p.fn))}
	for _, l := range lists {
		if err := r.client.List(ctx, l, opts...); err != nil {
			return fmt.Errorf("listing %T: %w", l, err)
		}
	}
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
