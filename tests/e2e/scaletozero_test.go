//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
	"github.com/kyma-project/serverless-manager/tests/framework"
)

// scaleToZeroAfter is the shortest idle window a Function may have: the
// tests wait for it several times.
const scaleToZeroAfter = "10s"

// sleepy is a Function that scales to zero after scaleToZeroAfter without a
// request.
func sleepy(ns, name, greeting string) *v1alpha2.Function {
	fn := inline(ns, name, v1alpha2.RuntimeNodejs22, greeting)
	fn.Annotations = map[string]string{v1alpha2.AnnotationScaleToZeroAfter: scaleToZeroAfter}
	fn.Spec.ScaleConfig = &v1alpha2.ScaleConfig{MinReplicas: ptr.To[int32](0), MaxReplicas: ptr.To[int32](2)}
	return fn
}

// testFunctionScalesToZeroAndWakes: a Function with minReplicas 0 answers,
// has no Pod once its idle window passed, answers concurrent requests that
// arrive at zero (they are held until a replica is ready), and keeps its
// Service's name, address and port throughout.
func testFunctionScalesToZeroAndWakes(t *testing.T, f *fnEnv) {
	ctx := t.Context()
	fnNS := f.cluster.Namespace(t, "zero")
	const name = "sleepy"
	require.NoError(t, f.fcs.Create(ctx, sleepy(fnNS, name, "awake")))
	f.waitRunning(fnNS, name)
	dumps := append(f.dumpsFor(fnNS, name), f.dumpActivator(), f.dumpSlices(fnNS))
	f.cluster.WaitForAnswer(t, 2*time.Minute, fnNS, name, "/", func(b string) bool { return b == "awake" }, dumps...)
	before := f.service(fnNS, name)

	f.waitAtZero(fnNS, name, dumps...)
	after := f.service(fnNS, name)
	assert.Equal(t, before.UID, after.UID, "the Service is the same object at zero")
	assert.Equal(t, before.Spec.ClusterIP, after.Spec.ClusterIP, "the Service keeps its cluster address at zero")
	assert.Equal(t, before.Spec.Ports, after.Spec.Ports, "the Service keeps its ports at zero")

	// 20 requests at once, all arriving while the Function has no Pod.
	answers := f.callAtOnce(fnNS, name, 20)
	for i, a := range answers {
		assert.Equal(t, http.StatusOK, a.status, "request %d: %s", i, a)
		assert.Equal(t, "awake", a.body, "request %d: %s", i, a)
	}
	t.Logf("20 requests at zero: first answer after %s, last after %s", answers[0].took, answers[len(answers)-1].took)

	// Awake again, the Service selects the Function's Pods: traffic goes
	// to them without the activator.
	f.waitFunction(fnNS, name, "to be served by its own Pods again", time.Minute, func(fn *v1alpha2.Function) bool {
		c := fn.Status.Condition(v1alpha2.ConditionRunning)
		return c != nil && c.Reason != v1alpha2.ReasonScaledToZero && fn.Status.Replicas >= 1
	})
	framework.WaitFor(t, time.Minute, "the Service to select the Function's Pods again", func(ctx context.Context) (bool, string, error) {
		svc := f.service(fnNS, name)
		return len(svc.Spec.Selector) > 0, fmt.Sprintf("selector %v", svc.Spec.Selector), nil
	}, dumps...)
	assert.Equal(t, before.Spec.ClusterIP, f.service(fnNS, name).Spec.ClusterIP)

	// The woken replica started with the start's CPU limit and, ready, runs
	// with the Function's own, resized in place without a restart.
	framework.WaitFor(t, time.Minute, "the woken Pod resized in place to its own CPU limit", func(ctx context.Context) (bool, string, error) {
		var pods corev1.PodList
		if err := f.c.List(ctx, &pods, client.InNamespace(fnNS), client.MatchingLabels{
			v1alpha2.LabelFunctionName: name, v1alpha2.LabelResource: v1alpha2.ResourceDeployment}); err != nil {
			return false, "", err
		}
		var seen []string
		settled := 0
		for _, p := range pods.Items {
			after := p.Annotations[v1alpha2.AnnotationCPULimitAfterStart]
			spec := p.Spec.Containers[0].Resources.Limits.Cpu().String()
			running, restarts := "", int32(0)
			if len(p.Status.ContainerStatuses) > 0 && p.Status.ContainerStatuses[0].Resources != nil {
				running = p.Status.ContainerStatuses[0].Resources.Limits.Cpu().String()
				restarts = p.Status.ContainerStatuses[0].RestartCount
			}
			seen = append(seen, fmt.Sprintf("%s: after-start %q, spec %s, running %s, restarts %d", p.Name, after, spec, running, restarts))
			if after != "" && spec == after && running == after && restarts == 0 {
				settled++
			}
		}
		return len(pods.Items) > 0 && settled == len(pods.Items), strings.Join(seen, "; "), nil
	}, dumps...)

	// It sleeps again, and one request wakes it once more.
	f.waitAtZero(fnNS, name, dumps...)
	one := f.callAtOnce(fnNS, name, 1)[0]
	assert.Equal(t, http.StatusOK, one.status, "%s", one)
	t.Logf("one request at zero answered after %s", one.took)
}

// testFunctionThatCannotStartAnswers503: a Function at zero whose new
// version crashes at start: held requests end with a 503 that names the
// reason instead of hanging, and the Function gets a Warning event.
func testFunctionThatCannotStartAnswers503(t *testing.T, f *fnEnv) {
	fnNS := f.cluster.Namespace(t, "zero-broken")
	const name = "broken"
	dumps := f.sleepingFunction(fnNS, name, "fine")

	// A new version that exits as soon as it is loaded; at zero it is built
	// but not started.
	f.editFunction(fnNS, name, func(fn *v1alpha2.Function) {
		fn.Spec.Source.Inline.Source = "process.exit(3);\nmodule.exports = { main: function () { return 'never'; } };\n"
	})
	f.waitFunction(fnNS, name, "to have built its new version and stay at zero", 3*time.Minute, func(fn *v1alpha2.Function) bool {
		b := fn.Status.Condition(v1alpha2.ConditionBuildReady)
		r := fn.Status.Condition(v1alpha2.ConditionRunning)
		return fn.Status.ObservedGeneration == fn.Generation && b != nil && b.Status == corev1.ConditionTrue &&
			r != nil && r.Reason == v1alpha2.ReasonScaledToZero
	})

	answers := f.callAtOnce(fnNS, name, 5)
	for i, a := range answers {
		require.Equal(t, http.StatusServiceUnavailable, a.status, "request %d: %s", i, a)
		assert.Contains(t, []string{v1alpha2.ReasonStartFailed, v1alpha2.ReasonWakeTimeout}, a.reason, "request %d: %s", i, a)
		assert.Contains(t, a.body, fnNS+"/"+name, "request %d: the body names the Function", i)
	}
	t.Logf("held requests for a Function that cannot start: answered 503 %s after %s to %s", answers[0].reason, answers[0].took, answers[len(answers)-1].took)

	framework.WaitFor(t, time.Minute, "a Warning event on the Function naming the failed wake", func(ctx context.Context) (bool, string, error) {
		var list corev1.EventList
		if err := f.c.List(ctx, &list, client.InNamespace(fnNS)); err != nil {
			return false, "", err
		}
		var seen []string
		for _, e := range list.Items {
			seen = append(seen, e.Type+" "+e.Reason)
			if e.InvolvedObject.Kind == "Function" && e.InvolvedObject.Name == name && e.Type == corev1.EventTypeWarning &&
				(e.Reason == v1alpha2.ReasonStartFailed || e.Reason == v1alpha2.ReasonWakeTimeout) {
				return true, "", nil
			}
		}
		return false, strings.Join(seen, ", "), nil
	}, dumps...)
}

// testActivatorPodDeletedWhileHolding: an activator Pod deleted while it
// holds requests: every client gets the Function's answer or a 503 that
// names the reason; every request sent while the Pod is replaced is
// answered (the nodes route to the stopping Pod until they have followed
// the parked slices' change: it must still listen); and the next request is
// answered.
func testActivatorPodDeletedWhileHolding(t *testing.T, f *fnEnv) {
	ctx := t.Context()
	fnNS := f.cluster.Namespace(t, "zero-activator")
	const name = "held"
	dumps := f.sleepingFunction(fnNS, name, "held")

	pods := f.activatorPods(ctx)
	require.NotEmpty(t, pods, "activator Pods")
	var answers []answer
	done := make(chan struct{})
	go func() { defer close(done); answers = f.callAtOnce(fnNS, name, 10) }()
	// The requests are on their way before a Pod can start: delete one
	// activator Pod while they are held.
	time.Sleep(200 * time.Millisecond)
	require.NoError(t, f.c.Delete(ctx, &pods[0]))
	// The Function wakes within seconds; until then these go to the
	// activator.
	during := f.callSpread(fnNS, name, 30, 100*time.Millisecond)
	for i, a := range during {
		assert.Equal(t, http.StatusOK, a.status, "request %d sent while activator Pod %s was replaced: %s", i, pods[0].Name, a)
	}
	select {
	case <-done:
	case <-time.After(3 * time.Minute):
		t.Fatalf("held requests not answered within 3m after activator Pod %s was deleted", pods[0].Name)
	}
	ok := 0
	for i, a := range answers {
		if a.status == http.StatusOK {
			ok++
			continue
		}
		assert.Equal(t, http.StatusServiceUnavailable, a.status, "request %d: an answer or a clear 503: %s", i, a)
		assert.NotEmpty(t, a.reason, "request %d: the 503 names its reason: %s", i, a)
	}
	t.Logf("activator Pod %s deleted while 10 requests were held: %d answered 200", pods[0].Name, ok)
	f.cluster.WaitForAnswer(t, 2*time.Minute, fnNS, name, "/", func(b string) bool { return b == "held" }, dumps...)
}

// sleepingFunction creates a sleepy Function in build mode, waits for its
// answer and then for it to be at zero; it returns what to print when a
// later wait on it fails.
func (f *fnEnv) sleepingFunction(fnNS, name, greeting string) []func() string {
	f.t.Helper()
	require.NoError(f.t, f.fcs.Create(f.t.Context(), sleepy(fnNS, name, greeting)))
	f.waitRunning(fnNS, name)
	dumps := append(f.dumpsFor(fnNS, name), f.dumpActivator(), f.dumpSlices(fnNS))
	f.cluster.WaitForAnswer(f.t, 2*time.Minute, fnNS, name, "/", func(b string) bool { return b == greeting }, dumps...)
	f.waitAtZero(fnNS, name, dumps...)
	return dumps
}

// answer is what one caller got.
type answer struct {
	status       int
	body, reason string
	took         time.Duration
	err          error
}

func (a answer) String() string {
	return fmt.Sprintf("status %d after %s, reason %q, body %q, error %v", a.status, a.took, a.reason, a.body, a.err)
}

// callAtOnce sends n GET requests to the Function's Service at the same
// moment and returns the answers, fastest first.
func (f *fnEnv) callAtOnce(fnNS, name string, n int) []answer {
	return f.callSpread(fnNS, name, n, 0)
}

// callSpread sends n GET requests to the Function's Service, one every
// `every`, and returns the answers, fastest first; took counts from the
// first request.
func (f *fnEnv) callSpread(fnNS, name string, n int, every time.Duration) []answer {
	answers := make([]answer, n)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		if i > 0 && every > 0 {
			time.Sleep(every)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Longer than the activator's hold timeout (1m): a 503 for a
			// timeout is its answer, not the client's.
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			r, err := f.cluster.CallService(ctx, fnNS, name, http.MethodGet, "/", nil, nil)
			answers[i] = answer{status: r.Status, body: r.Body, reason: r.Header.Get(module.ActivatorReasonHeader), took: time.Since(start), err: err}
		}()
	}
	wg.Wait()
	sort.Slice(answers, func(i, j int) bool { return answers[i].took < answers[j].took })
	return answers
}

// waitAtZero waits until the Function says it is scaled to zero and none of
// its Pods is left.
func (f *fnEnv) waitAtZero(fnNS, name string, dumps ...func() string) {
	f.t.Helper()
	framework.WaitFor(f.t, 2*time.Minute, fmt.Sprintf("Function %s/%s to be scaled to zero with no Pod left", fnNS, name), func(ctx context.Context) (bool, string, error) {
		fn := &v1alpha2.Function{}
		if err := f.fcs.Get(ctx, types.NamespacedName{Namespace: fnNS, Name: name}, fn); err != nil {
			return false, "", err
		}
		var pods corev1.PodList
		if err := f.c.List(ctx, &pods, client.InNamespace(fnNS), client.MatchingLabels{v1alpha2.LabelFunctionName: name}); err != nil {
			return false, "", err
		}
		var functionPods []string
		for _, p := range pods.Items {
			if p.Labels[v1alpha2.LabelFunctionName] == name && !strings.Contains(p.Name, "build") {
				functionPods = append(functionPods, p.Name+" "+string(p.Status.Phase))
			}
		}
		c := fn.Status.Condition(v1alpha2.ConditionRunning)
		atZero := c != nil && c.Status == corev1.ConditionTrue && c.Reason == v1alpha2.ReasonScaledToZero && fn.Status.Replicas == 0
		return atZero && len(functionPods) == 0, describeFunction(fn) + "; Pods: " + strings.Join(functionPods, ", "), nil
	}, dumps...)
}

func (f *fnEnv) service(fnNS, name string) *corev1.Service {
	f.t.Helper()
	svc := &corev1.Service{}
	require.NoError(f.t, f.c.Get(f.t.Context(), types.NamespacedName{Namespace: fnNS, Name: name}, svc))
	return svc
}

// activatorPods are the running Pods of the activator's Deployment.
func (f *fnEnv) activatorPods(ctx context.Context) []corev1.Pod {
	f.t.Helper()
	var list corev1.PodList
	require.NoError(f.t, f.c.List(ctx, &list, client.InNamespace(ns)))
	var pods []corev1.Pod
	for _, p := range list.Items {
		if strings.HasPrefix(p.Name, module.ActivatorServiceName+"-") && p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
			pods = append(pods, p)
		}
	}
	return pods
}

// dumpActivator prints the activator Pods' last log lines.
func (f *fnEnv) dumpActivator() func() string {
	return func() string {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		var b strings.Builder
		for _, p := range f.activatorPods(ctx) {
			log, err := f.cluster.PodLog(ctx, ns, p.Name, "")
			if err != nil {
				fmt.Fprintf(&b, "activator %s: %v\n", p.Name, err)
				continue
			}
			lines := strings.Split(strings.TrimSpace(log), "\n")
			fmt.Fprintf(&b, "activator %s, last lines:\n%s\n", p.Name, strings.Join(lines[max(0, len(lines)-30):], "\n"))
		}
		return b.String()
	}
}

// dumpSlices prints the namespace's EndpointSlices: the Services' own and the
// activator's.
func (f *fnEnv) dumpSlices(fnNS string) func() string {
	return func() string {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var list discoveryv1.EndpointSliceList
		if err := f.c.List(ctx, &list, client.InNamespace(fnNS)); err != nil {
			return "EndpointSlices: " + err.Error()
		}
		var b strings.Builder
		for _, s := range list.Items {
			var eps []string
			for _, e := range s.Endpoints {
				eps = append(eps, fmt.Sprintf("%v ready=%v", e.Addresses, ptr.Deref(e.Conditions.Ready, false)))
			}
			var ports []string
			for _, p := range s.Ports {
				ports = append(ports, fmt.Sprintf("%s:%d", ptr.Deref(p.Name, ""), ptr.Deref(p.Port, 0)))
			}
			fmt.Fprintf(&b, "EndpointSlice %s (managed by %s) ports %v endpoints %v\n", s.Name,
				s.Labels[discoveryv1.LabelManagedBy], ports, eps)
		}
		return b.String()
	}
}

// TestBuildlessFunctions runs the buildless-mode tests side by side against
// one install in buildless mode; then, with the Function controller stopped,
// a scale-to-zero Function that is up keeps answering (created first, so
// that it starts while the others run).
func TestBuildlessFunctions(t *testing.T) {
	f := startBuildless(t)
	upNS := f.createUpFunction()
	sideBySide(t,
		subtest{"InstallOOMKilledKeepsThePreviousVersion", func(t *testing.T) { testBuildlessInstallOOMKilledKeepsThePreviousVersion(t, f.in(t)) }},
		subtest{"ScaleToZero", func(t *testing.T) { testScaleToZeroInBuildlessMode(t, f.in(t)) }},
	)
	testUpFunctionAnswersWithoutTheController(t, f, upNS)
}

// In buildless mode a Function scales to zero and wakes as in build mode
// (every wake installs its dependencies again).
func testScaleToZeroInBuildlessMode(t *testing.T, f *fnEnv) {
	ctx := t.Context()
	fnNS := f.cluster.Namespace(t, "zero-buildless")
	const name = "sleepy"
	require.NoError(t, f.fcs.Create(ctx, sleepy(fnNS, name, "buildless")))
	f.waitFunction(fnNS, name, "to run buildless", 3*time.Minute, isRunningBuildless)
	dumps := append(f.dumpsFor(fnNS, name), f.dumpActivator(), f.dumpSlices(fnNS))
	f.cluster.WaitForAnswer(t, 2*time.Minute, fnNS, name, "/", func(b string) bool { return b == "buildless" }, dumps...)
	f.waitAtZero(fnNS, name, dumps...)
	answers := f.callAtOnce(fnNS, name, 5)
	for i, a := range answers {
		assert.Equal(t, http.StatusOK, a.status, "request %d: %s", i, a)
		assert.Equal(t, "buildless", a.body, "request %d: %s", i, a)
	}
	t.Logf("5 requests at zero in buildless mode: last answered after %s", answers[len(answers)-1].took)
}

// upFunction is the Function of testUpFunctionAnswersWithoutTheController:
// it scales to zero, after an hour.
const upFunction = "up"

// createUpFunction creates upFunction in a namespace of its own, which it
// returns.
func (f *fnEnv) createUpFunction() string {
	f.t.Helper()
	fnNS := f.cluster.Namespace(f.t, "zero-no-controller")
	fn := sleepy(fnNS, upFunction, "buildless")
	fn.Annotations[v1alpha2.AnnotationScaleToZeroAfter] = "1h"
	require.NoError(f.t, f.fcs.Create(f.t.Context(), fn))
	return fnNS
}

// With the Function controller stopped, a scale-to-zero Function that is up
// (upFunction in fnNS) keeps answering: neither the controller nor the
// activator is on its request path.
func testUpFunctionAnswersWithoutTheController(t *testing.T, f *fnEnv, fnNS string) {
	const name = upFunction
	f.waitFunction(fnNS, name, "to run buildless", 3*time.Minute, isRunningBuildless)
	dumps := append(f.dumpsFor(fnNS, name), f.dumpActivator(), f.dumpSlices(fnNS))
	f.cluster.WaitForAnswer(t, 2*time.Minute, fnNS, name, "/", func(b string) bool { return b == "buildless" }, dumps...)

	// The controller stopped: the manager is paused so that it does not
	// bring the controller back, and the controller's Deployment scaled to 0.
	f.setPaused(true)
	t.Cleanup(func() { f.setPaused(false) })
	f.scaleController(0)
	framework.WaitFor(t, 2*time.Minute, "the Function controller to have no Pod", func(ctx context.Context) (bool, string, error) {
		var pods corev1.PodList
		if err := f.c.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels(controllerLabels)); err != nil {
			return false, "", err
		}
		return len(pods.Items) == 0, fmt.Sprintf("%d Pods", len(pods.Items)), nil
	}, dumps...)
	probe := f.cluster.KeepCalling(fnNS, name, "/", 200*time.Millisecond)
	time.Sleep(15 * time.Second)
	got := probe.Stop()
	assert.Empty(t, got.Failures, "the Function answered every call without its controller (%d)", got.Calls)
	assert.Equal(t, []string{"buildless"}, keys(got.Bodies))
	f.setPaused(false)
	f.controllerPod()
}

// setPaused pauses or resumes the manager's reconciliation of the default
// Serverless CR.
func (f *fnEnv) setPaused(paused bool) {
	f.t.Helper()
	value := "null"
	if paused {
		value = fmt.Sprintf("%q", module.PausedValue)
	}
	cr := &unstructured.Unstructured{}
	cr.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("Serverless"))
	cr.SetNamespace(ns)
	cr.SetName("default")
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%s}}}`, module.PauseAnnotation, value)
	require.NoError(f.t, f.c.Patch(context.Background(), cr, client.RawPatch(types.MergePatchType, []byte(patch))))
}

// scaleController sets the Function controller Deployment's replicas.
func (f *fnEnv) scaleController(replicas int32) {
	f.t.Helper()
	d := &appsv1.Deployment{}
	require.NoError(f.t, f.c.Get(f.t.Context(), types.NamespacedName{Namespace: ns, Name: "serverless-ctrl-mngr"}, d))
	patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas)
	require.NoError(f.t, f.c.Patch(f.t.Context(), d, client.RawPatch(types.MergePatchType, []byte(patch))))
}
