//go:build e2e

package e2e

// Faults under running Functions, on the real node: the parts under a
// Function fail or restart, and nothing the user already has is lost.

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/pkg/manifest"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
	"github.com/kyma-project/serverless-manager/tests/framework"
)

// versioned is a Node.js Function that answers its version.
func versioned(ns, name, version string) *v1alpha2.Function {
	return inline(ns, name, v1alpha2.RuntimeNodejs22, version)
}

// setAnswer changes what a versioned Function answers.
func (f *fnEnv) setAnswer(ns, name, answer string) {
	f.t.Helper()
	f.editFunction(ns, name, func(fn *v1alpha2.Function) {
		fn.Spec.Source.Inline.Source = inline(ns, name, fn.Spec.Runtime, answer).Spec.Source.Inline.Source
	})
}

// The internal registry's Pod deleted during a build while it cannot come
// back (a quota refuses new Pods in the module namespace): the build ends
// with BuildReady=False naming the unreachable registry, the Function keeps
// answering its previous version all along, and once the registry is back
// the retry builds at once (not after the failure's backoff) and the new
// version answers; the image pushed before is still in the registry.
func TestRegistryPodDeletedDuringABuild(t *testing.T) {
	f := startFunctionController(t)
	ctx := t.Context()
	fnNS := f.cluster.Namespace(t, "registry-gone")
	require.NoError(t, f.fcs.Create(ctx, versioned(fnNS, "fn", "v1")))
	v1 := f.waitRunning(fnNS, "fn")
	f.cluster.WaitForAnswer(t, time.Minute, fnNS, "fn", "/", func(b string) bool { return b == "v1" }, f.dumpsFor(fnNS, "fn")...)
	probe := f.cluster.KeepCalling(fnNS, "fn", "/", 200*time.Millisecond)

	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "no-new-pods"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}}}
	require.NoError(t, f.c.Create(ctx, quota))
	t.Cleanup(func() { _ = f.c.Delete(context.Background(), quota) })
	// The registry goes once the new build's Job exists: a build that would
	// start without a ready registry waits for it instead of failing.
	builds := f.jobs.count(fnNS, "fn")
	f.setAnswer(fnNS, "fn", "v2")
	framework.WaitFor(t, time.Minute, "the build Job of v2", func(context.Context) (bool, string, error) {
		n := f.jobs.count(fnNS, "fn")
		return n > builds, fmt.Sprintf("%d build Jobs, %d before the change", n, builds), nil
	}, f.dumpsFor(fnNS, "fn")...)
	registryLabels := map[string]string{"app": "docker-registry"}
	var pods corev1.PodList
	require.NoError(t, f.c.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels(registryLabels)))
	require.Len(t, pods.Items, 1, "the registry's Pod")
	require.NoError(t, f.c.Delete(ctx, &pods.Items[0], client.GracePeriodSeconds(0)))

	c := f.waitConditionFalse(fnNS, "fn", v1alpha2.ConditionBuildReady, "to report the failed build", 3*time.Minute)
	assert.Equal(t, v1alpha2.ReasonJobFailed, c.Reason)
	assert.Contains(t, c.Message, "unreachable", "the message names the cause")
	t.Logf("BuildReady=False %s: %s", c.Reason, c.Message)

	// The retry runs once the registry is back, not after the failure's
	// backoff (the controller's APP_FUNCTION_GIT_FETCH_REQUEUE_DURATION).
	backoff, err := time.ParseDuration(envOf(f.controllerPod().Spec.Containers[0])["APP_FUNCTION_GIT_FETCH_REQUEUE_DURATION"])
	require.NoError(t, err, "the controller's failure backoff")
	require.NoError(t, f.c.Delete(ctx, quota))
	// The ReplicaSet controller tries again a Pod the quota refused after a
	// backoff that doubles with each refusal (by now about as long as the
	// quota stood); a change of the ReplicaSet makes it try at once, as a
	// registry Pod deleted without a quota comes back at once.
	var sets appsv1.ReplicaSetList
	require.NoError(t, f.c.List(ctx, &sets, client.InNamespace(ns), client.MatchingLabels(registryLabels)))
	for i := range sets.Items {
		if ptr.Deref(sets.Items[i].Spec.Replicas, 0) > 0 {
			poke := fmt.Sprintf(`{"metadata":{"annotations":{"e2e.serverless.kyma-project.io/quota-gone":%q}}}`, time.Now().Format(time.RFC3339Nano))
			require.NoError(t, f.c.Patch(ctx, &sets.Items[i], client.RawPatch(types.MergePatchType, []byte(poke))))
		}
	}
	framework.WaitFor(t, 4*time.Minute, "the build Job of the retry", func(context.Context) (bool, string, error) {
		n := f.jobs.count(fnNS, "fn")
		return n > builds+1, fmt.Sprintf("%d build Jobs, %d before the change", n, builds), nil
	}, f.dumpsFor(fnNS, "fn")...)
	retried := time.Now()
	assert.Less(t, retried.Sub(c.LastTransitionTime.Time), backoff,
		"the retry starts when the registry is back, before the backoff of %s after the failure at %s ends", backoff, c.LastTransitionTime.Format(time.TimeOnly))
	t.Logf("the retry's Job %s after the failure", retried.Sub(c.LastTransitionTime.Time).Round(100*time.Millisecond))
	f.waitFunction(fnNS, "fn", "to run the retried build", 4*time.Minute, func(fn *v1alpha2.Function) bool {
		return isRunning(fn) && fn.Status.BuiltImage != v1.Status.BuiltImage
	})
	f.cluster.WaitForAnswer(t, time.Minute, fnNS, "fn", "/", func(b string) bool { return b == "v2" }, f.dumpsFor(fnNS, "fn")...)
	got := probe.Stop()
	assert.Empty(t, got.Failures, "the Function answered every call (%d calls): %v", got.Calls, got.Bodies)
	assert.Positive(t, got.Bodies["v1"], "the previous version answered meanwhile")

	// The image of v1 is still in the registry, behind its Service.
	secret := &corev1.Secret{}
	require.NoError(t, f.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: module.RegistrySecretName}, secret))
	addr, err := f.cluster.ServiceAddress(ctx, ns, module.RegistryServiceName, 5000)
	require.NoError(t, err)
	pull := string(secret.Data["pullRegAddr"])
	ref, err := name.ParseReference(addr+strings.TrimPrefix(v1.Status.BuiltImage, pull), name.Insecure)
	require.NoError(t, err)
	_, err = remote.Head(ref, remote.WithAuth(&authn.Basic{Username: string(secret.Data["username"]), Password: string(secret.Data["password"])}))
	assert.NoError(t, err, "the image built before the fault is still in the registry")
}

// kubelet, then containerd, restarted as a service manager restarts them:
// the Functions answer throughout and no container restarts.
func TestNodeRestartKeepsFunctionsRunning(t *testing.T) {
	f := startFunctionController(t)
	ctx := t.Context()
	fnNS := f.cluster.Namespace(t, "node-restart")
	names := []string{"node-fn", "python-fn"}
	require.NoError(t, f.fcs.Create(ctx, versioned(fnNS, names[0], "node answers")))
	require.NoError(t, f.fcs.Create(ctx, inline(fnNS, names[1], v1alpha2.RuntimePython312, "python answers")))
	for _, n := range names {
		f.waitRunning(fnNS, n)
		f.cluster.WaitForAnswer(t, time.Minute, fnNS, n, "/", func(b string) bool { return strings.HasSuffix(b, "answers") }, f.dumpsFor(fnNS, n)...)
	}
	// A Pod Ready for less than kubelet's probe period when kubelet
	// restarts is probed again before it counts as Ready (seen: a Pod 5 s
	// old left its Service's endpoints for 5 s); a node's Pods are rarely
	// that young when its kubelet restarts.
	for _, n := range names {
		f.readyFor(fnNS, n, 15*time.Second)
	}
	before := map[string]map[string]string{}
	for _, n := range names {
		before[n] = f.containerIDs(fnNS, n)
	}
	controller := f.controllerPod()

	for _, component := range []string{"kubelet", "containerd"} {
		probes := map[string]*framework.Prober{}
		for _, n := range names {
			probes[n] = f.cluster.KeepCalling(fnNS, n, "/", 200*time.Millisecond)
		}
		require.NoError(t, f.cluster.RestartNodeComponent(ctx, component))
		time.Sleep(15 * time.Second) // kubelet resyncs every Pod within its 10 s sync period
		for _, n := range names {
			got := probes[n].Stop()
			assert.Empty(t, got.Failures, "%s answered every call while %s restarted (%d calls)", n, component, got.Calls)
			assert.Positive(t, got.Calls)
			assert.Equal(t, before[n], f.containerIDs(fnNS, n), "%s: the same containers after %s restarted, none restarted", n, component)
		}
	}
	after := f.controllerPod()
	assert.Equal(t, controller.UID, after.UID, "the controller's Pod stays")
	assert.Equal(t, controller.Status.ContainerStatuses[0].ContainerID, after.Status.ContainerStatuses[0].ContainerID, "the controller's container stays")
	// The node still runs new Pods.
	f.setAnswer(fnNS, names[0], "after the restarts")
	f.cluster.WaitForAnswer(t, 3*time.Minute, fnNS, names[0], "/", func(b string) bool { return b == "after the restarts" }, f.dumpsFor(fnNS, names[0])...)
}

// readyFor waits until every running Pod of the Function has been Ready
// for at least d.
func (f *fnEnv) readyFor(ns, name string, d time.Duration) {
	f.t.Helper()
	framework.WaitFor(f.t, d+time.Minute, fmt.Sprintf("the Pods of %s/%s to be Ready for %s", ns, name, d), func(ctx context.Context) (bool, string, error) {
		var pods corev1.PodList
		if err := f.c.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{v1alpha2.LabelFunctionName: name, v1alpha2.LabelResource: v1alpha2.ResourceDeployment}); err != nil {
			return false, "", err
		}
		var seen []string
		settled := len(pods.Items) > 0
		for _, p := range pods.Items {
			since := "not Ready"
			ok := false
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
					since = "Ready for " + time.Since(c.LastTransitionTime.Time).Round(time.Second).String()
					ok = time.Since(c.LastTransitionTime.Time) >= d
				}
			}
			settled = settled && ok && p.DeletionTimestamp == nil
			seen = append(seen, p.Name+": "+since)
		}
		return settled, strings.Join(seen, ", "), nil
	})
}

// containerIDs are the container IDs and restart counts of the Function's
// running Pods (not its build Pods), by Pod name.
func (f *fnEnv) containerIDs(ns, name string) map[string]string {
	f.t.Helper()
	var pods corev1.PodList
	require.NoError(f.t, f.c.List(f.t.Context(), &pods, client.InNamespace(ns), client.MatchingLabels{v1alpha2.LabelFunctionName: name}))
	out := map[string]string{}
	for _, p := range pods.Items {
		if p.Labels["job-name"] != "" || p.DeletionTimestamp != nil {
			continue
		}
		for _, cs := range p.Status.ContainerStatuses {
			out[p.Name+"/"+cs.Name] = fmt.Sprintf("%s restarts=%d", cs.ContainerID, cs.RestartCount)
		}
	}
	return out
}

// The Function controller's Pod deleted without grace in the middle of a
// rollout it started: the rollout completes, once (one more revision: the
// Deployment keeps no old ReplicaSet, as 1.8.4's), and the Function runs the
// new configuration.
func TestControllerPodDeletedDuringRollout(t *testing.T) {
	f := startFunctionController(t)
	ctx := t.Context()
	fnNS := f.cluster.Namespace(t, "rollout-kill")
	fn := versioned(fnNS, "fn", "v1")
	fn.Spec.Source.Inline.Source = `module.exports = { main: function () { return "style=" + (process.env.STYLE || "plain"); } };` + "\n"
	require.NoError(t, f.fcs.Create(ctx, fn))
	f.waitRunning(fnNS, "fn")
	f.cluster.WaitForAnswer(t, time.Minute, fnNS, "fn", "/", func(b string) bool { return b == "style=plain" }, f.dumpsFor(fnNS, "fn")...)
	before := f.revision(fnNS, "fn")
	d := f.deployment(fnNS, "fn")

	f.editFunction(fnNS, "fn", func(fn *v1alpha2.Function) {
		fn.Spec.Env = append(fn.Spec.Env, corev1.EnvVar{Name: "STYLE", Value: "loud"})
	})
	framework.WaitFor(t, time.Minute, "the controller to start the rollout", func(ctx context.Context) (bool, string, error) {
		got := &appsv1.Deployment{}
		if err := f.c.Get(ctx, client.ObjectKeyFromObject(d), got); err != nil {
			return false, "", err
		}
		return got.Generation > d.Generation, fmt.Sprintf("generation %d", got.Generation), nil
	}, f.dumpsFor(fnNS, "fn")...)
	require.NoError(t, f.c.Delete(ctx, f.controllerPod(), client.GracePeriodSeconds(0)))

	f.cluster.WaitForAnswer(t, 2*time.Minute, fnNS, "fn", "/", func(b string) bool { return b == "style=loud" }, f.dumpsFor(fnNS, "fn")...)
	f.waitRunning(fnNS, "fn")
	after := f.deployment(fnNS, "fn")
	assert.Equal(t, d.UID, after.UID, "the same Deployment")
	assert.Equal(t, revision{UID: before.UID, Revision: before.Revision + 1}, f.revision(fnNS, "fn"), "exactly one more revision of the same Deployment")
	time.Sleep(5 * time.Second) // a second rollout would start by now
	assert.Equal(t, after.Generation, f.deployment(fnNS, "fn").Generation, "no second rollout")
}

// A change whose dependencies fail to install (npm cannot parse them) does
// not reach the running Function: BuildReady=False carries npm's error and
// the previous version keeps answering; fixing it builds and runs it.
func testFailingDependencyInstallKeepsThePreviousVersion(t *testing.T, f *fnEnv) {
	ctx := t.Context()
	fnNS := f.cluster.Namespace(t, "deps-fail")
	require.NoError(t, f.fcs.Create(ctx, versioned(fnNS, "fn", "v1")))
	v1 := f.waitRunning(fnNS, "fn")
	f.cluster.WaitForAnswer(t, time.Minute, fnNS, "fn", "/", func(b string) bool { return b == "v1" }, f.dumpsFor(fnNS, "fn")...)
	probe := f.cluster.KeepCalling(fnNS, "fn", "/", 200*time.Millisecond)

	f.editFunction(fnNS, "fn", func(fn *v1alpha2.Function) {
		fn.Spec.Source.Inline.Source = inline(fnNS, "fn", fn.Spec.Runtime, "v2").Spec.Source.Inline.Source
		fn.Spec.Source.Inline.Dependencies = `{ "name": "fn", "dependencies": { oops } }`
	})
	c := f.waitConditionFalse(fnNS, "fn", v1alpha2.ConditionBuildReady, "to report the failed install", 3*time.Minute)
	assert.Equal(t, v1alpha2.ReasonJobFailed, c.Reason)
	assert.Contains(t, c.Message, "JSON", "npm's parse error is the message")
	t.Logf("BuildReady=False %s: %s", c.Reason, c.Message)
	assert.Equal(t, v1.Status.BuiltImage, f.deployment(fnNS, "fn").Spec.Template.Spec.Containers[0].Image, "the Deployment keeps the previous image")
	time.Sleep(3 * time.Second)
	got := probe.Stop()
	assert.Empty(t, got.Failures, "the previous version answered every call (%d)", got.Calls)
	assert.Equal(t, []string{"v1"}, keys(got.Bodies), "only the previous version answered")

	f.editFunction(fnNS, "fn", func(fn *v1alpha2.Function) {
		fn.Spec.Source.Inline.Dependencies = `{ "name": "fn", "version": "1.0.0", "dependencies": {} }`
	})
	f.cluster.WaitForAnswer(t, 3*time.Minute, fnNS, "fn", "/", func(b string) bool { return b == "v2" }, f.dumpsFor(fnNS, "fn")...)
}

func keys(m map[string]int) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// startBuildless installs the module for a small cluster in buildless mode,
// its Pods on the real node.
func startBuildless(t *testing.T) *fnEnv {
	t.Helper()
	e := startManager(t)
	e.placeModule(framework.RealNode)
	objs, err := manifest.ReadFile(filepath.Join(e.cluster.Root(), "config", "samples", "small-cluster-serverless-cr.yaml"))
	require.NoError(t, err)
	for _, o := range objs {
		require.NoError(t, unstructured.SetNestedField(o.Object, v1alpha1.FunctionModeBuildless, "spec", "functionMode"))
	}
	require.NoError(t, e.cluster.Apply(t.Context(), ns, objs...))
	e.waitState("default", v1alpha1.StateReady)
	return newFnEnv(t, e)
}

// In buildless mode a Function's dependencies install in each new Pod; a
// change whose install runs out of memory there (a dependency's install
// script, from a package registry the test serves) reports Running=False
// naming the OOM kill, and the previous version keeps answering.
func testBuildlessInstallOOMKilledKeepsThePreviousVersion(t *testing.T, f *fnEnv) {
	ctx := t.Context()
	fnNS := f.cluster.Namespace(t, "oom")
	npm, err := f.cluster.StartNPMRegistry(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = npm.Close() })
	require.NoError(t, npm.Publish(framework.NPMPackage{Name: "greedy-install", Version: "1.0.0", Main: "index.js",
		Files: map[string][]byte{
			"index.js": []byte("module.exports = 'never loaded';\n"),
			// more memory than the Function's limit, while npm installs it
			"grab.js": []byte("const held = []; for (;;) held.push(Buffer.alloc(16 << 20, 1));\n"),
		}, Scripts: map[string]string{"install": "node grab.js"}}))
	require.NoError(t, f.c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: fnNS, Name: "serverless-package-registry-config"},
		StringData: map[string]string{".npmrc": npm.NPMRC()}}))

	fn := versioned(fnNS, "fn", "v1")
	fn.Spec.ResourceConfiguration = &v1alpha2.ResourceConfiguration{Function: &v1alpha2.ResourceRequirements{Profile: "XS"}}
	require.NoError(t, f.fcs.Create(ctx, fn))
	f.waitFunction(fnNS, "fn", "to run buildless", 3*time.Minute, isRunningBuildless)
	f.cluster.WaitForAnswer(t, time.Minute, fnNS, "fn", "/", func(b string) bool { return b == "v1" }, f.dumpsFor(fnNS, "fn")...)
	probe := f.cluster.KeepCalling(fnNS, "fn", "/", 200*time.Millisecond)

	f.editFunction(fnNS, "fn", func(fn *v1alpha2.Function) {
		fn.Spec.Source.Inline.Source = inline(fnNS, "fn", fn.Spec.Runtime, "v2").Spec.Source.Inline.Source
		fn.Spec.Source.Inline.Dependencies = `{ "name": "fn", "version": "1.0.0", "dependencies": { "greedy-install": "1.0.0" } }`
	})
	failed := f.waitFunction(fnNS, "fn", "to name the OOM kill", 3*time.Minute, func(fn *v1alpha2.Function) bool {
		c := fn.Status.Condition(v1alpha2.ConditionRunning)
		return c != nil && c.Status == corev1.ConditionFalse && strings.Contains(c.Message, "OOMKilled")
	})
	c := failed.Status.Condition(v1alpha2.ConditionRunning)
	assert.Equal(t, v1alpha2.ReasonReplicaCrashLoop, c.Reason)
	assert.Contains(t, c.Message, "the previous version keeps serving")
	t.Logf("Running=False %s: %s", c.Reason, c.Message)
	assert.Positive(t, npm.Downloads("greedy-install", "1.0.0"), "the install ran in the new Pod")
	got := probe.Stop()
	assert.Empty(t, got.Failures, "the previous version answered every call (%d)", got.Calls)
	assert.Equal(t, []string{"v1"}, keys(got.Bodies), "only the previous version answered")
}
