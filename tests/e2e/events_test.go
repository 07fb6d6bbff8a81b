//go:build e2e

package e2e

// What Kyma's eventing and API gateway rely on when they send traffic to a
// Function: its Service, and the runtime server behind it turning
// CloudEvents into the handler's event.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/tests/framework"
)

// echoSources return what a handler got of a CloudEvent, as JSON, per
// runtime family.
var echoSources = map[v1alpha2.Runtime]string{
	v1alpha2.RuntimeNodejs22: `module.exports = { main: function (event, context) {
  return { type: event["ce-type"], source: event["ce-source"], specversion: event["ce-specversion"],
    id: event["ce-id"], eventtypeversion: event["ce-eventtypeversion"], data: event.data,
    function: context["function-name"] };
} };
`,
	v1alpha2.RuntimePython312: `def main(event, context):
    return {"type": event["ce-type"], "source": event["ce-source"], "specversion": event["ce-specversion"],
            "id": event["ce-id"], "eventtypeversion": event["ce-eventtypeversion"], "data": event["data"],
            "function": context["function-name"]}
`,
}

// A CloudEvent sent to the Function's Service, as Kyma's eventing delivers
// it to a Subscription's sink, reaches the handler with its attributes and
// its data parsed, in binary and in structured mode, in both runtimes; the
// handler's answer comes back.
func testCloudEventsReachTheHandler(t *testing.T, f *fnEnv) {
	ctx := t.Context()
	fnNS := f.cluster.Namespace(t, "events")
	for rt, source := range echoSources {
		fn := inline(fnNS, "echo-"+string(rt), rt, "")
		fn.Spec.Source.Inline.Source = source
		require.NoError(t, f.fcs.Create(ctx, fn))
	}
	data := map[string]any{"order": float64(4711), "items": []any{"a", "b"}}
	body, err := json.Marshal(data)
	require.NoError(t, err)
	structured, err := json.Marshal(map[string]any{
		"specversion": "1.0", "type": "order.created.v1", "source": "/shop", "id": "id-structured",
		"eventtypeversion": "v1", "datacontenttype": "application/json", "data": data,
	})
	require.NoError(t, err)
	modes := []struct {
		name   string
		header http.Header
		body   []byte
		id     string
	}{
		{"binary", http.Header{
			"Content-Type": {"application/json"}, "Ce-Specversion": {"1.0"}, "Ce-Type": {"order.created.v1"},
			"Ce-Source": {"/shop"}, "Ce-Id": {"id-binary"}, "Ce-Eventtypeversion": {"v1"},
		}, body, "id-binary"},
		{"structured", http.Header{"Content-Type": {"application/cloudevents+json"}}, structured, "id-structured"},
	}
	for rt := range echoSources {
		name := "echo-" + string(rt)
		f.waitRunning(fnNS, name)
		for _, m := range modes {
			t.Run(string(rt)+" "+m.name, func(t *testing.T) {
				var got map[string]any
				framework.WaitFor(t, time.Minute, "the event's echo", func(ctx context.Context) (bool, string, error) {
					rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
					defer cancel()
					r, err := f.cluster.CallService(rctx, fnNS, name, http.MethodPost, "/", m.header, m.body)
					if err != nil {
						return false, err.Error(), nil
					}
					if r.Status != http.StatusOK {
						return false, fmt.Sprintf("HTTP %d: %s", r.Status, r.Body), nil
					}
					return true, r.Body, json.Unmarshal([]byte(r.Body), &got)
				}, f.dumpsFor(fnNS, name)...)
				assert.Equal(t, map[string]any{
					"type": "order.created.v1", "source": "/shop", "specversion": "1.0", "id": m.id,
					"eventtypeversion": "v1", "data": data, "function": name,
				}, got)
			})
		}
	}
}

// The Function's Service is what an APIRule and a Subscription name: named
// after the Function, port 80 to the runtime's 8080, and its endpoints are
// the Function's own Pods only: never a build Pod (they carry the
// Function's labels), never another Function's, also while a rebuild runs
// and after it.
func testServiceSelectsOnlyTheFunctionsPods(t *testing.T, f *fnEnv) {
	ctx := t.Context()
	fnNS := f.cluster.Namespace(t, "service")
	for _, name := range []string{"one", "two"} {
		require.NoError(t, f.fcs.Create(ctx, inline(fnNS, name, v1alpha2.RuntimeNodejs22, "I am "+name)))
	}
	for _, name := range []string{"one", "two"} {
		f.waitRunning(fnNS, name)
		svc := &corev1.Service{}
		require.NoError(t, f.c.Get(ctx, client.ObjectKey{Namespace: fnNS, Name: name}, svc))
		require.Len(t, svc.Spec.Ports, 1)
		assert.Equal(t, int32(80), svc.Spec.Ports[0].Port, "%s: port", name)
		assert.Equal(t, intstr.FromInt32(8080), svc.Spec.Ports[0].TargetPort, "%s: target port", name)
		f.cluster.WaitForAnswer(t, time.Minute, fnNS, name, "/", func(body string) bool { return body == "I am "+name }, f.dumpsFor(fnNS, name)...)
		f.requireOwnEndpoints(fnNS, name)
	}

	// A rebuild of "one": while its build Pod runs and after, both Services
	// still hold their own Function's Pods only.
	f.editFunction(fnNS, "one", func(fn *v1alpha2.Function) { fn.Spec.Source.Inline.Source = echoSources[v1alpha2.RuntimeNodejs22] })
	sawBuild := false
	framework.WaitFor(t, 3*time.Minute, "the rebuilt Function one to run", func(ctx context.Context) (bool, string, error) {
		var pods corev1.PodList
		if err := f.c.List(ctx, &pods, client.InNamespace(fnNS), client.HasLabels{"job-name"}); err != nil {
			return false, "", err
		}
		for _, p := range pods.Items {
			sawBuild = sawBuild || p.Status.Phase == corev1.PodRunning
		}
		for _, name := range []string{"one", "two"} {
			if msg := f.foreignEndpoints(ctx, fnNS, name); msg != "" {
				return false, "", framework.StopWaiting(fmt.Errorf("%s", msg))
			}
		}
		fn := &v1alpha2.Function{}
		if err := f.fcs.Get(ctx, client.ObjectKey{Namespace: fnNS, Name: "one"}, fn); err != nil {
			return false, "", err
		}
		return isRunning(fn) && fn.Generation > 1, describeFunction(fn), nil
	}, f.dumpsFor(fnNS, "one")...)
	t.Logf("a build Pod was seen running during the checks: %v", sawBuild)
	f.requireOwnEndpoints(fnNS, "one")
	f.requireOwnEndpoints(fnNS, "two")
}

// requireOwnEndpoints waits until the Service's ready endpoints are exactly
// the Function's Deployment's Pods.
func (f *fnEnv) requireOwnEndpoints(ns, name string) {
	f.t.Helper()
	framework.WaitFor(f.t, time.Minute, "Service "+name+"'s endpoints to be its Function's Pods", func(ctx context.Context) (bool, string, error) {
		if msg := f.foreignEndpoints(ctx, ns, name); msg != "" {
			return false, "", framework.StopWaiting(fmt.Errorf("%s", msg))
		}
		endpoints, own, err := f.endpointsAndPods(ctx, ns, name)
		if err != nil {
			return false, "", err
		}
		return slices.Equal(endpoints, own) && len(own) > 0, fmt.Sprintf("endpoints %v, Function Pods %v", endpoints, own), nil
	}, f.dumpsFor(ns, name)...)
}

// foreignEndpoints names any endpoint of the Service that is not a Pod of
// its Function's Deployment ("" when there is none).
func (f *fnEnv) foreignEndpoints(ctx context.Context, ns, name string) string {
	endpoints, _, err := f.endpointsAndPods(ctx, ns, name)
	if err != nil {
		return ""
	}
	var pods corev1.PodList
	if err := f.c.List(ctx, &pods, client.InNamespace(ns)); err != nil {
		return ""
	}
	for _, ip := range endpoints {
		for _, p := range pods.Items {
			if p.Status.PodIP != ip {
				continue
			}
			if p.Labels[v1alpha2.LabelFunctionName] != name || p.Labels["job-name"] != "" {
				return fmt.Sprintf("Service %s/%s sends traffic to Pod %s (labels %v)", ns, name, p.Name, p.Labels)
			}
		}
	}
	return ""
}

// endpointsAndPods are the Service's ready endpoint addresses and the IPs of
// the running Pods of the Function's Deployment, both sorted.
func (f *fnEnv) endpointsAndPods(ctx context.Context, ns, name string) (endpoints, own []string, err error) {
	var sliceList discoveryv1.EndpointSliceList
	if err := f.c.List(ctx, &sliceList, client.InNamespace(ns), client.MatchingLabels{discoveryv1.LabelServiceName: name}); err != nil {
		return nil, nil, err
	}
	for _, s := range sliceList.Items {
		for _, ep := range s.Endpoints {
			if ep.Conditions.Ready != nil && *ep.Conditions.Ready {
				endpoints = append(endpoints, ep.Addresses...)
			}
		}
	}
	var pods corev1.PodList
	if err := f.c.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{v1alpha2.LabelFunctionName: name}); err != nil {
		return nil, nil, err
	}
	for _, p := range pods.Items {
		if p.Labels["job-name"] == "" && p.DeletionTimestamp == nil && p.Status.PodIP != "" && framework.PodReady(&p) {
			own = append(own, p.Status.PodIP)
		}
	}
	slices.Sort(endpoints)
	slices.Sort(own)
	return endpoints, own, nil
}
