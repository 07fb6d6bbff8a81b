package framework

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// RolloutDone says whether Deployment d runs only Pods of its current
// template, as many as it wants, all of them Ready and none terminating: a
// Pod found by the Deployment's labels is then one of its current template
// (not one of an earlier template, or of an earlier Deployment of that name
// that is still going). The detail names what it saw.
func RolloutDone(ctx context.Context, c client.Client, d *appsv1.Deployment) (bool, string, error) {
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(d.Namespace), client.MatchingLabels(d.Spec.Selector.MatchLabels)); err != nil {
		return false, "", err
	}
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	s := d.Status
	done := s.ObservedGeneration == d.Generation && s.UpdatedReplicas == want && s.ReadyReplicas == want &&
		s.Replicas == want && len(pods.Items) == int(want)
	return done, fmt.Sprintf("generation %d observed %d, replicas %d updated %d ready %d, %d Pods", d.Generation, s.ObservedGeneration,
		s.Replicas, s.UpdatedReplicas, s.ReadyReplicas, len(pods.Items)), nil
}

// RolledOut is a WaitFor condition: Deployment ns/name exists and its
// rollout is done (RolloutDone).
func RolledOut(c client.Client, ns, name string) Condition {
	return func(ctx context.Context) (bool, string, error) {
		d := &appsv1.Deployment{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, d); err != nil {
			if apierrors.IsNotFound(err) {
				return false, "no Deployment " + ns + "/" + name, nil
			}
			return false, "", err
		}
		return RolloutDone(ctx, c, d)
	}
}
