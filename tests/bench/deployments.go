package main

import (
	"context"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
)

// watchDeployments times each Function Deployment's creation and its first
// available replica: it splits the time to Running into the controller's
// part (creating the Deployments, writing the status) and the cluster's
// (ReplicaSets, Pods, scheduling).
func watchDeployments(ctx context.Context, wc client.WithWatch) (*timeline, error) {
	return watchTimeline(ctx, wc, &appsv1.DeploymentList{}, func(obj client.Object) (bool, string) {
		return obj.(*appsv1.Deployment).Status.AvailableReplicas > 0, "no available replica"
	}, client.MatchingLabels{v1alpha2.LabelManagedBy: v1alpha2.ManagedByController})
}

// deploymentFigures: when, after start, the last Deployment was created and
// the last one became available.
type deploymentFigures struct {
	count                      int
	lastCreated, lastAvailable time.Duration
}

func deploymentFiguresOf(t *timeline, start time.Time) deploymentFigures {
	seen, available := t.end()
	return deploymentFigures{count: len(seen), lastCreated: last(seen, start), lastAvailable: last(available, start)}
}
