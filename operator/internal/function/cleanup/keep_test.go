package cleanup

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
)

func TestRollbackTargets(t *testing.T) {
	ctrl := true
	rs := func(name, owner string, revision string, replicas int32) appsv1.ReplicaSet {
		r := appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{revisionAnnotation: revision}},
			Status: appsv1.ReplicaSetStatus{Replicas: replicas}}
		if owner != "" {
			r.OwnerReferences = []metav1.OwnerReference{{UID: types.UID(owner), Controller: &ctrl}}
		}
		return r
	}
	all := []appsv1.ReplicaSet{
		rs("a1", "a", "1", 0), rs("a3", "a", "3", 1), rs("a2", "a", "2", 0), rs("a0", "a", "0", 0),
		rs("b7", "b", "7", 0), rs("b5", "b", "5", 2), rs("b6", "b", "6", 0),
		rs("c1", "c", "1", 0),
	}
	var names []string
	for _, r := range rollbackTargets(all) {
		names = append(names, r.Name)
	}
	assert.ElementsMatch(t, []string{
		"a3", "a2", // current and previous revision
		"b5", "b7", "b6", // b5 still has Pods (a rollout in progress)
		"c1",
	}, slices.Compact(slices.Sorted(slices.Values(names))))
}

func TestBuildsToKeep(t *testing.T) {
	at := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	job := func(name, fn string, minute int, state batchv1.JobConditionType) batchv1.Job {
		j := batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name,
			Labels:            map[string]string{v1alpha2.LabelFunctionName: fn, v1alpha2.LabelUUID: "uid-" + fn},
			CreationTimestamp: metav1.NewTime(at.Add(time.Duration(minute) * time.Minute))}}
		if state != "" {
			j.Status.Conditions = []batchv1.JobCondition{{Type: state, Status: corev1.ConditionTrue}}
		}
		return j
	}
	all := []batchv1.Job{
		job("a1", "a", 1, batchv1.JobComplete), job("a2", "a", 2, batchv1.JobComplete),
		job("a3", "a", 3, batchv1.JobFailed), job("a4", "a", 4, batchv1.JobComplete), // a4 runs, a2 before it
		job("b1", "b", 1, batchv1.JobComplete), job("b2", "b", 2, ""), // b2 still builds
		job("c1", "c", 1, batchv1.JobComplete), job("c2", "c", 2, batchv1.JobComplete), job("c3", "c", 3, batchv1.JobFailed),
	}
	var names []string
	for _, j := range buildsToKeep(all) {
		names = append(names, j.Name)
	}
	assert.ElementsMatch(t, []string{"a4", "a2", "b2", "b1", "c3", "c2", "c1"}, names)
}
