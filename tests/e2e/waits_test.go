//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
	"github.com/kyma-project/serverless-manager/tests/framework"
)

// Every wait explained on the Function (docs/user/troubleshooting): the
// states in which the cluster cannot go on, as the real node reports them.

// testReplicaThatCannotBePlacedSaysWhy: a Function whose replica asks more
// CPU than the node has reports the scheduler's reason within seconds of
// its build, and a request that wakes it gets a 503 naming that reason
// once its own hold timeout ends.
func testReplicaThatCannotBePlacedSaysWhy(t *testing.T, f *fnEnv) {
	fnNS := f.cluster.Namespace(t, "unplaced")
	const name = "big"
	fn := inline(fnNS, name, v1alpha2.RuntimeNodejs22, "never")
	fn.Annotations = map[string]string{v1alpha2.AnnotationWakeTimeout: "10s"}
	fn.Spec.ScaleConfig = &v1alpha2.ScaleConfig{MinReplicas: ptr.To[int32](0), MaxReplicas: ptr.To[int32](1)}
	fn.Spec.ResourceConfiguration = &v1alpha2.ResourceConfiguration{Function: &v1alpha2.ResourceRequirements{
		Resources: &corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("5"), corev1.ResourceMemory: resource.MustParse("64Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("5"), corev1.ResourceMemory: resource.MustParse("128Mi")},
		},
	}}
	require.NoError(t, f.fcs.Create(t.Context(), fn))
	built := f.waitFunction(fnNS, name, "to be built", 3*time.Minute, func(fn *v1alpha2.Function) bool {
		c := fn.Status.Condition(v1alpha2.ConditionBuildReady)
		return c != nil && c.Status == corev1.ConditionTrue
	})
	// The condition's time does not move when only its reason changes, so
	// the 15 s (the bound) are measured by this test's clock, from
	// the build's end (kept to the second: one more second of slack).
	builtAt := built.Status.Condition(v1alpha2.ConditionBuildReady).LastTransitionTime.Time
	within := time.Until(builtAt.Add(16 * time.Second))
	require.Positive(t, within, "the build ended %s ago: the test saw it too late to time the report", time.Since(builtAt))
	got := f.waitFunction(fnNS, name, "to say within 15 s of its build that its replica is not placed", within, func(fn *v1alpha2.Function) bool {
		c := fn.Status.Condition(v1alpha2.ConditionRunning)
		return c != nil && c.Reason == v1alpha2.ReasonReplicaUnschedulable
	})
	seen := time.Since(builtAt)
	c := got.Status.Condition(v1alpha2.ConditionRunning)
	assert.Equal(t, corev1.ConditionUnknown, c.Status, "the scheduler keeps trying")
	assert.Contains(t, c.Message, "Insufficient cpu", "the scheduler's words")
	assert.Regexp(t, regexp.MustCompile(`Pod `+name+`-[a-z0-9]+-[a-z0-9]+-[a-z0-9]+ is not placed`), c.Message, "which Pod")
	t.Logf("not placed: seen %s after the build: Running=%s %s: %s", seen.Round(100*time.Millisecond), c.Status, c.Reason, c.Message)

	// A request that wakes it waits for the Function's own hold timeout,
	// then hears why.
	start := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	r, err := f.cluster.CallService(ctx, fnNS, name, http.MethodGet, "/", nil, nil)
	require.NoError(t, err)
	assert.Equal(t, http.StatusServiceUnavailable, r.Status, "%s", r.Body)
	assert.Equal(t, v1alpha2.ReasonWakeTimeout, r.Header.Get(module.ActivatorReasonHeader))
	assert.Contains(t, r.Body, "WakeTimeout: "+v1alpha2.ReasonReplicaUnschedulable+": ", "the 503 names the cause")
	assert.Contains(t, r.Body, "Insufficient cpu", "in the scheduler's words")
	assert.NotContains(t, r.Body, "Pod "+name+"-", "the Pod's name stays with the Function's owner")
	t.Logf("a wake that cannot be placed: 503 after %s: %s", time.Since(start).Round(time.Millisecond), strings.TrimSpace(r.Body))
}

// testManyFunctionsAtOnce: 25 Functions applied at once all reach Running
// on the local node (make run's profiles leave room for them and a build),
// and the builds beyond the module's limit say that they are queued, with
// their place.
func testManyFunctionsAtOnce(t *testing.T, f *fnEnv) {
	const n = 25
	fnNS := f.cluster.Namespace(t, "many")
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("fn-%02d", i)
	}

	// Watch for a queued build while they are applied: the reason lasts
	// only until the build's turn.
	ctx, stop := context.WithCancel(t.Context())
	var mu sync.Mutex
	var queued []string
	var watching sync.WaitGroup
	watching.Go(func() {
		for ctx.Err() == nil {
			var list v1alpha2.FunctionList
			if err := f.fcs.List(ctx, &list, client.InNamespace(fnNS)); err == nil {
				for _, fn := range list.Items {
					if c := fn.Status.Condition(v1alpha2.ConditionBuildReady); c != nil && c.Reason == v1alpha2.ReasonJobQueued {
						mu.Lock()
						queued = append(queued, c.Message)
						mu.Unlock()
					}
				}
			}
			time.Sleep(200 * time.Millisecond)
		}
	})

	start := time.Now()
	var creating sync.WaitGroup
	errs := make([]error, n)
	for i, name := range names {
		creating.Go(func() {
			fn := inline(fnNS, name, v1alpha2.RuntimeNodejs22, "hello from "+name)
			fn.Spec.ScaleConfig = &v1alpha2.ScaleConfig{MinReplicas: ptr.To[int32](0), MaxReplicas: ptr.To[int32](1)}
			errs[i] = f.fcs.Create(t.Context(), fn)
		})
	}
	creating.Wait()
	for i, err := range errs {
		require.NoError(t, err, "creating %s", names[i])
	}
	framework.WaitFor(t, 5*time.Minute, fmt.Sprintf("all %d Functions Running", n), func(ctx context.Context) (bool, string, error) {
		var notYet []string
		for _, name := range names {
			fn := &v1alpha2.Function{}
			if err := f.fcs.Get(ctx, types.NamespacedName{Namespace: fnNS, Name: name}, fn); err != nil {
				return false, "", err
			}
			if !isRunning(fn) {
				notYet = append(notYet, name+": "+describeFunction(fn))
			}
		}
		return len(notYet) == 0, fmt.Sprintf("%d not Running: %s", len(notYet), strings.Join(notYet, " | ")), nil
	})
	took := time.Since(start)
	stop()
	watching.Wait()
	t.Logf("%d Functions applied at once: all Running after %s", n, took.Round(time.Second))

	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, queued, "with %d builds at once some wait behind the build limit and say so", n)
	assert.Regexp(t, regexp.MustCompile(`^queued behind the build limit: \d+ of \d+ builds running, \d+ ahead of it in the queue$`), queued[0])
	t.Logf("a queued build said: %s", queued[0])
}
