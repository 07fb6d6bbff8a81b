package framework

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func TestDumps(t *testing.T) {
	t.Parallel()
	at := func(s int) metav1.Time { return metav1.NewTime(time.Date(2026, 1, 1, 10, 0, s, 0, time.UTC)) }
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "app"},
		Spec:       corev1.PodSpec{NodeName: "kwok-node-0"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
			{Type: corev1.PodReady, Status: corev1.ConditionTrue},
		}},
	}
	pending := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-2", Namespace: "app"}, Status: corev1.PodStatus{Phase: corev1.PodPending}}
	later := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "e2", Namespace: "app"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "web-2"},
		Type:           "Warning", Reason: "FailedScheduling", Message: "0/3 nodes are available", LastTimestamp: at(30),
	}
	earlier := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "e1", Namespace: "app"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "web-1"},
		Type:           "Normal", Reason: "Scheduled", Message: "assigned", LastTimestamp: at(10),
	}
	c := fake.NewClientBuilder().WithObjects(pod, pending, later, earlier).Build()

	obj := DumpObject(c, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "app"}})()
	require.Contains(t, obj, "--- Pod app/web-1")
	require.Contains(t, obj, "kind: Pod")
	require.Contains(t, obj, "nodeName: kwok-node-0")
	// (the fake client keeps no managedFields; the e2e tests check they are dropped)

	missing := DumpObject(c, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "gone", Namespace: "app"}})()
	require.Contains(t, missing, "not found", "a dump reports errors instead of failing")

	events := DumpEvents(c, "app")()
	require.Regexp(t, `(?s)Scheduled .*Pod/web-1: assigned.*FailedScheduling .*Pod/web-2: 0/3 nodes are available`, events, "oldest first")

	pods := DumpPods(c, "app")()
	require.Contains(t, pods, "web-1 Running kwok-node-0 ready")
	require.Contains(t, pods, "web-2 Pending <unscheduled> not ready")
}
