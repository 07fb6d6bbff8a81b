//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/tests/framework"
)

// burnCPU answers after spinning for about 100 ms: a few requests at once
// keep the Function's container far above its small CPU request.
const burnCPU = `module.exports = { main: function () {
  const end = Date.now() + 100;
  let n = 0;
  while (Date.now() < end) { n++; }
  return "spun " + n;
} };
`

// testCPUAutoscalingScalesOutAndBackIn: the local cluster's metrics-server
// reports the Function's Pods, its HorizontalPodAutoscaler scales it out
// under CPU load and back to its minimum once the load stops (the local
// controller manager's HPA windows are short: hack/cluster.sh start_kcm).
func testCPUAutoscalingScalesOutAndBackIn(t *testing.T, f *fnEnv) {
	ctx := t.Context()
	ns := f.cluster.Namespace(t, "hpa")
	const name = "spin"
	fn := inline(ns, name, v1alpha2.RuntimeNodejs22, "")
	fn.Spec.Source.Inline.Source = burnCPU
	fn.Spec.ScaleConfig = &v1alpha2.ScaleConfig{MinReplicas: ptr.To[int32](1), MaxReplicas: ptr.To[int32](3)}
	fn.Spec.ResourceConfiguration = &v1alpha2.ResourceConfiguration{Function: &v1alpha2.ResourceRequirements{
		Resources: &corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("20m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
		},
	}}
	require.NoError(t, f.fcs.Create(ctx, fn))
	f.waitRunning(ns, name)
	dumps := append(f.dumpsFor(ns, name), f.dumpHPAs(ns))
	f.cluster.WaitForAnswer(t, 2*time.Minute, ns, name, "/", func(b string) bool { return strings.HasPrefix(b, "spun ") }, dumps...)

	// kubectl top's source lists the Function's Pod (metrics-server needs
	// two scrapes of its kubelet, 10 s apart, for a CPU rate).
	pod, err := f.cluster.ReadyPod(ctx, ns, map[string]string{v1alpha2.LabelFunctionName: name})
	require.NoError(t, err)
	framework.WaitFor(t, 2*time.Minute, "the metrics API to list Pod "+pod.Name, func(ctx context.Context) (bool, string, error) {
		names, err := f.podMetrics(ctx, ns)
		if err != nil {
			return false, err.Error(), nil
		}
		return strings.Contains(names, pod.Name), "listed: " + names, nil
	}, dumps...)

	// Load from this machine: four callers in a loop, bounded in time,
	// stopped as soon as the Function has scaled out.
	loadCtx, stopLoad := context.WithTimeout(ctx, 5*time.Minute)
	defer stopLoad()
	var sent, failed atomic.Int64
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for loadCtx.Err() == nil {
				callCtx, cancel := context.WithTimeout(loadCtx, 10*time.Second)
				r, err := f.cluster.CallService(callCtx, ns, name, http.MethodGet, "/", nil, nil)
				cancel()
				sent.Add(1)
				if err != nil || r.Status != http.StatusOK {
					failed.Add(1)
				}
			}
		}()
	}
	framework.WaitFor(t, 4*time.Minute, "the HorizontalPodAutoscaler to scale the Function out to at least 2 ready replicas under load", func(ctx context.Context) (bool, string, error) {
		d := f.deployment(ns, name)
		seen := fmt.Sprintf("Deployment replicas=%d ready=%d; %d requests sent, %d failed; %s",
			ptr.Deref(d.Spec.Replicas, 1), d.Status.ReadyReplicas, sent.Load(), failed.Load(), f.describeHPAs(ctx, ns))
		return d.Status.ReadyReplicas >= 2, seen, nil
	}, dumps...)
	stopLoad()
	wg.Wait()
	t.Logf("scaled out after %d requests (%d failed)", sent.Load(), failed.Load())

	framework.WaitFor(t, 4*time.Minute, "the Function to scale back to 1 replica after the load stopped", func(ctx context.Context) (bool, string, error) {
		d := f.deployment(ns, name)
		seen := fmt.Sprintf("Deployment replicas=%d ready=%d; %s", ptr.Deref(d.Spec.Replicas, 1), d.Status.ReadyReplicas, f.describeHPAs(ctx, ns))
		return ptr.Deref(d.Spec.Replicas, 1) == 1 && d.Status.Replicas == 1, seen, nil
	}, dumps...)
}

// podMetrics lists the Pods the metrics API has figures for in ns.
func (f *fnEnv) podMetrics(ctx context.Context, ns string) (string, error) {
	cs, err := f.cluster.Clientset()
	if err != nil {
		return "", err
	}
	raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/apis/metrics.k8s.io/v1beta1/namespaces", ns, "pods").DoRaw(ctx)
	if err != nil {
		return "", err
	}
	var list struct {
		Items []struct {
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		} `json:"items"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		return "", err
	}
	names := make([]string, 0, len(list.Items))
	for _, it := range list.Items {
		names = append(names, it.Metadata.Name)
	}
	return strings.Join(names, ","), nil
}

// describeHPAs says what the namespace's HorizontalPodAutoscalers see.
func (f *fnEnv) describeHPAs(ctx context.Context, ns string) string {
	var list autoscalingv2.HorizontalPodAutoscalerList
	if err := f.c.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return "HPAs: " + err.Error()
	}
	var parts []string
	for _, h := range list.Items {
		var metrics []string
		for _, m := range h.Status.CurrentMetrics {
			switch {
			case m.ContainerResource != nil && m.ContainerResource.Current.AverageUtilization != nil:
				metrics = append(metrics, fmt.Sprintf("container %s cpu %d%%", m.ContainerResource.Container, *m.ContainerResource.Current.AverageUtilization))
			case m.Resource != nil && m.Resource.Current.AverageUtilization != nil:
				metrics = append(metrics, fmt.Sprintf("pod cpu %d%%", *m.Resource.Current.AverageUtilization))
			}
		}
		var conds []string
		for _, c := range h.Status.Conditions {
			conds = append(conds, fmt.Sprintf("%s=%s %s", c.Type, c.Status, c.Reason))
		}
		parts = append(parts, fmt.Sprintf("HPA %s current=%d desired=%d metrics=[%s] %s", h.Name, h.Status.CurrentReplicas, h.Status.DesiredReplicas,
			strings.Join(metrics, ", "), strings.Join(conds, " ")))
	}
	if len(parts) == 0 {
		return "no HPA"
	}
	return strings.Join(parts, "; ")
}

func (f *fnEnv) dumpHPAs(ns string) func() string {
	return func() string {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return f.describeHPAs(ctx, ns)
	}
}
