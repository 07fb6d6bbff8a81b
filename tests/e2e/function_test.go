//go:build e2e

package e2e

// End-to-end tests of the Function controller: the manager installs the
// module with its Pods on the real node, so the Function controller runs as
// the chart's Deployment, build Jobs build for real (npm against the npm
// registry, images pushed to the internal registry) and Function Pods pull
// and run what they built.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/tests/framework"
)

// fnEnv is the module installed by the manager, its Pods on the real node.
type fnEnv struct {
	*env
	fcs  client.Client // knows Functions
	jobs *jobLog
}

// controllerLabels select the Function controller's Pods (the chart's
// Deployment selector).
var controllerLabels = map[string]string{"app.kubernetes.io/name": "serverless", "app": "serverless"}

// startFunctionController installs the module with the sample CR for a
// small cluster (the real node has this machine's 2 CPUs: the default
// presets would let only a few Functions and builds fit).
func startFunctionController(t *testing.T) *fnEnv {
	t.Helper()
	e := startManager(t)
	e.placeModule(framework.RealNode)
	e.applySample("small-cluster-serverless-cr.yaml")
	e.waitState("default", v1alpha1.StateReady)
	return newFnEnv(t, e)
}

// newFnEnv is the Function clients of an installed module whose controller
// runs (the manager's Ready says its Pod passed its readiness probe).
func newFnEnv(t *testing.T, e *env) *fnEnv {
	t.Helper()
	f := fnClients(t, e)
	f.controllerPod()
	return f
}

// fnClients is a fnEnv's clients (Functions, Jobs watched) without waiting
// for a controller.
func fnClients(t *testing.T, e *env) *fnEnv {
	t.Helper()
	s := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(s))
	require.NoError(t, v1alpha1.AddToScheme(s))
	require.NoError(t, v1alpha2.AddToScheme(s))
	require.NoError(t, apiextensionsv1.AddToScheme(s))
	fcs, err := e.cluster.NewClient(s)
	require.NoError(t, err)
	wc, err := client.NewWithWatch(e.cluster.RESTConfig(), client.Options{Scheme: s})
	require.NoError(t, err)
	return &fnEnv{env: e, fcs: fcs, jobs: watchJobs(t, wc)}
}

// controllerPod waits for the one Ready Pod of the Function controller.
func (f *fnEnv) controllerPod() *corev1.Pod {
	f.t.Helper()
	var pod *corev1.Pod
	framework.WaitFor(f.t, 2*time.Minute, "one Ready Pod of the Function controller", func(ctx context.Context) (bool, string, error) {
		p, err := f.cluster.ReadyPod(ctx, ns, controllerLabels)
		if err != nil {
			return false, err.Error(), nil
		}
		pod = p
		return true, "", nil
	}, framework.DumpPods(f.c, ns), framework.DumpEvents(f.c, ns))
	return pod
}

// controllerLog is the log of the controller's current Pod.
func (f *fnEnv) controllerLog(ctx context.Context) (string, error) {
	p, err := f.cluster.ReadyPod(ctx, ns, controllerLabels)
	if err != nil {
		return "", err
	}
	return f.cluster.PodLog(ctx, ns, p.Name, "")
}

func (f *fnEnv) dumpController() func() string {
	return f.cluster.DumpPodLogs(ns, controllerLabels, 40)
}

func (f *fnEnv) dumpsFor(ns, name string) []func() string {
	return []func() string{
		framework.DumpObject(f.fcs, &v1alpha2.Function{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}),
		framework.DumpEvents(f.c, ns),
		framework.DumpPods(f.c, ns),
		f.cluster.DumpPodLogs(ns, map[string]string{v1alpha2.LabelFunctionName: name}, 20),
		f.dumpController(),
	}
}

func inline(ns, name string, rt v1alpha2.Runtime, greeting string) *v1alpha2.Function {
	fn := &v1alpha2.Function{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       v1alpha2.FunctionSpec{Runtime: rt, Source: v1alpha2.Source{Inline: &v1alpha2.InlineSource{}}},
	}
	if strings.HasPrefix(string(rt), "python") {
		fn.Spec.Source.Inline.Source = fmt.Sprintf("def main(event, context):\n    return %q\n", greeting)
	} else {
		fn.Spec.Source.Inline.Source = fmt.Sprintf("module.exports = { main: function (event, context) { return %q; } };\n", greeting)
		fn.Spec.Source.Inline.Dependencies = fmt.Sprintf(`{ "name": %q, "version": "1.0.0", "dependencies": {} }`, name)
	}
	return fn
}

func describeFunction(fn *v1alpha2.Function) string {
	parts := []string{fmt.Sprintf("generation=%d observed=%d replicas=%d image=%s", fn.Generation, fn.Status.ObservedGeneration, fn.Status.Replicas, fn.Status.BuiltImage)}
	for _, c := range fn.Status.Conditions {
		parts = append(parts, fmt.Sprintf("%s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message))
	}
	return strings.Join(parts, "; ")
}

// isRunning: all three conditions True for the current generation.
func isRunning(fn *v1alpha2.Function) bool {
	for _, typ := range []string{v1alpha2.ConditionConfigurationReady, v1alpha2.ConditionBuildReady, v1alpha2.ConditionRunning} {
		if c := fn.Status.Condition(typ); c == nil || c.Status != corev1.ConditionTrue {
			return false
		}
	}
	return fn.Status.ObservedGeneration == fn.Generation
}

// waitConditionFalse waits until the Function's condition typ is False and
// returns it.
func (f *fnEnv) waitConditionFalse(ns, name, typ, what string, timeout time.Duration) *v1alpha2.Condition {
	f.t.Helper()
	fn := f.waitFunction(ns, name, what, timeout, func(fn *v1alpha2.Function) bool {
		c := fn.Status.Condition(typ)
		return c != nil && c.Status == corev1.ConditionFalse
	})
	return fn.Status.Condition(typ)
}

func (f *fnEnv) waitFunction(ns, name, what string, timeout time.Duration, ok func(fn *v1alpha2.Function) bool) *v1alpha2.Function {
	f.t.Helper()
	fn := &v1alpha2.Function{}
	framework.WaitFor(f.t, timeout, fmt.Sprintf("Function %s/%s %s", ns, name, what), func(ctx context.Context) (bool, string, error) {
		if err := f.fcs.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, fn); err != nil {
			return false, "", err
		}
		return ok(fn), describeFunction(fn), nil
	}, f.dumpsFor(ns, name)...)
	return fn
}

func (f *fnEnv) waitRunning(ns, name string) *v1alpha2.Function {
	f.t.Helper()
	return f.waitFunction(ns, name, "to be Running", 3*time.Minute, isRunning)
}

// editFunction changes a Function with retries on conflicts (the controller writes its status).
func (f *fnEnv) editFunction(ns, name string, change func(fn *v1alpha2.Function)) {
	f.t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		fn := &v1alpha2.Function{}
		if err := f.fcs.Get(f.t.Context(), types.NamespacedName{Namespace: ns, Name: name}, fn); err != nil {
			return err
		}
		change(fn)
		return f.fcs.Update(f.t.Context(), fn)
	})
	require.NoError(f.t, err, "editing Function %s/%s", ns, name)
}

// children lists what the controller made for a Function, by its name label.
func (f *fnEnv) children(ctx context.Context, ns, name string) (jobs []batchv1.Job, deployments []appsv1.Deployment, services []corev1.Service, configMaps []corev1.ConfigMap, err error) {
	sel := client.MatchingLabels{v1alpha2.LabelFunctionName: name, v1alpha2.LabelManagedBy: v1alpha2.ManagedByController}
	var jl batchv1.JobList
	var dl appsv1.DeploymentList
	var sl corev1.ServiceList
	var cl corev1.ConfigMapList
	for _, l := range []client.ObjectList{&jl, &dl, &sl, &cl} {
		if err := f.c.List(ctx, l, client.InNamespace(ns), sel); err != nil {
			return nil, nil, nil, nil, err
		}
	}
	return jl.Items, dl.Items, sl.Items, cl.Items, nil
}

func (f *fnEnv) deployment(ns, name string) *appsv1.Deployment {
	f.t.Helper()
	_, ds, _, _, err := f.children(f.t.Context(), ns, name)
	require.NoError(f.t, err)
	require.Len(f.t, ds, 1, "one Deployment for Function %s/%s", ns, name)
	return &ds[0]
}

// baseCopies are the per-namespace prerequisites: the base objects of the
// module namespace (labelled serverless.kyma-project.io/config), by kind and name.
func (f *fnEnv) baseCopies() []client.Object {
	f.t.Helper()
	var out []client.Object
	sel := client.HasLabels{v1alpha2.LabelConfig}
	var cms corev1.ConfigMapList
	var secrets corev1.SecretList
	var sas corev1.ServiceAccountList
	require.NoError(f.t, f.c.List(f.t.Context(), &cms, client.InNamespace(ns), sel))
	require.NoError(f.t, f.c.List(f.t.Context(), &secrets, client.InNamespace(ns), sel))
	require.NoError(f.t, f.c.List(f.t.Context(), &sas, client.InNamespace(ns), sel))
	for i := range cms.Items {
		out = append(out, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: cms.Items[i].Name}})
	}
	for i := range secrets.Items {
		out = append(out, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: secrets.Items[i].Name}})
	}
	for i := range sas.Items {
		out = append(out, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sas.Items[i].Name}})
	}
	require.Len(f.t, out, len(v1alpha2.Runtimes())+2, "a Dockerfile ConfigMap per runtime, the registry Secret and the Function ServiceAccount in %s", ns)
	return out
}

// copiesIn reports which of the base copies exist in namespace ns.
func (f *fnEnv) copiesIn(ctx context.Context, namespace string, base []client.Object) (present, missing []string, err error) {
	for _, b := range base {
		obj := b.DeepCopyObject().(client.Object)
		name := fmt.Sprintf("%T %s", obj, b.GetName())
		err := f.c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: b.GetName()}, obj)
		switch {
		case apierrors.IsNotFound(err):
			missing = append(missing, name)
		case err != nil:
			return nil, nil, err
		default:
			present = append(present, name)
		}
	}
	return present, missing, nil
}

// testFunctionsBuildRunAndGo follows Functions of every runtime from
// creation to deletion, and the log level from the CR to the running
// controller (a change that neither restarts the module's Pods nor touches
// Functions, so it runs beside other Functions' tests).
func testFunctionsBuildRunAndGo(t *testing.T, f *fnEnv) {
	ctx := t.Context()
	base := f.baseCopies()
	fnNS := f.cluster.Namespace(t, "functions")

	t.Run("the log level reaches the running controller through its ConfigMap volume", func(t *testing.T) {
		pod := f.controllerPod()
		logHas := func(s string) func(context.Context) (bool, string, error) {
			return func(ctx context.Context) (bool, string, error) {
				log, err := f.controllerLog(ctx)
				return strings.Contains(log, s), "", err
			}
		}
		// From info (the default; a CR left by `make run` may say debug) to debug.
		started := f.get("default").Status.LogLevel
		f.update("default", func(cr *v1alpha1.Serverless) { cr.Spec.LogLevel = "info" })
		f.waitFor("default", "log level info in the status", 30*time.Second, func(cr *v1alpha1.Serverless) bool { return cr.Status.LogLevel == "info" })
		if started != "" && started != "info" {
			// The controller has to be at info before the switch to debug is
			// written, or it might read debug twice and see no change.
			framework.WaitFor(t, time.Minute, "the controller to switch to info (started at "+started+")",
				logHas(`"log level changed","level":"info"`), f.dumpController())
		}
		f.update("default", func(cr *v1alpha1.Serverless) { cr.Spec.LogLevel = "debug" })
		// kubelet refreshes ConfigMap volumes on its sync (hack/node: 10 s)
		framework.WaitFor(t, time.Minute, "the controller to switch to debug", logHas(`"log level changed","level":"debug"`), f.dumpController())
		after := f.controllerPod()
		assert.Equal(t, pod.UID, after.UID, "the same Pod")
		for _, cs := range after.Status.ContainerStatuses {
			assert.Zero(t, cs.RestartCount, "container %s restarted", cs.Name)
		}
	})

	names := map[v1alpha2.Runtime]string{}
	t.Run("one Function per runtime reaches Running", func(t *testing.T) {
		start := time.Now()
		for _, rt := range v1alpha2.Runtimes() {
			names[rt] = "hello-" + string(rt)
			require.NoError(t, f.fcs.Create(ctx, inline(fnNS, names[rt], rt, "hello from "+string(rt))))
		}
		for _, rt := range v1alpha2.Runtimes() {
			fn := f.waitRunning(fnNS, names[rt])
			assert.Equal(t, rt, fn.Status.Runtime, "status.runtime")
			assert.Equal(t, int32(1), fn.Status.Replicas)
			assert.NotEmpty(t, fn.Status.PodSelector)
			assert.NotEmpty(t, fn.Status.BuiltImage)
			jobs, deployments, services, configMaps, err := f.children(ctx, fnNS, names[rt])
			require.NoError(t, err)
			require.Len(t, jobs, 1, "one build")
			assert.Equal(t, int32(1), jobs[0].Status.Succeeded)
			require.Len(t, deployments, 1)
			assert.Equal(t, fn.Status.BuiltImage, deployments[0].Spec.Template.Spec.Containers[0].Image, "the Deployment runs the built image")
			require.Len(t, services, 1)
			assert.Equal(t, names[rt], services[0].Name)
			assert.Len(t, configMaps, 1, "one source ConfigMap")
			assert.Equal(t, 1, f.jobs.count(fnNS, names[rt]), "Jobs ever created for %s", names[rt])
			f.cluster.WaitForAnswer(t, time.Minute, fnNS, names[rt], "/", func(body string) bool {
				return body == "hello from "+string(rt)
			}, f.dumpsFor(fnNS, names[rt])...)
		}
		t.Logf("%d Functions Running and answering %s after their creation", len(names), time.Since(start).Round(time.Millisecond))
		present, missing, err := f.copiesIn(ctx, fnNS, base)
		require.NoError(t, err)
		assert.Empty(t, missing, "the namespace's prerequisites (present: %v)", present)
	})
	if t.Failed() {
		return
	}

	t.Run("a source change rebuilds once", func(t *testing.T) {
		name := names[v1alpha2.RuntimeNodejs22]
		before := f.waitRunning(fnNS, name)
		deployment := f.deployment(fnNS, name)
		jobs := f.jobs.count(fnNS, name)
		f.editFunction(fnNS, name, func(fn *v1alpha2.Function) {
			fn.Spec.Source.Inline.Source = strings.Replace(fn.Spec.Source.Inline.Source, "hello", "good morning", 1)
		})
		after := f.waitFunction(fnNS, name, "to run the rebuilt image", 2*time.Minute, func(fn *v1alpha2.Function) bool {
			return isRunning(fn) && fn.Status.BuiltImage != before.Status.BuiltImage
		})
		updated := f.deployment(fnNS, name)
		assert.Equal(t, deployment.UID, updated.UID, "the same Deployment is updated")
		assert.Equal(t, after.Status.BuiltImage, updated.Spec.Template.Spec.Containers[0].Image)
		f.requireJobsStay(fnNS, name, jobs+1, "exactly one new build")
		f.cluster.WaitForAnswer(t, time.Minute, fnNS, name, "/", func(body string) bool {
			return strings.HasPrefix(body, "good morning")
		}, f.dumpsFor(fnNS, name)...)
	})

	t.Run("an env change rolls the Deployment without a build", func(t *testing.T) {
		name := names[v1alpha2.RuntimeNodejs20]
		before := f.waitRunning(fnNS, name)
		deployment := f.deployment(fnNS, name)
		jobs := f.jobs.count(fnNS, name)
		f.editFunction(fnNS, name, func(fn *v1alpha2.Function) {
			fn.Spec.Env = append(fn.Spec.Env, corev1.EnvVar{Name: "GREETING_STYLE", Value: "loud"})
		})
		framework.WaitFor(t, time.Minute, "the Deployment to carry the new env", func(ctx context.Context) (bool, string, error) {
			d := &appsv1.Deployment{}
			if err := f.c.Get(ctx, client.ObjectKeyFromObject(deployment), d); err != nil {
				return false, "", err
			}
			for _, e := range d.Spec.Template.Spec.Containers[0].Env {
				if e.Name == "GREETING_STYLE" && e.Value == "loud" {
					return true, "", nil
				}
			}
			return false, fmt.Sprintf("generation %d", d.Generation), nil
		}, f.dumpsFor(fnNS, name)...)
		after := f.waitRunning(fnNS, name)
		assert.Equal(t, before.Status.BuiltImage, after.Status.BuiltImage, "same image")
		f.requireJobsStay(fnNS, name, jobs, "no build for an env change")
	})

	t.Run("a failed build shows BuildReady=False and recovers when fixed", func(t *testing.T) {
		name := "will-fail"
		fn := inline(fnNS, name, v1alpha2.RuntimePython312, "this build fails first")
		// pip refuses it before it would look for a package index
		fn.Spec.Source.Inline.Dependencies = "this is not a requirement!\n"
		require.NoError(t, f.fcs.Create(ctx, fn))
		c := f.waitConditionFalse(fnNS, name, v1alpha2.ConditionBuildReady, "to report the failed build", time.Minute)
		assert.Equal(t, v1alpha2.ReasonJobFailed, c.Reason)
		assert.Contains(t, c.Message, "Invalid requirement", "pip's error is in the message")
		t.Logf("BuildReady=False %s: %s", c.Reason, c.Message)
		// Other Functions are unaffected.
		assert.True(t, isRunning(f.waitRunning(fnNS, names[v1alpha2.RuntimePython312])))

		f.editFunction(fnNS, name, func(fn *v1alpha2.Function) { fn.Spec.Source.Inline.Dependencies = "" })
		// The retry follows the failure backoff (APP_FUNCTION_GIT_FETCH_REQUEUE_DURATION, 30 s in the chart).
		recovered := f.waitFunction(fnNS, name, "to recover after the fix", 3*time.Minute, isRunning)
		assert.NotEmpty(t, recovered.Status.BuiltImage)
		f.cluster.WaitForAnswer(t, time.Minute, fnNS, name, "/", func(body string) bool {
			return body == "this build fails first"
		}, f.dumpsFor(fnNS, name)...)
	})

	t.Run("kubectl scale function changes the replicas", func(t *testing.T) {
		name := names[v1alpha2.RuntimePython312]
		jobs := f.jobs.count(fnNS, name)
		kubectl := filepath.Join(f.cluster.Root(), "bin", "assets", "kubectl")
		out, err := exec.CommandContext(ctx, kubectl, "--kubeconfig", f.cluster.KubeconfigPath(), "-n", fnNS,
			"scale", "function", name, "--replicas=3").CombinedOutput()
		require.NoError(t, err, "kubectl scale: %s", out)
		f.waitFunction(fnNS, name, "to report 3 replicas", time.Minute, func(fn *v1alpha2.Function) bool {
			return isRunning(fn) && fn.Status.Replicas == 3
		})
		d := f.deployment(fnNS, name)
		require.NotNil(t, d.Spec.Replicas)
		assert.Equal(t, int32(3), *d.Spec.Replicas)
		out, err = exec.CommandContext(ctx, kubectl, "--kubeconfig", f.cluster.KubeconfigPath(), "-n", fnNS,
			"get", "function", name, "-o", "jsonpath={.status.replicas}").CombinedOutput()
		require.NoError(t, err, "%s", out)
		assert.Equal(t, "3", string(out), "the scale subresource's status path")
		f.requireJobsStay(fnNS, name, jobs, "no build for a scale")
	})

	t.Run("deleting Functions removes their objects and, with the last, the namespace copies", func(t *testing.T) {
		first := names[v1alpha2.RuntimeNodejs22]
		require.NoError(t, f.fcs.Delete(ctx, &v1alpha2.Function{ObjectMeta: metav1.ObjectMeta{Namespace: fnNS, Name: first}}))
		f.waitNoChildren(fnNS, first)
		present, missing, err := f.copiesIn(ctx, fnNS, base)
		require.NoError(t, err)
		assert.Empty(t, missing, "copies stay while Functions remain (present: %v)", present)

		var list v1alpha2.FunctionList
		require.NoError(t, f.fcs.List(ctx, &list, client.InNamespace(fnNS)))
		for i := range list.Items {
			require.NoError(t, client.IgnoreNotFound(f.fcs.Delete(ctx, &list.Items[i])))
		}
		for i := range list.Items {
			f.waitNoChildren(fnNS, list.Items[i].Name)
		}
		framework.WaitFor(t, time.Minute, "the copies in "+fnNS+" to be removed", func(ctx context.Context) (bool, string, error) {
			present, _, err := f.copiesIn(ctx, fnNS, base)
			return len(present) == 0, fmt.Sprintf("still there: %v", present), err
		}, f.dumpController())
	})
}

// Builds interrupted by the controller's Pod being killed (deleted without
// grace) converge to exactly one Job per build and one Deployment per
// Function.
func TestFunctionControllerKilledDuringBuilds(t *testing.T) {
	f := startFunctionController(t)
	ctx := t.Context()
	fnNS := f.cluster.Namespace(t, "kill9")
	var names []string
	for i := range 6 {
		rt := v1alpha2.Runtimes()[i%len(v1alpha2.Runtimes())]
		name := fmt.Sprintf("fn-%d", i)
		names = append(names, name)
		require.NoError(t, f.fcs.Create(ctx, inline(fnNS, name, rt, fmt.Sprintf("greeting %d", i))))
	}
	// The first kill lands while builds run: after the first Job appeared.
	framework.WaitFor(t, time.Minute, "the first build Job", func(context.Context) (bool, string, error) {
		n := 0
		for _, name := range names {
			n += f.jobs.watched(fnNS, name)
		}
		return n > 0, "", nil
	}, f.dumpController())
	for i := range 5 {
		if i > 0 {
			time.Sleep(time.Duration(100+rand.IntN(900)) * time.Millisecond)
		}
		pod := f.controllerPod()
		require.NoError(t, f.c.Delete(ctx, pod, client.GracePeriodSeconds(0)), "kill #%d", i+1)
	}
	for _, name := range names {
		f.waitRunning(fnNS, name)
	}
	f.requireJobsStayEach(fnNS, names, 1, "one build per Function despite the kills")
	for _, name := range names {
		jobs, deployments, _, _, err := f.children(ctx, fnNS, name)
		require.NoError(t, err)
		assert.Len(t, jobs, 1, name)
		assert.Len(t, deployments, 1, "one Deployment for %s", name)
	}
}

// The manager's uninstall waits while Functions exist, also with the
// controller running and its copies in user namespaces.
func TestUninstallWaitsForRunningFunctions(t *testing.T) {
	f := startFunctionController(t)
	ctx := t.Context()
	fnNS := f.cluster.Namespace(t, "guard")
	require.NoError(t, f.fcs.Create(ctx, inline(fnNS, "keeper", v1alpha2.RuntimeNodejs22, "still here")))
	f.waitRunning(fnNS, "keeper")

	require.NoError(t, f.c.Delete(ctx, f.get("default")))
	cr := f.waitFor("default", "the uninstall to wait for the Function", time.Minute, func(cr *v1alpha1.Serverless) bool {
		c := meta.FindStatusCondition(cr.Status.Conditions, v1alpha1.ConditionDeleted)
		return c != nil && c.Reason == v1alpha1.ReasonDeletionErr && v1alpha1.Cause(*c) == v1alpha1.ReasonFunctionsExist
	})
	assert.Contains(t, meta.FindStatusCondition(cr.Status.Conditions, v1alpha1.ConditionDeleted).Message, "keeper")
	time.Sleep(3 * time.Second) // the guard must hold, not just appear
	require.NoError(t, f.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: controllerName}, &appsv1.Deployment{}), "the controller is still installed")
	f.waitRunning(fnNS, "keeper")

	// Without the Function the uninstall finishes by itself.
	require.NoError(t, f.fcs.Delete(ctx, &v1alpha2.Function{ObjectMeta: metav1.ObjectMeta{Namespace: fnNS, Name: "keeper"}}))
	framework.WaitFor(t, 2*time.Minute, "the Serverless CR to be gone", func(ctx context.Context) (bool, string, error) {
		err := f.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "default"}, &v1alpha1.Serverless{})
		return apierrors.IsNotFound(err), "", client.IgnoreNotFound(err)
	}, f.dumps("default")...)
}

// waitNoChildren waits until nothing labelled as a child of the Function is left.
func (f *fnEnv) waitNoChildren(ns, name string) {
	f.t.Helper()
	framework.WaitFor(f.t, time.Minute, fmt.Sprintf("the objects of Function %s/%s to be gone", ns, name), func(ctx context.Context) (bool, string, error) {
		jobs, deployments, services, configMaps, err := f.children(ctx, ns, name)
		n := len(jobs) + len(deployments) + len(services) + len(configMaps)
		return n == 0, fmt.Sprintf("%d Jobs, %d Deployments, %d Services, %d ConfigMaps", len(jobs), len(deployments), len(services), len(configMaps)), err
	}, f.dumpController())
}

// requireJobsStay checks that the Function has had exactly want Jobs, now
// and for a few more seconds (a wrong build would appear within them).
func (f *fnEnv) requireJobsStay(ns, name string, want int, why string) {
	f.t.Helper()
	f.requireJobsStayEach(ns, []string{name}, want, why)
}

// requireJobsStayEach is requireJobsStay for each of the Functions names,
// watched over the same few seconds.
func (f *fnEnv) requireJobsStayEach(ns string, names []string, want int, why string) {
	f.t.Helper()
	check := func(name string, got int) {
		f.t.Helper()
		if got != want {
			// The dumps carry the events: a failed and retried build names its cause there.
			f.t.Fatalf("%s: Function %s/%s has had %d build Jobs, want %d: %v%s", why, ns, name, got, want, f.jobs.names(ns, name),
				framework.Dumps(f.dumpsFor(ns, name)...))
		}
	}
	// count lists the Jobs to be sure the watch has caught up; in between,
	// what the watch has seen is enough.
	for _, name := range names {
		check(name, f.jobs.count(ns, name))
	}
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		for _, name := range names {
			check(name, f.jobs.watched(ns, name))
		}
	}
	for _, name := range names {
		check(name, f.jobs.count(ns, name))
	}
}

// jobLog records every build Job the controller ever created during a
// test, by Function, from a watch: Jobs that are deleted again still count.
type jobLog struct {
	t    testing.TB
	c    client.Client
	mu   sync.Mutex
	seen map[string]map[types.UID]*seenJob // ns/function → uid → what the watch saw of it
	err  error
}

// seenJob is what the watch saw of a build Job, for a failure message.
type seenJob struct {
	name    string
	created time.Time
	// ended is the Job's Complete or Failed condition ("": running).
	ended batchv1.JobConditionType
	state string
}

func (j *seenJob) String() string {
	return fmt.Sprintf("%s (created %s, %s)", j.name, j.created.Format(time.TimeOnly), j.state)
}

func watchJobs(t *testing.T, c client.WithWatch) *jobLog {
	l := &jobLog{t: t, c: c, seen: map[string]map[types.UID]*seenJob{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			// A watch without resourceVersion begins with every existing Job,
			// so a restarted watch misses nothing that still exists; UIDs dedupe.
			w, err := c.Watch(ctx, &batchv1.JobList{}, client.MatchingLabels{v1alpha2.LabelManagedBy: v1alpha2.ManagedByController})
			if err != nil {
				l.mu.Lock()
				l.err = err
				l.mu.Unlock()
				time.Sleep(time.Second)
				continue
			}
			for ev := range w.ResultChan() {
				if job, ok := ev.Object.(*batchv1.Job); ok {
					l.record(job, ev.Type)
				}
			}
			w.Stop()
		}
	}()
	return l
}

func (l *jobLog) record(job *batchv1.Job, event watch.EventType) {
	key := job.Namespace + "/" + job.Labels[v1alpha2.LabelFunctionName]
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen[key] == nil {
		l.seen[key] = map[types.UID]*seenJob{}
	}
	j := l.seen[key][job.UID]
	if j == nil {
		if event != watch.Added && event != watch.Modified {
			return
		}
		j = &seenJob{name: job.Name, created: job.CreationTimestamp.Time, state: "running"}
		l.seen[key][job.UID] = j
	}
	for _, c := range job.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			j.ended, j.state = c.Type, string(c.Type)+" "+c.LastTransitionTime.Format(time.TimeOnly)+" "+c.Reason
		}
	}
	if event == watch.Deleted {
		j.state += ", deleted " + time.Now().Format(time.TimeOnly)
	}
}

// count is how many build Jobs the Function has had, at least every one
// that exists now: the watch may lag behind the API server, so it first
// waits until the watch has seen every Job a list returns. Callers poll it,
// so a wait that ends well is not logged.
func (l *jobLog) count(ns, name string) int {
	l.t.Helper()
	key := ns + "/" + name
	err := framework.Poll(l.t.Context(), 30*time.Second, "the Job watch to see every build Job of "+key, func(ctx context.Context) (bool, string, error) {
		var jobs batchv1.JobList
		if err := l.c.List(ctx, &jobs, client.InNamespace(ns), client.MatchingLabels{
			v1alpha2.LabelFunctionName: name, v1alpha2.LabelManagedBy: v1alpha2.ManagedByController}); err != nil {
			return false, "", err
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		var unseen []string
		for _, j := range jobs.Items {
			if _, ok := l.seen[key][j.UID]; !ok {
				unseen = append(unseen, j.Name)
			}
		}
		return len(unseen) == 0, fmt.Sprintf("listed %d, not yet watched: %v (watch error: %v)", len(jobs.Items), unseen, l.err), nil
	})
	if err != nil {
		l.t.Fatal(err.Error())
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.seen[key])
}

// watched is how many build Jobs of the Function the watch has seen so far.
func (l *jobLog) watched(ns, name string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.seen[ns+"/"+name])
}

// names describes the Function's build Jobs as the watch saw them,
// oldest first.
func (l *jobLog) names(ns, name string) []string {
	var out []string
	for _, j := range l.seenJobs(ns, name) {
		out = append(out, j.String())
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		out = append(out, "(watch error: "+l.err.Error()+")")
	}
	return out
}

// seenJobs are copies of what the watch saw of the Function's build Jobs,
// oldest first.
func (l *jobLog) seenJobs(ns, name string) []seenJob {
	l.mu.Lock()
	defer l.mu.Unlock()
	var jobs []seenJob
	for _, j := range l.seen[ns+"/"+name] {
		jobs = append(jobs, *j)
	}
	slices.SortFunc(jobs, func(a, b seenJob) int { return a.created.Compare(b.created) })
	return jobs
}
