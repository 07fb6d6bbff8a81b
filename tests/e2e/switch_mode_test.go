//go:build e2e

package e2e

// Switching Function modes on a live cluster, everything on the real node:
// the manager rolls the Function controller's Deployment and the new Pod
// starts in the new mode by itself; Function Pods really start (buildless
// ones install their npm dependencies at start, build mode runs the images
// the build Jobs pushed to the internal registry) and are called over their
// Services.

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
	"github.com/kyma-project/serverless-manager/tests/framework"
)

// revision is the Deployment's rollout count (kube-controller-manager's
// deployment.kubernetes.io/revision) with its UID: one more revision is
// one rollout of the same Deployment.
type revision struct {
	UID      types.UID
	Revision int
}

func (f *fnEnv) revision(ns, name string) revision {
	f.t.Helper()
	d := f.deployment(ns, name)
	n, _ := strconv.Atoi(d.Annotations["deployment.kubernetes.io/revision"])
	return revision{UID: d.UID, Revision: n}
}

// switchMode changes the CR (its functionMode and what change sets), waits
// for it to be Ready in that mode and for the controller's Pod of the
// Deployment's new template: the controller reads its mode at start, and
// its rollout is what starts it again.
func (f *fnEnv) switchMode(mode string, change func(cr *v1alpha1.Serverless)) {
	f.t.Helper()
	f.update("default", func(cr *v1alpha1.Serverless) {
		cr.Spec.FunctionMode = mode
		if change != nil {
			change(cr)
		}
	})
	f.waitFor("default", "Ready in "+mode+" mode", 3*time.Minute, func(cr *v1alpha1.Serverless) bool {
		return cr.Status.State == v1alpha1.StateReady && cr.Status.ObservedGeneration == cr.Generation && cr.Status.FunctionMode == mode
	})
	pod := f.currentControllerPod(ns, 2*time.Minute)
	assert.Equal(f.t, mode, envOf(pod.Spec.Containers[0])["APP_FUNCTION_MODE"], "the controller's Pod runs in %s mode", mode)
}

func envOf(c corev1.Container) map[string]string {
	out := map[string]string{}
	for _, e := range c.Env {
		out[e.Name] = e.Value
	}
	return out
}

// The Node.js Function's npm dependency and what it answers with it: the
// dependency is installed by the build Job in build mode, at Pod start in
// buildless mode.
const (
	dependencyHandler = "const isNumber = require('is-number');\n" +
		"module.exports = { main: () => 'is-number: ' + isNumber('42') + ' ' + isNumber('forty-two') };\n"
	dependencyAnswer = "is-number: true false"
)

// createSwitchFunctions creates the Functions of testSwitchFunctionMode in
// a namespace of its own, which it returns: TestFunctionsSideBySide creates
// them before its side-by-side tests, so that they are built by the time
// the switches begin.
func (f *fnEnv) createSwitchFunctions() string {
	f.t.Helper()
	ctx := f.t.Context()
	fnNS := f.cluster.Namespace(f.t, "switch-mode")
	node := inline(fnNS, "node", v1alpha2.RuntimeNodejs22, "")
	node.Spec.Source.Inline.Source = dependencyHandler
	node.Spec.Source.Inline.Dependencies = `{"name": "node", "version": "1.0.0", "dependencies": {"is-number": "7.0.0"}}`
	require.NoError(f.t, f.fcs.Create(ctx, node))
	require.NoError(f.t, f.fcs.Create(ctx, inline(fnNS, "py", v1alpha2.RuntimePython312, "hello from py")))
	return fnNS
}

// Switching a live cluster between build and buildless mode rolls each
// Function (createSwitchFunctions, in fnNS) exactly once, the old Pods
// serving until the new ones are ready; the internal registry stays until
// the CR turns it off. The module starts in build mode and is left so,
// with the internal registry; fnNS is deleted at the end, so that its
// Functions do not follow the later changes of the CR.
func testSwitchFunctionMode(t *testing.T, f *fnEnv, fnNS string) {
	ctx := t.Context()
	t.Cleanup(func() {
		if !t.Failed() || os.Getenv("E2E_KEEP_CLUSTER") != "1" {
			_ = f.cluster.DeleteNamespace(context.Background(), fnNS)
		}
		if t.Failed() {
			// What follows on the install expects the sample's build mode
			// with the internal registry.
			cr := &v1alpha1.Serverless{}
			_ = retry.RetryOnConflict(retry.DefaultRetry, func() error {
				if err := f.c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "default"}, cr); err != nil {
					return err
				}
				cr.Spec.FunctionMode = v1alpha1.FunctionModeBuild
				cr.Spec.DockerRegistry = &v1alpha1.DockerRegistry{EnableInternal: ptr.To(true)}
				return f.c.Update(context.Background(), cr)
			})
		}
	})
	names := []string{"node", "py"}
	answers := map[string]string{"node": dependencyAnswer, "py": "hello from py"}
	built := map[string]revision{}
	for _, name := range names {
		f.waitRunning(fnNS, name)
		built[name] = f.revision(fnNS, name)
	}
	f.answerAll(fnNS, answers)

	copies := f.baseCopies() // what build mode copies into fnNS
	framework.WaitFor(t, 30*time.Second, "the copies of build mode in "+fnNS, func(ctx context.Context) (bool, string, error) {
		_, missing, err := f.copiesIn(ctx, fnNS, copies)
		return len(missing) == 0, fmt.Sprintf("missing: %v", missing), err
	})

	// build → buildless: one rollout each, to the runtime image. Watched
	// from before the CR changes: the new controller rolls the Functions
	// as soon as it starts, before the CR is Ready.
	serving := f.watchAvailable(fnNS, names)
	f.switchMode(v1alpha1.FunctionModeBuildless, nil)
	for _, name := range names {
		fn := f.waitFunction(fnNS, name, "to run buildless", 2*time.Minute, isRunningBuildless)
		f.waitRolledOut(fnNS, name)
		d := f.deployment(fnNS, name)
		assert.Equal(t, fn.Status.RuntimeImage, d.Spec.Template.Spec.Containers[0].Image, "%s runs the runtime image", name)
		assert.Equal(t, revision{UID: built[name].UID, Revision: built[name].Revision + 1}, f.revision(fnNS, name), "%s rolled once, in place", name)
		jobs, _, _, configMaps, err := f.children(ctx, fnNS, name)
		require.NoError(t, err)
		assert.Empty(t, jobs, "%s: build Jobs are gone", name)
		assert.Empty(t, configMaps, "%s: source ConfigMaps are gone", name)
	}
	serving.requireAlwaysServed()
	// Its Pod installed is-number when it started: nothing was built.
	f.answerAll(fnNS, answers)
	framework.WaitFor(t, 30*time.Second, "the copies of build mode to leave "+fnNS, func(ctx context.Context) (bool, string, error) {
		present, _, err := f.copiesIn(ctx, fnNS, copies)
		return len(present) == 0, fmt.Sprintf("present: %v", present), err
	}, f.dumpsFor(fnNS, "node")...)
	require.NoError(t, f.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: module.RegistryServiceName}, &corev1.Service{}),
		"the internal registry stays until the CR turns it off")

	// Turning the registry off touches no Function.
	buildless := map[string]revision{}
	for _, name := range names {
		buildless[name] = f.revision(fnNS, name)
	}
	f.switchMode(v1alpha1.FunctionModeBuildless, func(cr *v1alpha1.Serverless) {
		cr.Spec.DockerRegistry = &v1alpha1.DockerRegistry{EnableInternal: ptr.To(false)}
	})
	framework.WaitFor(t, time.Minute, "the internal registry to go", func(ctx context.Context) (bool, string, error) {
		err := f.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: registryName}, &appsv1.Deployment{})
		return apierrors.IsNotFound(err), "still there", client.IgnoreNotFound(err)
	})
	f.waitReconciled(len(names))
	// A rollout would follow the registry's removal within moments.
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) && !t.Failed() {
		for _, name := range names {
			assert.Equal(t, buildless[name], f.revision(fnNS, name), "%s is not rolled by the registry's removal", name)
		}
		time.Sleep(500 * time.Millisecond)
	}
	f.answerAll(fnNS, answers)

	// buildless → build: one build and one rollout each.
	serving = f.watchAvailable(fnNS, names)
	f.switchMode(v1alpha1.FunctionModeBuild, func(cr *v1alpha1.Serverless) {
		cr.Spec.DockerRegistry = &v1alpha1.DockerRegistry{EnableInternal: ptr.To(true)}
	})
	for _, name := range names {
		fn := f.waitRunning(fnNS, name)
		f.waitRolledOut(fnNS, name)
		d := f.deployment(fnNS, name)
		assert.Equal(t, fn.Status.BuiltImage, d.Spec.Template.Spec.Containers[0].Image, "%s runs its built image", name)
		assert.NotEqual(t, fn.Status.RuntimeImage, d.Spec.Template.Spec.Containers[0].Image, "%s runs its built image", name)
		assert.Equal(t, revision{UID: built[name].UID, Revision: buildless[name].Revision + 1}, f.revision(fnNS, name), "%s rolled once, in place", name)
		assert.Equal(t, 2, f.jobs.count(fnNS, name), "%s: one build before the switches, one after", name)
	}
	serving.requireAlwaysServed()
	// The build Job installed is-number into the image.
	f.answerAll(fnNS, answers)
}

// answerAll waits until every Function answers over its Service with what
// it should, from Pods of its current template only (an old Pod could
// still answer during a rollout).
func (f *fnEnv) answerAll(fnNS string, answers map[string]string) {
	f.t.Helper()
	for name, want := range answers {
		f.waitRolledOut(fnNS, name)
		f.cluster.WaitForAnswer(f.t, time.Minute, fnNS, name, "/", func(body string) bool { return body == want }, f.dumpsFor(fnNS, name)...)
	}
}

// waitRolledOut waits until the Function's Deployment runs only Pods of its
// current template, all of them Ready, none terminating.
func (f *fnEnv) waitRolledOut(fnNS, name string) {
	f.t.Helper()
	framework.WaitFor(f.t, 3*time.Minute, fmt.Sprintf("Function %s/%s to run its current template only", fnNS, name), func(ctx context.Context) (bool, string, error) {
		_, ds, _, _, err := f.children(ctx, fnNS, name)
		if err != nil || len(ds) != 1 {
			return false, fmt.Sprintf("%d Deployments", len(ds)), err
		}
		return framework.RolloutDone(ctx, f.c, &ds[0])
	}, f.dumpsFor(fnNS, name)...)
}

// servedLog records, by polling, whether each Function's Deployment ever
// had no available replica, and how each Function's Service answered.
type servedLog struct {
	t      *testing.T
	stop   context.CancelFunc
	done   sync.WaitGroup
	mu     sync.Mutex
	outage []string
	calls  map[string]int
	failed map[string][]string
}

// watchAvailable polls the Functions' Deployments (one list per round) and
// calls their Services until requireAlwaysServed.
func (f *fnEnv) watchAvailable(fnNS string, names []string) *servedLog {
	ctx, cancel := context.WithCancel(f.t.Context())
	l := &servedLog{t: f.t, stop: cancel, calls: map[string]int{}, failed: map[string][]string{}}
	l.done.Add(1)
	go func() {
		defer l.done.Done()
		for ctx.Err() == nil {
			var ds appsv1.DeploymentList
			sel := client.MatchingLabels{v1alpha2.LabelManagedBy: v1alpha2.ManagedByController}
			if err := f.c.List(ctx, &ds, client.InNamespace(fnNS), sel); err == nil {
				for _, d := range ds.Items {
					name := d.Labels[v1alpha2.LabelFunctionName]
					if slices.Contains(names, name) && d.Status.AvailableReplicas < 1 {
						l.mu.Lock()
						l.outage = append(l.outage, fmt.Sprintf("%s at %s: %d available", name, time.Now().Format(time.TimeOnly), d.Status.AvailableReplicas))
						l.mu.Unlock()
					}
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	for _, name := range names {
		l.done.Add(1)
		go func() {
			defer l.done.Done()
			for ctx.Err() == nil {
				cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
				r, err := f.cluster.CallService(cctx, fnNS, name, http.MethodGet, "/", nil, nil)
				ccancel()
				if ctx.Err() != nil {
					return
				}
				l.mu.Lock()
				l.calls[name]++
				if err != nil || r.Status != http.StatusOK {
					l.failed[name] = append(l.failed[name], fmt.Sprintf("%s: %v HTTP %d %.80s", time.Now().Format(time.TimeOnly), err, r.Status, r.Body))
				}
				l.mu.Unlock()
				time.Sleep(200 * time.Millisecond)
			}
		}()
	}
	return l
}

// requireAlwaysServed stops the watch and requires an available replica
// throughout. The calls are reported, not required to succeed: the runtime
// servers stop accepting connections at SIGTERM, while kube-proxy still
// sends new ones to the old Pod until it sees the endpoint go (the Function
// Pods have no preStop delay), so a call or two at the hand-over fails.
func (l *servedLog) requireAlwaysServed() {
	l.t.Helper()
	l.stop()
	l.done.Wait()
	assert.Empty(l.t, l.outage, "old Pods serve until the new ones are ready")
	for name, n := range l.calls {
		assert.Greater(l.t, n, len(l.failed[name]), "%s answered during the switch", name)
		l.t.Logf("%s: %d calls during the switch, %d failed: %s", name, n, len(l.failed[name]), strings.Join(l.failed[name], "; "))
	}
}
