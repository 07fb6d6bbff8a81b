package cleanup

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
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
