package framework

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/yaml"
)

// Dump functions describe cluster state for failure messages (see Poll).
// They read fresh state when called and never fail: errors become text.

const dumpTimeout = 10 * time.Second

// DumpObject re-reads obj (by its namespace and name) and renders it as YAML
// without managedFields.
func DumpObject(c client.Client, obj client.Object) func() string {
	return func() string {
		ctx, cancel := context.WithTimeout(context.Background(), dumpTimeout)
		defer cancel()
		key := client.ObjectKeyFromObject(obj)
		fresh := obj.DeepCopyObject().(client.Object)
		gvk, err := apiutil.GVKForObject(fresh, c.Scheme())
		header := fmt.Sprintf("--- %s %s", gvk.Kind, key)
		if err != nil {
			return fmt.Sprintf("%s: %v", header, err)
		}
		if err := c.Get(ctx, key, fresh); err != nil {
			return fmt.Sprintf("%s: %v", header, err)
		}
		fresh.GetObjectKind().SetGroupVersionKind(gvk)
		fresh.SetManagedFields(nil)
		out, err := yaml.Marshal(fresh)
		if err != nil {
			return fmt.Sprintf("%s: %v", header, err)
		}
		return header + "\n" + string(out)
	}
}

// DumpEvents lists the events of a namespace, oldest first (at most the last 50).
func DumpEvents(c client.Client, namespace string) func() string {
	return func() string {
		ctx, cancel := context.WithTimeout(context.Background(), dumpTimeout)
		defer cancel()
		header := fmt.Sprintf("--- events in namespace %s", namespace)
		var list corev1.EventList
		if err := c.List(ctx, &list, client.InNamespace(namespace)); err != nil {
			return fmt.Sprintf("%s: %v", header, err)
		}
		events := list.Items
		sort.SliceStable(events, func(i, j int) bool { return eventTime(events[i]).Before(eventTime(events[j])) })
		if len(events) > 50 {
			events = events[len(events)-50:]
		}
		var b strings.Builder
		fmt.Fprintf(&b, "%s (%d)\n", header, len(list.Items))
		for _, e := range events {
			fmt.Fprintf(&b, "%s %-7s %-20s %s/%s: %s\n", eventTime(e).Format("15:04:05"), e.Type, e.Reason,
				e.InvolvedObject.Kind, e.InvolvedObject.Name, strings.TrimSpace(e.Message))
		}
		return b.String()
	}
}

func eventTime(e corev1.Event) time.Time {
	switch {
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	default:
		return e.CreationTimestamp.Time
	}
}

// DumpPods lists the pods of a namespace with phase, node and readiness.
func DumpPods(c client.Client, namespace string) func() string {
	return func() string {
		ctx, cancel := context.WithTimeout(context.Background(), dumpTimeout)
		defer cancel()
		header := fmt.Sprintf("--- pods in namespace %s", namespace)
		var list corev1.PodList
		if err := c.List(ctx, &list, client.InNamespace(namespace)); err != nil {
			return fmt.Sprintf("%s: %v", header, err)
		}
		var b strings.Builder
		fmt.Fprintf(&b, "%s (%d)\n", header, len(list.Items))
		for _, p := range list.Items {
			ready := "not ready"
			for _, cond := range p.Status.Conditions {
				if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
					ready = "ready"
				}
			}
			node := p.Spec.NodeName
			if node == "" {
				node = "<unscheduled>"
			}
			fmt.Fprintf(&b, "%s %s %s %s\n", p.Name, p.Status.Phase, node, ready)
		}
		return b.String()
	}
}

// DumpLog returns the last n lines of a process log.
func DumpLog(p *Process, n int) func() string {
	return func() string {
		if p == nil {
			return "--- no process to show the log of"
		}
		return fmt.Sprintf("--- last %d lines of %s\n%s", n, p.LogPath(), p.Tail(n))
	}
}
