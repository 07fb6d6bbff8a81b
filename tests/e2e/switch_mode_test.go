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
	batchv1 "k8s.io/api/batch/v1"
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

// switchMode changes the CR (its functionMode and what change sets) and
// waits as inMode does.
func (f *fnEnv) switchMode(mode string, change func(cr *v1alpha1.Serverless)) {
	f.t.Helper()
	f.update("default", func(cr *v1alpha1.Serverless) {
		cr.Spec.FunctionMode = mode
		if change != nil {
			change(cr)
		}
	})
	f.inMode(mode)
}

// inMode waits for the CR to be Ready in mode and for the controller's Pod
// of the Deployment's new template: the controller reads its mode at start,
// and its rollout is what starts it again.
func (f *fnEnv) inMode(mode string) {
	f.t.Helper()
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

// switchFixture is what testSwitchFunctionMode switches: two Functions in
// fnNS, and the Function of the modes tutorial created in build mode in
// tutorialNS. TestFunctionsSideBySide creates them before its side-by-side
// tests (createSwitchFunctions), so that they are built by the time the
// switches begin.
type switchFixture struct {
	fnNS, tutorialNS string
	tutorial         *modesTutorial
}

func (f *fnEnv) createSwitchFunctions() switchFixture {
	f.t.Helper()
	ctx := f.t.Context()
	fnNS := f.cluster.Namespace(f.t, "switch-mode")
	node := inline(fnNS, "node", v1alpha2.RuntimeNodejs22, "")
	node.Spec.Source.Inline.Source = dependencyHandler
	node.Spec.Source.Inline.Dependencies = `{"name": "node", "version": "1.0.0", "dependencies": {"is-number": "7.0.0"}}`
	require.NoError(f.t, f.fcs.Create(ctx, node))
	require.NoError(f.t, f.fcs.Create(ctx, inline(fnNS, "py", v1alpha2.RuntimePython312, "hello from py")))
	tutorial := f.modesTutorial()
	return switchFixture{fnNS: fnNS, tutorialNS: tutorial.create(f.t, v1alpha1.FunctionModeBuild), tutorial: tutorial}
}

// Switching a live cluster between build and buildless mode rolls each
// Function exactly once per switch, the old Pods serving until the new ones
// are ready; switching to build mode builds each Function once; the
// internal registry stays until the CR turns it off, and turning it off
// touches no Function. The module starts in build mode and goes build →
// buildless → build → buildless (the modes tutorial's commands, its two
// Functions checked after each switch), the registry off, then build mode
// with the registry on in one edit of the CR; so it is left as it was. The
// Functions' namespaces are deleted at the end, so that they do not follow
// the later changes of the CR.
func testSwitchFunctionMode(t *testing.T, f *fnEnv, fx switchFixture) {
	fnNS, tutorial := fx.fnNS, fx.tutorial
	t.Cleanup(func() {
		if !t.Failed() || os.Getenv("E2E_KEEP_CLUSTER") != "1" {
			_ = f.cluster.DeleteNamespace(context.Background(), fnNS)
			_ = f.cluster.DeleteNamespace(context.Background(), fx.tutorialNS)
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
	sw := &switches{f: f, fnNS: fnNS, names: []string{"node", "py"},
		answers: map[string]string{"node": dependencyAnswer, "py": "hello from py"}, revisions: map[string]revision{}, builds: map[string]int{}}
	for _, name := range sw.names {
		f.waitRunning(fnNS, name)
		sw.revisions[name] = f.revision(fnNS, name)
		sw.builds[name] = f.jobs.count(fnNS, name)
	}
	f.answerAll(fnNS, sw.answers)
	sw.copies = f.baseCopies() // what build mode copies into fnNS
	sw.waitCopies(true)
	tutorial.answersIn(t, fx.tutorialNS, v1alpha1.FunctionModeBuild)

	// build → buildless, as the tutorial's step 6 does it; then the
	// tutorial's Function of buildless mode is created (its Pod starts
	// while the others roll).
	var fromBuildless string
	sw.toBuildless(func() {
		tutorial.switchTo(t, v1alpha1.FunctionModeBuildless)
		fromBuildless = tutorial.create(t, v1alpha1.FunctionModeBuildless)
	})
	require.NoError(t, f.c.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: module.RegistryServiceName}, &corev1.Service{}),
		"the internal registry stays until the CR turns it off")
	tutorial.answersIn(t, fx.tutorialNS, v1alpha1.FunctionModeBuildless)
	tutorial.answersIn(t, fromBuildless, v1alpha1.FunctionModeBuildless)

	// buildless → build, the tutorial's step 8.
	sw.toBuild(func() { tutorial.switchTo(t, v1alpha1.FunctionModeBuild) })
	tutorial.answersIn(t, fx.tutorialNS, v1alpha1.FunctionModeBuild)
	tutorial.answersIn(t, fromBuildless, v1alpha1.FunctionModeBuild)

	// build → buildless again, the tutorial's step 6 for the Function it
	// created in buildless mode.
	sw.toBuildless(func() { tutorial.switchTo(t, v1alpha1.FunctionModeBuildless) })
	tutorial.answersIn(t, fromBuildless, v1alpha1.FunctionModeBuildless)

	// Turning the registry off touches no Function.
	f.switchMode(v1alpha1.FunctionModeBuildless, func(cr *v1alpha1.Serverless) {
		cr.Spec.DockerRegistry = &v1alpha1.DockerRegistry{EnableInternal: ptr.To(false)}
	})
	framework.WaitFor(t, time.Minute, "the internal registry to go", func(ctx context.Context) (bool, string, error) {
		err := f.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: registryName}, &appsv1.Deployment{})
		return apierrors.IsNotFound(err), "still there", client.IgnoreNotFound(err)
	})
	f.waitReconciled(len(sw.names) + 2)
	// A rollout would follow the registry's removal within moments.
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) && !t.Failed() {
		for _, name := range sw.names {
			assert.Equal(t, sw.revisions[name], f.revision(fnNS, name), "%s is not rolled by the registry's removal", name)
		}
		time.Sleep(500 * time.Millisecond)
	}
	f.answerAll(fnNS, sw.answers)

	// buildless → build with the registry on, in one edit of the CR.
	sw.toBuild(func() {
		f.switchMode(v1alpha1.FunctionModeBuild, func(cr *v1alpha1.Serverless) {
			cr.Spec.DockerRegistry = &v1alpha1.DockerRegistry{EnableInternal: ptr.To(true)}
		})
	})
}

// switches are the Functions of testSwitchFunctionMode in fnNS, what they
// answer in either mode, their Deployments' revisions and build Jobs after
// the last switch, and the objects build mode copies into fnNS.
type switches struct {
	f         *fnEnv
	fnNS      string
	names     []string
	answers   map[string]string
	revisions map[string]revision
	builds    map[string]int
	copies    []client.Object
}

// toBuildless switches (with do, which returns once the module runs in
// buildless mode) and checks the Functions as switchTo does: each rolled
// once, in place, to the runtime image; its build Jobs and source
// ConfigMaps gone. The node Function answers with the npm dependency its
// Pod installed at start: nothing was built.
func (sw *switches) toBuildless(do func()) {
	sw.switchTo(v1alpha1.FunctionModeBuildless, do, func(name string) {
		f, t := sw.f, sw.f.t
		t.Helper()
		fn := f.waitFunction(sw.fnNS, name, "to run buildless", 2*time.Minute, isRunningBuildless)
		f.waitRolledOut(sw.fnNS, name)
		d := f.deployment(sw.fnNS, name)
		assert.Equal(t, fn.Status.RuntimeImage, d.Spec.Template.Spec.Containers[0].Image, "%s runs the runtime image", name)
		sw.rolledOnce(name)
		jobs, _, _, configMaps, err := f.children(t.Context(), sw.fnNS, name)
		require.NoError(t, err)
		assert.Empty(t, jobs, "%s: build Jobs are gone", name)
		assert.Empty(t, configMaps, "%s: source ConfigMaps are gone", name)
	})
}

// toBuild switches (with do, which returns once the module runs in build
// mode) and checks the Functions as switchTo does: each built once, rolled
// once, in place, to its built image. The node Function answers with the
// npm dependency the build Job installed into the image.
func (sw *switches) toBuild(do func()) {
	sw.switchTo(v1alpha1.FunctionModeBuild, do, func(name string) {
		f, t := sw.f, sw.f.t
		t.Helper()
		fn := f.waitRunning(sw.fnNS, name)
		f.waitRolledOut(sw.fnNS, name)
		d := f.deployment(sw.fnNS, name)
		assert.Equal(t, fn.Status.BuiltImage, d.Spec.Template.Spec.Containers[0].Image, "%s runs its built image", name)
		assert.NotEqual(t, fn.Status.RuntimeImage, d.Spec.Template.Spec.Containers[0].Image, "%s runs its built image", name)
		sw.rolledOnce(name)
		// Built once: one Job completed since the switch. A Job that failed
		// before it (the controller retried the build) is reported with the
		// namespace's events, which carry the failure's message.
		f.jobs.count(sw.fnNS, name) // the watch has seen every Job
		jobs := f.jobs.seenJobs(sw.fnNS, name)
		var complete, failed []string
		for _, j := range jobs[sw.builds[name]:] {
			switch j.ended {
			case batchv1.JobComplete:
				complete = append(complete, j.String())
			case batchv1.JobFailed:
				failed = append(failed, j.String())
			}
		}
		assert.Len(t, complete, 1, "%s: one build per switch to build mode: %v", name, f.jobs.names(sw.fnNS, name))
		assert.Len(t, jobs[sw.builds[name]:], len(complete)+len(failed), "%s: no build Job replaced before it ended: %v", name, f.jobs.names(sw.fnNS, name))
		if len(failed) > 0 {
			t.Logf("%s: a build failed and was retried: %v%s", name, failed, framework.Dumps(framework.DumpEvents(f.c, sw.fnNS)))
		}
		sw.builds[name] = len(jobs)
	})
}

// switchTo runs do and waits for the module in mode, checks each Function
// with check, then requires that every Function had an available replica
// throughout, answers, and that build mode's copies are in fnNS in build
// mode and gone from it in buildless mode.
func (sw *switches) switchTo(mode string, do func(), check func(name string)) {
	sw.f.t.Helper()
	serving := sw.f.watchAvailable(sw.fnNS, sw.names)
	do()
	sw.f.inMode(mode)
	for _, name := range sw.names {
		check(name)
	}
	serving.requireAlwaysServed()
	sw.f.answerAll(sw.fnNS, sw.answers)
	sw.waitCopies(mode == v1alpha1.FunctionModeBuild)
}

// rolledOnce checks that the Function's Deployment is the same one, one
// revision on since the last switch, and records that revision.
func (sw *switches) rolledOnce(name string) {
	sw.f.t.Helper()
	was, now := sw.revisions[name], sw.f.revision(sw.fnNS, name)
	assert.Equal(sw.f.t, revision{UID: was.UID, Revision: was.Revision + 1}, now, "%s rolled once, in place", name)
	sw.revisions[name] = now
}

// waitCopies waits until all of build mode's copies are in fnNS (present)
// or none is.
func (sw *switches) waitCopies(present bool) {
	sw.f.t.Helper()
	what := map[bool]string{true: "the copies of build mode in ", false: "the copies of build mode to leave "}[present]
	framework.WaitFor(sw.f.t, 30*time.Second, what+sw.fnNS, func(ctx context.Context) (bool, string, error) {
		there, missing, err := sw.f.copiesIn(ctx, sw.fnNS, sw.copies)
		if present {
			return len(missing) == 0, fmt.Sprintf("missing: %v", missing), err
		}
		return len(there) == 0, fmt.Sprintf("present: %v", there), err
	}, sw.f.dumpsFor(sw.fnNS, "node")...)
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
