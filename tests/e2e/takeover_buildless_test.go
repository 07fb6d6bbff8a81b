//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
	"github.com/kyma-project/serverless-manager/tests/framework"
	"github.com/kyma-project/serverless-manager/tests/support/upstreamtest"
)

// podsOf is what a rollout would change for a Function: its Deployment's
// UID, generation and Pod template, its ReplicaSets and their Pods.
type podsOf struct {
	Deployment  types.UID
	Generation  int64
	Template    corev1.PodTemplateSpec
	ReplicaSets []string
	Pods        []types.UID
}

func (e *env) podsOf(ctx context.Context, fnNS, fn string) (podsOf, error) {
	sel := client.MatchingLabels{v1alpha2.LabelFunctionName: fn, v1alpha2.LabelManagedBy: v1alpha2.ManagedByController}
	var out podsOf
	var ds appsv1.DeploymentList
	if err := e.c.List(ctx, &ds, client.InNamespace(fnNS), sel); err != nil {
		return out, err
	}
	if len(ds.Items) != 1 {
		return out, nil
	}
	out.Deployment, out.Generation, out.Template = ds.Items[0].UID, ds.Items[0].Generation, ds.Items[0].Spec.Template
	var rs appsv1.ReplicaSetList
	if err := e.c.List(ctx, &rs, client.InNamespace(fnNS), sel); err != nil {
		return out, err
	}
	for _, r := range rs.Items {
		out.ReplicaSets = append(out.ReplicaSets, r.Name)
	}
	var pods corev1.PodList
	if err := e.c.List(ctx, &pods, client.InNamespace(fnNS), sel); err != nil {
		return out, err
	}
	for _, p := range pods.Items {
		out.Pods = append(out.Pods, p.UID)
	}
	sort.Strings(out.ReplicaSets)
	sort.Slice(out.Pods, func(i, j int) bool { return out.Pods[i] < out.Pods[j] })
	return out, nil
}

// isRunningBuildless: configured and running for the current generation,
// with no build condition (buildless Functions are never built).
func isRunningBuildless(fn *v1alpha2.Function) bool {
	for _, typ := range []string{v1alpha2.ConditionConfigurationReady, v1alpha2.ConditionRunning} {
		if c := fn.Status.Condition(typ); c == nil || c.Status != corev1.ConditionTrue {
			return false
		}
	}
	return fn.Status.Condition(v1alpha2.ConditionBuildReady) == nil && fn.Status.ObservedGeneration == fn.Generation
}

// A cluster that serverless-operator 1.13.0 runs (buildless) is taken over
// with no CR edit: the manager keeps buildless mode, adopts upstream's
// objects and removes what only upstream's chart had; the Function
// controller adopts every Function's Deployment and Service as they are:
// no Pod restarted, no second Deployment, no new ReplicaSet.
func TestTakeoverOfBuildlessServerless(t *testing.T) {
	e := startManager(t)
	ctx := t.Context()
	require.NoError(t, e.mgr.Stop(), "upstream's operator owns the cluster until the upgrade")
	fnNS, names, before := e.installBuildlessUpstream()

	// The Pods the takeover creates (the module's controller) run for real.
	e.placeModule(framework.RealNode)
	e.mgr = e.runManager("manager-"+t.Name(), e.publishedRuntimes())
	cr := e.waitFor("default", "the takeover to be Ready with the manager's finalizer only", 2*time.Minute, func(cr *v1alpha1.Serverless) bool {
		return cr.Status.State == v1alpha1.StateReady && cr.Status.ObservedGeneration == cr.Generation &&
			assert.ObjectsAreEqual([]string{module.Finalizer}, cr.Finalizers)
	})
	assert.Equal(t, v1alpha1.FunctionModeBuildless, cr.Status.FunctionMode, "the installation was buildless; no CR edit needed")
	assert.Empty(t, cr.Spec.FunctionMode, "the spec is the user's")
	err := e.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: upstreamtest.CacheSecret}, &corev1.Secret{})
	assert.True(t, apierrors.IsNotFound(err), "the manifest cache Secret is gone: %v", err)
	for _, gone := range []client.Object{
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "serverless-config"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "serverless-log-config"}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "serverless-leader-election-role"}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "serverless-manager-role"}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "serverless-manager-rolebinding"}},
	} {
		framework.WaitFor(t, 30*time.Second, "upstream-only "+gone.GetName()+" to be pruned", func(ctx context.Context) (bool, string, error) {
			err := e.c.Get(ctx, client.ObjectKeyFromObject(gone), gone)
			if apierrors.IsNotFound(err) {
				return true, "", nil
			}
			return false, "still there", err
		})
	}
	for _, buildOnly := range []string{"dockerfile-nodejs24", "dockerfile-python312"} {
		err := e.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: buildOnly}, &corev1.ConfigMap{})
		assert.True(t, apierrors.IsNotFound(err), "buildless mode installs no %s: %v", buildOnly, err)
	}
	e.requireConsistent(ctx, cr)

	f := newFnEnv(t, e)
	f.waitReconciled(len(names))
	for _, name := range names {
		fn := f.waitFunction(fnNS, name, "to be Running under the module's controller", time.Minute, isRunningBuildless)
		assert.Equal(t, before[name].Template.Spec.Containers[0].Image, fn.Status.RuntimeImage, name)
	}
	for _, name := range names {
		after, err := e.podsOf(ctx, fnNS, name)
		require.NoError(t, err)
		assert.Equal(t, before[name], after, "Function %s: same Deployment, generation, Pod template, ReplicaSets and Pods", name)
		jobs, deployments, services, configMaps, err := f.children(ctx, fnNS, name)
		require.NoError(t, err)
		assert.Empty(t, jobs, "no build Job for %s", name)
		assert.Len(t, deployments, 1, "one Deployment for %s", name)
		assert.Len(t, services, 1, "one Service for %s", name)
		assert.Empty(t, configMaps, "no source ConfigMap for %s", name)
	}
}

// installBuildlessUpstream installs what serverless-operator 1.13.0 leaves
// in a cluster (fixtures; the Serverless CRD must be there) with its
// Functions, each with its Deployment and Service, in the namespace fnNS,
// and waits until upstream's controller and every Function's Pod are up:
// names are the Functions, before what a rollout would change of each.
// What is left of upstream's installation when the test ends is removed.
func (e *env) installBuildlessUpstream() (fnNS string, names []string, before map[string]podsOf) {
	t, ctx := e.t, e.t.Context()
	t.Helper()
	root := e.cluster.Root()
	rel := upstreamtest.Release1130()
	inst, err := upstreamtest.LoadRelease(root, rel)
	require.NoError(t, err)
	t.Cleanup(func() {
		if err := inst.RemoveLeftovers(context.Background(), e.c); err != nil {
			t.Errorf("removing what is left of 1.13's installation: %v", err)
		}
	})
	require.NoError(t, inst.Install(ctx, e.c))
	fns, err := upstreamtest.LoadFunctions(root, rel)
	require.NoError(t, err)
	fnNS = fns[0].GetNamespace()
	// upstream's Pods (its controller, the Functions' runtime images) are
	// simulated: their images are not pullable here
	e.waitNamespaceGoneIfDeleted(fnNS)
	require.NoError(t, e.cluster.PlacePods(ctx, fnNS, framework.Simulated))
	t.Cleanup(func() { _ = e.cluster.DeleteNamespace(context.Background(), fnNS) })
	require.NoError(t, upstreamtest.InstallFunctions(ctx, e.c, fns))
	for _, o := range fns {
		if o.GetKind() == "Function" {
			names = append(names, o.GetName())
		}
	}
	before = map[string]podsOf{}
	framework.WaitFor(t, time.Minute, "upstream's controller and every Function's Pod to be up", func(ctx context.Context) (bool, string, error) {
		d := &appsv1.Deployment{}
		if err := e.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: controllerName}, d); err != nil {
			return false, "", err
		}
		if d.Status.AvailableReplicas < 1 {
			return false, "upstream's controller not available", nil
		}
		for _, name := range names {
			p, err := e.podsOf(ctx, fnNS, name)
			if err != nil || len(p.Pods) != 1 {
				return false, name + ": Pods not there yet", err
			}
			before[name] = p
		}
		return true, "", nil
	})
	return fnNS, names, before
}

// waitReconciled waits until the Function controller has finished n
// reconciles without error: it has looked at that many Functions.
func (f *fnEnv) waitReconciled(n int) {
	f.t.Helper()
	pod := f.controllerPod()
	var port int32
	for _, p := range pod.Spec.Containers[0].Ports {
		if p.Name == "http-metrics" {
			port = p.ContainerPort
		}
	}
	require.NotZero(f.t, port, "the controller's metrics port")
	addr := net.JoinHostPort(pod.Status.PodIP, fmt.Sprint(port))
	framework.WaitFor(f.t, time.Minute, fmt.Sprintf("the Function controller to reconcile %d Functions", n), func(ctx context.Context) (bool, string, error) {
		body, err := framework.FetchMetrics(ctx, "http://"+addr+"/metrics")
		if err != nil {
			return false, err.Error(), nil
		}
		done, _ := framework.SumSamples(body, "controller_runtime_reconcile_total", `controller="function",result="success"`)
		failed, _ := framework.SumSamples(body, "controller_runtime_reconcile_errors_total", `controller="function"`)
		return int(done) >= n, fmt.Sprintf("%d reconciles, %d errors", int(done), int(failed)), nil
	}, f.dumpController())
}
