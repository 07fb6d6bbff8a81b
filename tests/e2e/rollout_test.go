//go:build e2e

package e2e

// Rollouts of the module's Deployments: what rolls the Function
// controller's Pod (on the real node, where the new Pod really starts and
// logs) and what does not, and Pods the API server refuses shown on the CR
// at once.

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/tests/framework"
)

// logFormatAnnotation is the controller Pod template's copy of its log
// format (upstream's name): the controller reads the format only at start.
const logFormatAnnotation = "serverless.kyma-project.io/log-format"

// rollout is what tells how often the controller Deployment's Pod template
// changed: its generation, its revision and its ReplicaSets (one per template).
type rollout struct {
	generation  int64
	revision    string
	replicaSets int
	template    corev1.PodTemplateSpec
}

func (e *env) controllerRollout(ctx context.Context) (rollout, error) {
	d := &appsv1.Deployment{}
	if err := e.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: controllerName}, d); err != nil {
		return rollout{}, err
	}
	rsList := &appsv1.ReplicaSetList{}
	if err := e.c.List(ctx, rsList, client.InNamespace(ns)); err != nil {
		return rollout{}, err
	}
	n := 0
	for _, rs := range rsList.Items {
		for _, o := range rs.OwnerReferences {
			if o.UID == d.UID {
				n++
			}
		}
	}
	return rollout{generation: d.Generation, revision: d.Annotations["deployment.kubernetes.io/revision"], replicaSets: n, template: d.Spec.Template}, nil
}

// waitLogFormat waits for the first log line of the controller's Pod and
// checks it is JSON or not.
func (e *env) waitLogFormat(pod *corev1.Pod, json bool) {
	e.t.Helper()
	var line string
	framework.WaitFor(e.t, time.Minute, "the first log line of the Function controller's Pod "+pod.Name, func(ctx context.Context) (bool, string, error) {
		log, err := e.cluster.PodLog(ctx, pod.Namespace, pod.Name, "")
		if err != nil {
			return false, "", err
		}
		line, _, _ = strings.Cut(log, "\n")
		return line != "", line, nil
	}, e.cluster.DumpPodLogs(pod.Namespace, controllerLabels, 20))
	assert.Equal(e.t, json, strings.HasPrefix(line, "{"), "JSON log line expected: %t, got %q", json, line)
}

// The controller reads its log format at start: a logFormat change rolls its
// Pod template exactly once, and the new Pod (on the real node) logs in the
// new format; a logLevel change (reloaded from the mounted file) and
// changes the controller does not read do not touch the template, and its
// Pod goes on running.
func TestLogFormatRollsTheControllerOnce(t *testing.T) {
	e := startManager(t)
	ctx := t.Context()
	e.placeModule(framework.RealNode)
	e.applySample("default-serverless-cr.yaml")
	e.waitState("default", v1alpha1.StateReady)
	pod := e.currentControllerPod(ns, 2*time.Minute)
	e.waitLogFormat(pod, true)

	before, err := e.controllerRollout(ctx)
	require.NoError(t, err)
	assert.Equal(t, "json", before.template.Annotations[logFormatAnnotation])

	unchanged := []struct {
		name   string
		change func(cr *v1alpha1.Serverless)
	}{
		{"logLevel", func(cr *v1alpha1.Serverless) { cr.Spec.LogLevel = "debug" }},
		{"enableNetworkPolicies", func(cr *v1alpha1.Serverless) { cr.Spec.EnableNetworkPolicies = true }},
		{"logFormat set to its default", func(cr *v1alpha1.Serverless) { cr.Spec.LogFormat = "json" }},
	}
	for _, u := range unchanged {
		e.update("default", u.change)
		e.waitState("default", v1alpha1.StateReady)
		now, err := e.controllerRollout(ctx)
		require.NoError(t, err)
		assert.Equal(t, before, now, "%s must not change the controller's Pod template", u.name)
	}
	// kubelet refreshes the log configuration's volume on its sync (hack/node: 10 s).
	framework.WaitFor(t, time.Minute, "the running controller to switch to debug", func(ctx context.Context) (bool, string, error) {
		log, err := e.cluster.PodLog(ctx, ns, pod.Name, "")
		return strings.Contains(log, `"log level changed","level":"debug"`), "", err
	}, e.cluster.DumpPodLogs(ns, controllerLabels, 20))
	same := e.currentControllerPod(ns, 10*time.Second)
	assert.Equal(t, pod.UID, same.UID, "the controller's Pod keeps running")
	for _, cs := range same.Status.ContainerStatuses {
		assert.Zero(t, cs.RestartCount, "container %s restarted", cs.Name)
	}

	// Release 1.13's name of the text format, as its documentation sets it.
	e.update("default", func(cr *v1alpha1.Serverless) { cr.Spec.LogFormat = "console" })
	cr := e.waitState("default", v1alpha1.StateReady)
	assert.Equal(t, "text", cr.Status.LogFormat, "console is the controller's text format")
	var after rollout
	framework.WaitFor(t, 30*time.Second, "the controller's new ReplicaSet", func(ctx context.Context) (bool, string, error) {
		after, err = e.controllerRollout(ctx)
		return err == nil && after.replicaSets == before.replicaSets+1, fmt.Sprintf("%+v", after), err
	}, e.dumps("default")...)
	assert.Equal(t, before.generation+1, after.generation, "one change of the Deployment")
	assert.NotEqual(t, before.revision, after.revision, "one rollout")
	assert.Equal(t, "text", after.template.Annotations[logFormatAnnotation])
	delete(before.template.Annotations, logFormatAnnotation)
	delete(after.template.Annotations, logFormatAnnotation)
	assert.Equal(t, before.template, after.template, "nothing but the log format changes in the Pod template")

	rolled := e.currentControllerPod(ns, 2*time.Minute)
	assert.NotEqual(t, pod.UID, rolled.UID, "a new Pod")
	e.waitLogFormat(rolled, false)
	framework.WaitFor(t, time.Minute, "the old controller Pod to be gone", func(ctx context.Context) (bool, string, error) {
		err := e.c.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{})
		return apierrors.IsNotFound(err), "still there", client.IgnoreNotFound(err)
	})
	last, err := e.controllerRollout(ctx)
	require.NoError(t, err)
	assert.Equal(t, after.replicaSets, last.replicaSets, "still exactly one rollout")
	assert.Equal(t, after.generation, last.generation, "still exactly one rollout")
}

// quota forbids every new Pod in the module namespace.
func quota() *corev1.ResourceQuota {
	return &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "e2e-no-pods"},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}},
	}
}

// addQuota creates the quota and waits until the quota controller has
// recorded its limits (admission only enforces a quota with a status).
func (e *env) addQuota() {
	e.t.Helper()
	q := quota()
	require.NoError(e.t, e.c.Create(e.t.Context(), q))
	e.t.Cleanup(func() { _ = e.c.Delete(context.Background(), quota()) })
	framework.WaitFor(e.t, 30*time.Second, "the quota's status", func(ctx context.Context) (bool, string, error) {
		err := e.c.Get(ctx, client.ObjectKeyFromObject(q), q)
		return err == nil && q.Status.Hard != nil, fmt.Sprintf("%v", q.Status), err
	})
}

// waitReplicaFailure waits until upstream's DeploymentFailure condition
// names the controller Deployment and the quota's refusal, and Installed is
// False saying the same (with upstream's reason, the cause in front).
func (e *env) waitReplicaFailure(what string) *v1alpha1.Serverless {
	e.t.Helper()
	cr := e.waitFor("default", what, 30*time.Second, func(cr *v1alpha1.Serverless) bool {
		c := meta.FindStatusCondition(cr.Status.Conditions, v1alpha1.ConditionDeploymentFailure)
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == v1alpha1.ReasonDeploymentReplicaFailure &&
			strings.Contains(c.Message, "Deployment "+ns+"/"+controllerName+": FailedCreate: ")
	})
	assert.Equal(e.t, v1alpha1.StateError, cr.Status.State)
	failure := meta.FindStatusCondition(cr.Status.Conditions, v1alpha1.ConditionDeploymentFailure)
	assert.Contains(e.t, failure.Message, "exceeded quota: e2e-no-pods", "Kubernetes' message")
	installed := meta.FindStatusCondition(cr.Status.Conditions, v1alpha1.ConditionInstalled)
	if assert.NotNil(e.t, installed) {
		assert.Equal(e.t, metav1.ConditionFalse, installed.Status)
		assert.Equal(e.t, v1alpha1.ReasonDeploymentReplicaFailure, v1alpha1.Cause(*installed), "Installed names the cause: %+v", installed)
		assert.Contains(e.t, installed.Message, failure.Message)
	}
	return cr
}

func (e *env) removeQuotaAndWaitReady() {
	e.t.Helper()
	require.NoError(e.t, e.c.Delete(e.t.Context(), quota()))
	cr := e.waitState("default", v1alpha1.StateReady)
	assert.Nil(e.t, meta.FindStatusCondition(cr.Status.Conditions, v1alpha1.ConditionDeploymentFailure), "DeploymentFailure is gone")
}

// Pods a ResourceQuota refuses show on the CR within seconds, on a fresh
// install and on a change that rolls the controller, not after the
// 5-minute rollout timeout; lifting the quota brings Ready back.
func TestReplicaFailuresShowAtOnce(t *testing.T) {
	// The module's Pods stay on the simulated nodes (newEnv): the quota
	// refuses them at admission, before any node is chosen, and what the
	// test checks is the ReplicaSet's FailedCreate reaching the CR. Once the
	// quota goes, simulated Pods are Ready at once, so Ready comes back
	// without image pulls and container starts that test nothing here.
	e := startManager(t)

	e.addQuota()
	e.applySample("default-serverless-cr.yaml")
	e.waitReplicaFailure("a fresh install refused by the quota")
	e.removeQuotaAndWaitReady()

	e.addQuota()
	e.update("default", func(cr *v1alpha1.Serverless) { cr.Spec.LogFormat = "text" })
	cr := e.waitReplicaFailure("a controller rollout refused by the quota")
	assert.NotContains(t, meta.FindStatusCondition(cr.Status.Conditions, v1alpha1.ConditionDeploymentFailure).Message, registryName,
		"the registry did not roll and keeps its Pod")
	e.removeQuotaAndWaitReady()
}

// currentControllerPod waits until the Function controller Deployment in
// namespace has a Ready Pod of its current template (its newest
// ReplicaSet's pod-template-hash) and returns it: after a rollout, the Pod
// the new configuration started.
func (e *env) currentControllerPod(namespace string, timeout time.Duration) *corev1.Pod {
	e.t.Helper()
	var pod *corev1.Pod
	framework.WaitFor(e.t, timeout, "a Ready Function controller Pod of the current template in "+namespace, func(ctx context.Context) (bool, string, error) {
		d := &appsv1.Deployment{}
		if err := e.c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: controllerName}, d); err != nil {
			return false, "", err
		}
		if d.Status.ObservedGeneration != d.Generation {
			return false, fmt.Sprintf("generation %d, observed %d", d.Generation, d.Status.ObservedGeneration), nil
		}
		rev := d.Annotations["deployment.kubernetes.io/revision"]
		var rsList appsv1.ReplicaSetList
		if err := e.c.List(ctx, &rsList, client.InNamespace(namespace)); err != nil {
			return false, "", err
		}
		hash := ""
		for _, rs := range rsList.Items {
			if metav1.IsControlledBy(&rs, d) && rs.Annotations["deployment.kubernetes.io/revision"] == rev {
				hash = rs.Labels[appsv1.DefaultDeploymentUniqueLabelKey]
			}
		}
		if hash == "" {
			return false, "no ReplicaSet of revision " + rev, nil
		}
		labels := map[string]string{appsv1.DefaultDeploymentUniqueLabelKey: hash}
		for k, v := range d.Spec.Selector.MatchLabels {
			labels[k] = v
		}
		p, err := e.cluster.ReadyPod(ctx, namespace, labels)
		if err != nil {
			return false, fmt.Sprintf("revision %s: %v", rev, err), nil
		}
		pod = p
		return true, "", nil
	}, framework.DumpPods(e.c, namespace), framework.DumpEvents(e.c, namespace),
		e.cluster.DumpPodLogs(namespace, controllerLabels, 30))
	return pod
}
