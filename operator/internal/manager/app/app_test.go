package app_test

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/app"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/reconciler"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/watch"
	"github.com/kyma-project/serverless-manager/operator/pkg/kinds"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
	"github.com/kyma-project/serverless-manager/tests/support/testenv"
)

const ns = "kyma-system"

// startManager runs the real controller against env with the fixture chart
// until the test ends.
func startManager(t *testing.T, env *testenv.Env) {
	t.Helper()
	startManagerWithChart(t, env, "chart")
}

// startManagerWithChart runs the controller with testdata/<chart> and
// returns a function that stops it (also called when the test ends).
func startManagerWithChart(t *testing.T, env *testenv.Env, chart string) (stop func()) {
	t.Helper()
	return startManagerWith(t, env, chart, reconciler.Options{})
}

// startManagerWith runs the controller with testdata/<chart> and options
// (namespace, secrets and short rechecks are filled in).
func startManagerWith(t *testing.T, env *testenv.Env, chart string, opts reconciler.Options) (stop func()) {
	t.Helper()
	return startManagerWithFS(t, env, os.DirFS(filepath.Join("testdata", chart)), opts)
}

// startManagerWithFS runs the controller with the chart in chart (e.g. the
// module's own, charts.Serverless()).
func startManagerWithFS(t *testing.T, env *testenv.Env, chart fs.FS, opts reconciler.Options) (stop func()) {
	t.Helper()
	s, err := watch.NewScheme()
	require.NoError(t, err)
	cacheOpts, err := watch.CacheOptions(s)
	require.NoError(t, err)
	mgr := testenv.NewManager(t, env.Config, ctrl.Options{Scheme: s, Cache: cacheOpts})
	n := 0
	opts.Namespace = ns
	opts.NewSecret = func(l int) string { n++; return fmt.Sprintf("secret%d-%d", n, l) }
	// Short rechecks keep the uninstall tests quick.
	if opts.FunctionsRecheck == 0 {
		opts.FunctionsRecheck = 300 * time.Millisecond
	}
	opts.DeletionRecheck = 200 * time.Millisecond
	_, err = app.Setup(mgr, app.Options{
		Chart:   chart,
		Options: opts,
	})
	require.NoError(t, err)
	stop = testenv.RunManager(t, mgr)
	t.Cleanup(stop)
	return stop
}

func startEnv(t *testing.T) *testenv.Env {
	env := testenv.Start(t, "config/crd/bases")
	require.NoError(t, env.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	return env
}

// eventually polls cond until it holds or the timeout passes, then fails
// with cond's last explanation.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for time.Now().Before(deadline) {
		ok, msg := cond()
		if ok {
			return
		}
		last = msg
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("timed out after %s waiting for %s; last: %s", timeout, what, last)
}

func getCR(t *testing.T, c client.Client, name string) *v1alpha1.Serverless {
	t.Helper()
	cr := &v1alpha1.Serverless{}
	require.NoError(t, c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, cr))
	return cr
}

func describe(cr *v1alpha1.Serverless) string {
	var conds []string
	for _, c := range cr.Status.Conditions {
		conds = append(conds, fmt.Sprintf("%s=%s(%s: %s)", c.Type, c.Status, c.Reason, c.Message))
	}
	return fmt.Sprintf("state=%s served=%s gen=%d observed=%d %s", cr.Status.State, cr.Status.Served, cr.Generation, cr.Status.ObservedGeneration, strings.Join(conds, " "))
}

func waitState(t *testing.T, c client.Client, name string, state v1alpha1.State) *v1alpha1.Serverless {
	t.Helper()
	var cr *v1alpha1.Serverless
	eventually(t, 20*time.Second, fmt.Sprintf("Serverless %s to be %s", name, state), func() (bool, string) {
		cr = getCR(t, c, name)
		return cr.Status.State == state && cr.Status.ObservedGeneration == cr.Generation, describe(cr)
	})
	return cr
}

// markAvailable plays kube-controller-manager: the Deployment of the
// manager's namespace rolled out.
func markAvailable(t *testing.T, c client.Client, name string) {
	t.Helper()
	markAvailableIn(t, c, ns, name)
}

// markChartAvailable plays kube-controller-manager for the Deployments the
// real chart always renders: the Function controller and the activator.
func markChartAvailable(t *testing.T, c client.Client) {
	t.Helper()
	for _, name := range []string{"serverless-ctrl-mngr", module.Activator().Name} {
		markAvailable(t, c, name)
	}
}

// updateCR changes a CR, retrying when the manager wrote its status meanwhile.
func updateCR(t *testing.T, c client.Client, name string, change func(cr *v1alpha1.Serverless)) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cr := getCR(t, c, name)
		change(cr)
		return c.Update(context.Background(), cr)
	})
	require.NoError(t, err)
}

func newCR(name string, spec v1alpha1.ServerlessSpec) *v1alpha1.Serverless {
	return &v1alpha1.Serverless{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: spec}
}

// resourceVersions of every object labelled as the module's.
func resourceVersions(t *testing.T, c client.Client) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, k := range kinds.Managed() {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(k.GVK.GroupVersion().WithKind(k.GVK.Kind + "List"))
		require.NoError(t, c.List(context.Background(), list, client.MatchingLabels(module.Labels())))
		for _, o := range list.Items {
			out[k.GVK.Kind+"/"+o.Namespace+"/"+o.Name] = o.ResourceVersion
		}
	}
	return out
}

func TestInstallSteadyStateChangeDriftAndUninstall(t *testing.T) {
	env := startEnv(t)
	c := env.Client
	ctx := context.Background()
	startManager(t, env)

	require.NoError(t, c.Create(ctx, newCR("default", v1alpha1.ServerlessSpec{
		FunctionBuildExecutorArgs:        "--insecure,--cache=true,--log-format=text",
		FunctionBuildMaxSimultaneousJobs: ptr.To(intstr.FromInt32(12)),
	})))

	// Until the controller Deployment is available, the CR is Processing and says why.
	eventually(t, 20*time.Second, "Processing naming the Deployment", func() (bool, string) {
		cr := getCR(t, c, "default")
		cond := meta.FindStatusCondition(cr.Status.Conditions, v1alpha1.ConditionInstalled)
		return cr.Status.State == v1alpha1.StateProcessing && cond != nil &&
			strings.Contains(cond.Message, "Deployment kyma-system/fixture-controller"), describe(cr)
	})
	markAvailable(t, c, "fixture-controller")
	cr := waitState(t, c, "default", v1alpha1.StateReady)
	assert.Equal(t, metav1.ConditionTrue, cr.Status.Served)
	assert.True(t, meta.IsStatusConditionTrue(cr.Status.Conditions, v1alpha1.ConditionInstalled))
	assert.True(t, meta.IsStatusConditionTrue(cr.Status.Conditions, v1alpha1.ConditionConfigured))
	assert.Equal(t, "0.0.1", cr.Status.ChartVersion)
	assert.Equal(t, "XS", cr.Status.DefaultRuntimePodPreset, "no nodes in envtest: small-cluster default")
	assert.Contains(t, cr.Finalizers, module.Finalizer)

	// Every applied object carries the module labels and the digest; the
	// comma-separated and numeric values reached the workload intact.
	d := &appsv1.Deployment{}
	require.NoError(t, c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "fixture-controller"}, d))
	assert.Equal(t, module.ManagedBy, d.Labels[module.LabelManagedBy])
	assert.Equal(t, "serverless", d.Labels[module.LabelPartOf])
	assert.Equal(t, "serverless", d.Labels[module.LabelModule])
	assert.NotEmpty(t, d.Annotations[module.DigestAnnotation])
	env0 := d.Spec.Template.Spec.Containers[0].Env
	assert.Equal(t, "--insecure,--cache=true,--log-format=text", env0[0].Value)
	assert.Equal(t, "12", env0[1].Value)
	ids := []string{}
	for _, e := range cr.Status.Inventory {
		ids = append(ids, e.ID)
	}
	assert.ElementsMatch(t, []string{
		"apiextensions.k8s.io/CustomResourceDefinition//widgets.fixture.example.com",
		"/ConfigMap/kyma-system/fixture-log-config",
		"/Secret/kyma-system/serverless-registry-config-default",
		"/ServiceAccount/kyma-system/fixture-controller",
		"apps/Deployment/kyma-system/fixture-controller",
	}, ids)

	// Steady state: a reconcile with nothing changed writes nothing.
	before := resourceVersions(t, c)
	crRV := cr.ResourceVersion
	updateCR(t, c, "default", func(cr *v1alpha1.Serverless) { cr.Annotations = map[string]string{"test/poke": "1"} })
	time.Sleep(time.Second)
	assert.Equal(t, before, resourceVersions(t, c), "no object may be written when nothing changed")
	cr = getCR(t, c, "default")
	assert.Equal(t, v1alpha1.StateReady, cr.Status.State)
	assert.NotEqual(t, crRV, cr.ResourceVersion) // our own annotation update

	// A change applies only what it changes: logLevel lives in the ConfigMap.
	updateCR(t, c, "default", func(cr *v1alpha1.Serverless) { cr.Spec.LogLevel = "debug" })
	eventually(t, 10*time.Second, "the log level to reach the ConfigMap", func() (bool, string) {
		cm := &corev1.ConfigMap{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "fixture-log-config"}, cm); err != nil {
			return false, err.Error()
		}
		return strings.Contains(cm.Data["log-config.yaml"], "logLevel: debug"), cm.Data["log-config.yaml"]
	})
	cr = waitState(t, c, "default", v1alpha1.StateReady)
	assert.Equal(t, "debug", cr.Status.LogLevel)
	after := resourceVersions(t, c)
	for id, rv := range before {
		if id == "ConfigMap/kyma-system/fixture-log-config" {
			assert.NotEqual(t, rv, after[id], id)
			continue
		}
		assert.Equal(t, rv, after[id], "%s must not be written for a log level change", id)
	}
	events := &corev1.EventList{}
	eventually(t, 5*time.Second, "an event for the changed value", func() (bool, string) {
		require.NoError(t, c.List(ctx, events, client.InNamespace(ns)))
		for _, e := range events.Items {
			if strings.Contains(e.Message, "logLevel set from info to debug") {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d events", len(events.Items))
	})

	// Objects that join the chart are applied (after their CRD); objects that
	// leave it are pruned.
	updateCR(t, c, "default", func(cr *v1alpha1.Serverless) { cr.Spec.EnableNetworkPolicies = true })
	eventually(t, 10*time.Second, "the optional objects to be applied", func() (bool, string) {
		cr := getCR(t, c, "default")
		return len(cr.Status.Inventory) == 7 && cr.Status.State == v1alpha1.StateReady, describe(cr)
	})
	updateCR(t, c, "default", func(cr *v1alpha1.Serverless) { cr.Spec.EnableNetworkPolicies = false })
	eventually(t, 10*time.Second, "the optional objects to be pruned", func() (bool, string) {
		err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "fixture-allow-all"}, &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"}})
		cr := getCR(t, c, "default")
		return apierrors.IsNotFound(err) && len(cr.Status.Inventory) == 5, fmt.Sprintf("get: %v; inventory %d", err, len(cr.Status.Inventory))
	})

	// Drift: a deleted object comes back, an edited one is restored.
	require.NoError(t, c.Delete(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fixture-controller"}}))
	cm := &corev1.ConfigMap{}
	require.NoError(t, c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "fixture-log-config"}, cm))
	cm.Data["log-config.yaml"] = "logLevel: error\n"
	require.NoError(t, c.Update(ctx, cm))
	eventually(t, 10*time.Second, "drift to be repaired", func() (bool, string) {
		sa := &corev1.ServiceAccount{}
		saErr := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "fixture-controller"}, sa)
		require.NoError(t, c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "fixture-log-config"}, cm))
		return saErr == nil && strings.Contains(cm.Data["log-config.yaml"], "logLevel: debug"), fmt.Sprintf("sa: %v, cm: %q", saErr, cm.Data["log-config.yaml"])
	})

	// Uninstall removes everything labelled as the module's, then the finalizer.
	require.NoError(t, c.Delete(ctx, getCR(t, c, "default")))
	eventually(t, 20*time.Second, "the CR to be gone", func() (bool, string) {
		cr := &v1alpha1.Serverless{}
		err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "default"}, cr)
		return apierrors.IsNotFound(err), describe(cr)
	})
	assert.Empty(t, resourceVersions(t, c), "nothing labelled as the module's may remain")
	crd := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"}}
	assert.True(t, apierrors.IsNotFound(c.Get(ctx, types.NamespacedName{Name: "widgets.fixture.example.com"}, crd)))
}
