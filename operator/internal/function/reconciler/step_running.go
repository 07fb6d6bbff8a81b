package reconciler

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/internal/steps"
)

// running sets the Running condition and status.replicas (scale
// subresource) from the Deployment. A Deployment created or rolled in this
// pass is DeploymentCreated/DeploymentUpdated; while it rolls out the
// condition stays as it is (no write per Deployment status change). A
// scale-to-zero Function at zero is True ScaledToZero with no replica.
func (r *Reconciler) running(_ context.Context, p *pass) (steps.Outcome, error) {
	dep := p.deployment
	if dep == nil {
		return steps.Next(), nil
	}
	p.status.Replicas = dep.Status.Replicas
	if atZero(p) {
		p.status.Replicas = 0
		setCondition(&p.status, v1alpha2.ConditionRunning, corev1.ConditionTrue, v1alpha2.ReasonScaledToZero, scaledToZeroMessage(p.fn), p.now)
		return steps.Next(), nil
	}
	if wait := firstRolloutWait(p, dep); wait > 0 {
		p.keepStatus = true
		return steps.Next().Within(wait), nil
	}
	if p.rolled != "" {
		verb := "created"
		if p.rolled == v1alpha2.ReasonDeploymentUpdated {
			verb = "updated"
		}
		setCondition(&p.status, v1alpha2.ConditionRunning, corev1.ConditionUnknown, p.rolled,
			fmt.Sprintf("Deployment %s %s", dep.Name, verb), p.now)
		return steps.Next(), nil
	}
	cur := p.status.Condition(v1alpha2.ConditionRunning)
	if cur != nil && dep.Status.ObservedGeneration < dep.Generation {
		// Someone else changed the Deployment (our own rollouts set p.rolled);
		// the Deployment controller's next status update decides.
		return steps.Next(), nil
	}
	status, reason, msg := deploymentState(dep)
	if cur != nil && cur.Status == corev1.ConditionUnknown && reason == v1alpha2.ReasonDeploymentWaiting {
		return steps.Next(), nil
	}
	if cur != nil && isReplicaCause(cur.Reason) && status != corev1.ConditionTrue && !isReplicaCause(reason) {
		// A cause found by an earlier look at the Pods stays until the
		// Deployment is ready or the next look (rollout) finds another or
		// none: a pass that does not look changes nothing.
		return steps.Next(), nil
	}
	setCondition(&p.status, v1alpha2.ConditionRunning, status, reason, msg, p.now)
	return steps.Next(), nil
}

// progressReportDelay is how long a status that would only report work
// as started (a build Job created, a first Deployment created) stays
// unwritten while that work may finish: work done within it costs one status
// write ("built", "running") instead of two. Work that takes longer is
// reported as in progress after it; nothing is lost meanwhile, the Job or
// the Deployment is there (see build).
const progressReportDelay = 5 * time.Second

// firstRolloutWait is how long this pass leaves the status unwritten: the
// rest of progressReportDelay while the Function has no Running condition yet
// and its new Deployment is not ready; else 0.
func firstRolloutWait(p *pass, dep *appsv1.Deployment) time.Duration {
	if p.fn.Status.Condition(v1alpha2.ConditionRunning) != nil {
		return 0
	}
	if status, _, _ := deploymentState(dep); status == corev1.ConditionTrue && p.rolled == "" {
		return 0
	}
	age := max(0, p.now.Sub(dep.CreationTimestamp.Time))
	return max(0, progressReportDelay-age)
}

// deploymentState reads a Deployment's conditions. A Deployment the
// Deployment controller has not looked at yet is waiting, not failed (1.8.4
// called it failed); Pods the API server refuses to create (ReplicaFailure
// FailedCreate, e.g. a ResourceQuota) are ReplicaRefused at once; missing
// minimum replicas is reported only once the rollout is over (during every
// rollout Available is False for a moment).
func deploymentState(dep *appsv1.Deployment) (corev1.ConditionStatus, string, string) {
	waiting := fmt.Sprintf("Deployment %s is not ready yet", dep.Name)
	if dep.Status.ObservedGeneration < dep.Generation {
		return corev1.ConditionUnknown, v1alpha2.ReasonDeploymentWaiting, waiting
	}
	if rf := replicaFailure(dep); rf != nil {
		if rf.Reason == failedCreate {
			c := refusedReplicas(dep.Name, rf.Message, "")
			return c.status, c.reason, c.message
		}
		return corev1.ConditionFalse, v1alpha2.ReasonDeploymentFailed,
			fmt.Sprintf("Deployment %s cannot create its Pods: %s: %s", dep.Name, rf.Reason, rf.Message)
	}
	avail := deploymentCondition(dep, appsv1.DeploymentAvailable)
	prog := deploymentCondition(dep, appsv1.DeploymentProgressing)
	rolledOut := prog == nil || (prog.Status == corev1.ConditionTrue && prog.Reason == "NewReplicaSetAvailable")
	switch {
	case prog != nil && prog.Status == corev1.ConditionFalse:
		return corev1.ConditionFalse, v1alpha2.ReasonDeploymentFailed,
			fmt.Sprintf("Deployment %s failed: %s: %s", dep.Name, prog.Reason, prog.Message)
	case avail != nil && avail.Status == corev1.ConditionTrue && rolledOut:
		return corev1.ConditionTrue, v1alpha2.ReasonDeploymentReady, fmt.Sprintf("Deployment %s is ready", dep.Name)
	case avail != nil && avail.Status == corev1.ConditionFalse && rolledOut:
		return corev1.ConditionUnknown, v1alpha2.ReasonMinReplicasNotAvailable,
			fmt.Sprintf("Minimum replicas not available for deployment %s", dep.Name)
	}
	return corev1.ConditionUnknown, v1alpha2.ReasonDeploymentWaiting, waiting
}

func deploymentCondition(dep *appsv1.Deployment, t appsv1.DeploymentConditionType) *appsv1.DeploymentCondition {
	for i := range dep.Status.Conditions {
		if dep.Status.Conditions[i].Type == t {
			return &dep.Status.Conditions[i]
		}
	}
	return nil
}

// replicaFailure is the Deployment's True ReplicaFailure condition (its
// ReplicaSet cannot create Pods), or nil.
func replicaFailure(dep *appsv1.Deployment) *appsv1.DeploymentCondition {
	if c := deploymentCondition(dep, appsv1.DeploymentReplicaFailure); c != nil && c.Status == corev1.ConditionTrue {
		return c
	}
	return nil
}
