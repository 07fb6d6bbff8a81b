package app_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/charts"
	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	fnapp "github.com/kyma-project/serverless-manager/operator/internal/function/app"
	fnconfig "github.com/kyma-project/serverless-manager/operator/internal/function/config"
	"github.com/kyma-project/serverless-manager/operator/internal/manager/reconciler"
	"github.com/kyma-project/serverless-manager/operator/pkg/fips"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
	"github.com/kyma-project/serverless-manager/tests/support/gittest"
	"github.com/kyma-project/serverless-manager/tests/support/repo"
	"github.com/kyma-project/serverless-manager/tests/support/testenv"
	"github.com/kyma-project/serverless-manager/tests/support/upstreamtest"
)

// release1130FIPS is serverless-operator 1.13.0 in FIPS mode: its fixtures,
// and its manifest cache records the chart value its operator rendered
// KYMA_FIPS_MODE_ENABLED into (docs/contributor/upstream-contract.md#fips-mode).
func release1130FIPS() upstreamtest.Release {
	rel := upstreamtest.Release1130()
	rel.Dir = "tests/e2e/testdata/upstream-1.13.0-fips"
	rel.Flags["containers"] = map[string]any{"manager": map[string]any{"fipsModeEnabled": true}}
	return rel
}

// fipsNamespace is where the FIPS fixtures' Functions are.
const fipsNamespace = "functions-113"

// A cluster that serverless-operator 1.13.0 runs in FIPS mode is taken over
// by a manager in FIPS mode (KYMA_FIPS_MODE_ENABLED=true, as Kyma's
// bootstrapper sets it on the manager's Pod too) with no CR edit, and stays
// in FIPS mode: the module's binaries run FIPS 140-only with the FIPS
// runtime images. "No Deployment changed" means what it means for a 1.13
// installation outside FIPS mode (docs/user/technical-reference/04-72):
// upstream's controller Deployment is kept in place (same object) and runs
// the module's controller from then on, which is a new Pod template by
// necessity; every Function's Deployment and Service stays as 1.13 left it,
// not written at all, so no Function's Pod restarts. The Function controller
// runs here with the configuration the manager rendered into its Deployment.
func TestTakeoverOf113InFIPSMode(t *testing.T) {
	env := startEnv(t)
	c := env.Client
	ctx := context.Background()
	// The fixtures' Functions have the L preset of a 3-node cluster.
	for i := range 3 {
		require.NoError(t, c.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%d", i)}}))
	}
	root := repo.MustRoot()
	rel := release1130FIPS()
	inst, err := upstreamtest.LoadRelease(root, rel)
	require.NoError(t, err)
	require.NoError(t, inst.Install(ctx, c))

	gitServer := gittest.NewHTTPServer(t, "fn-user", "fn-password")
	gitRepo := gitServer.Repo(t, "functions")
	commit := gitRepo.Commit(map[string]string{
		"fn/handler.js":   "module.exports = { main: function (event, context) { return \"repo from 1.13\"; } }\n",
		"fn/package.json": "{}\n",
	}, "the Function repo")
	fns, err := upstreamtest.LoadFunctions(root, rel)
	require.NoError(t, err)
	atRunTime := strings.NewReplacer("GIT_URL", gitRepo.URL, "GIT_COMMIT", commit)
	for _, o := range fns {
		o.Object = replaceStrings(o.Object, atRunTime).(map[string]any)
	}
	require.NoError(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fipsNamespace}}))
	require.NoError(t, c.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: fipsNamespace, Name: "git-creds"},
		Type:       corev1.SecretTypeBasicAuth,
		StringData: map[string]string{"username": "fn-user", "password": "fn-password"},
	}))
	require.NoError(t, upstreamtest.InstallFunctions(ctx, c, fns))
	var functions []string
	for _, o := range fns {
		switch o.GetKind() {
		case "Function":
			functions = append(functions, o.GetName())
		case "Deployment":
			markAvailableIn(t, c, fipsNamespace, o.GetName())
		}
	}
	require.ElementsMatch(t, []string{"hello", "repo"}, functions)
	upstreamController := &appsv1.Deployment{}
	require.NoError(t, c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "serverless-ctrl-mngr"}, upstreamController))
	before := functionWorkloads(t, c)
	require.Len(t, before, 4, "a Deployment and a Service per Function")

	startManagerWithFS(t, env, charts.Serverless(), reconciler.Options{FIPSMode: true})
	eventually(t, 60*time.Second, "the takeover to be Ready with the manager's finalizer only", func() (bool, string) {
		cr := getCR(t, c, "default")
		if cr.Status.State == v1alpha1.StateProcessing {
			markChartAvailable(t, c)
		}
		return cr.Status.State == v1alpha1.StateReady && cr.Status.ObservedGeneration == cr.Generation &&
			assert.ObjectsAreEqual([]string{module.Finalizer}, cr.Finalizers), describe(cr)
	})
	cr := getCR(t, c, "default")
	assert.Equal(t, v1alpha1.FunctionModeBuildless, cr.Status.FunctionMode, "1.13 ran buildless; no CR edit")
	err = c.Get(ctx, types.NamespacedName{Namespace: ns, Name: upstreamtest.CacheSecret}, &corev1.Secret{})
	assert.True(t, apierrors.IsNotFound(err), "the manifest cache Secret is gone: %v", err)

	// The module's binaries run in FIPS mode; the controller's Deployment is
	// upstream's, kept in place.
	ctrlDep := &appsv1.Deployment{}
	require.NoError(t, c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "serverless-ctrl-mngr"}, ctrlDep))
	assert.Equal(t, upstreamController.UID, ctrlDep.UID, "upstream's controller Deployment kept, not re-created")
	controllerEnv := containerEnv(t, ctrlDep, "manager")
	assert.Equal(t, "true", controllerEnv[fips.EnvMode])
	assert.Equal(t, fips.GODEBUG, controllerEnv[fips.EnvGODEBUG])
	assert.NotContains(t, controllerEnv, fips.UpstreamEnvMode, "upstream's own switch went with its controller")
	for rt, image := range map[v1alpha2.Runtime]string{
		v1alpha2.RuntimeNodejs22:  "europe-docker.pkg.dev/kyma-project/restricted-prod/function-runtime-nodejs22-fips:1.13.0",
		v1alpha2.RuntimeNodejs24:  "europe-docker.pkg.dev/kyma-project/restricted-prod/function-runtime-nodejs24-fips:1.13.0",
		v1alpha2.RuntimeNodejs20:  "europe-docker.pkg.dev/kyma-project/prod/function-runtime-nodejs20:1.13.0",
		v1alpha2.RuntimePython312: "europe-docker.pkg.dev/kyma-project/prod/function-runtime-python312:1.13.0",
	} {
		assert.Equal(t, image, controllerEnv[fnconfig.EnvRuntimeImage(rt)], "the %s image 1.13 ran in FIPS mode", rt)
	}
	activator := &appsv1.Deployment{}
	require.NoError(t, c.Get(ctx, types.NamespacedName{Namespace: ns, Name: module.Activator().Name}, activator))
	activatorEnv := containerEnv(t, activator, activator.Spec.Template.Spec.Containers[0].Name)
	assert.Equal(t, "true", activatorEnv[fips.EnvMode])
	assert.Equal(t, fips.GODEBUG, activatorEnv[fips.EnvGODEBUG])

	// The Function controller as that Deployment runs it adopts every
	// Function's Deployment and Service without a write.
	cfg, err := fnconfig.Load(func(k string) (string, bool) { v, ok := controllerEnv[k]; return v, ok })
	require.NoError(t, err)
	require.True(t, cfg.FIPSMode)
	writes := startFunctionController(t, env.Config, cfg)
	fnScheme, err := fnapp.NewScheme()
	require.NoError(t, err)
	fc, err := client.New(env.Config, client.Options{Scheme: fnScheme})
	require.NoError(t, err)
	for _, name := range functions {
		eventually(t, 30*time.Second, "Function "+name+" to be reconciled", func() (bool, string) {
			fn := &v1alpha2.Function{}
			if err := fc.Get(ctx, types.NamespacedName{Namespace: fipsNamespace, Name: name}, fn); err != nil {
				return false, err.Error()
			}
			// The first pass writes the status fields 1.13 does not
			// (the security contexts in effect); a Deployment write
			// comes before it in the same pass.
			return writes.has("patch/status Function " + fipsNamespace + "/" + name), fmt.Sprintf("%+v; writes %v", fn.Status.Conditions, writes.list())
		})
		fn := &v1alpha2.Function{}
		require.NoError(t, fc.Get(ctx, types.NamespacedName{Namespace: fipsNamespace, Name: name}, fn))
		for _, typ := range []string{v1alpha2.ConditionConfigurationReady, v1alpha2.ConditionRunning} {
			cond := fn.Status.Condition(typ)
			if assert.NotNil(t, cond, "%s: %s", name, typ) {
				assert.Equal(t, corev1.ConditionTrue, cond.Status, "%s: %s %s: %s", name, typ, cond.Reason, cond.Message)
			}
		}
		assert.Equal(t, fn.Generation, fn.Status.ObservedGeneration, name)
	}
	after := functionWorkloads(t, c)
	assert.Equal(t, before, after, "every Function's Deployment and Service as 1.13 left it")
	for _, w := range writes.list() {
		assert.NotContains(t, w, " Deployment ", "no Deployment written: %s", w)
		assert.NotContains(t, w, " Service ", "no Service written: %s", w)
	}
	assert.Equal(t, "europe-docker.pkg.dev/kyma-project/restricted-prod/function-runtime-nodejs24-fips:1.13.0",
		after["Deployment/hello"].Images[0], "hello runs 1.13's FIPS image still")
}

// workload is what a write to a Function's Deployment or Service would
// change.
type workload struct {
	UID             types.UID
	Generation      int64
	ResourceVersion string
	Images          []string
	Template        *corev1.PodTemplateSpec
	Service         *corev1.ServiceSpec
}

// functionWorkloads are the Deployments and Services in fipsNamespace, by
// kind and Function.
func functionWorkloads(t *testing.T, c client.Client) map[string]workload {
	t.Helper()
	ctx := context.Background()
	out := map[string]workload{}
	deps := &appsv1.DeploymentList{}
	require.NoError(t, c.List(ctx, deps, client.InNamespace(fipsNamespace)))
	for _, d := range deps.Items {
		w := workload{UID: d.UID, Generation: d.Generation, ResourceVersion: d.ResourceVersion, Template: d.Spec.Template.DeepCopy()}
		for _, ctr := range append(d.Spec.Template.Spec.Containers, d.Spec.Template.Spec.InitContainers...) {
			w.Images = append(w.Images, ctr.Image)
		}
		out["Deployment/"+d.Labels[v1alpha2.LabelFunctionName]] = w
	}
	svcs := &corev1.ServiceList{}
	require.NoError(t, c.List(ctx, svcs, client.InNamespace(fipsNamespace)))
	for _, s := range svcs.Items {
		out["Service/"+s.Name] = workload{UID: s.UID, Generation: s.Generation, ResourceVersion: s.ResourceVersion, Service: s.Spec.DeepCopy()}
	}
	return out
}

// containerEnv is the env of d's container name as values; the chart sets
// no other kind.
func containerEnv(t *testing.T, d *appsv1.Deployment, name string) map[string]string {
	t.Helper()
	for _, ctr := range d.Spec.Template.Spec.Containers {
		if ctr.Name != name {
			continue
		}
		out := map[string]string{}
		for _, e := range ctr.Env {
			if e.ValueFrom == nil {
				out[e.Name] = e.Value
			}
		}
		return out
	}
	t.Fatalf("Deployment %s has no container %s", d.Name, name)
	return nil
}

// replaceStrings applies r to every string in v, a decoded JSON value.
func replaceStrings(v any, r *strings.Replacer) any {
	switch v := v.(type) {
	case string:
		return r.Replace(v)
	case map[string]any:
		for k, e := range v {
			v[k] = replaceStrings(e, r)
		}
	case []any:
		for i, e := range v {
			v[i] = replaceStrings(e, r)
		}
	}
	return v
}

// writeLog records the writes of a client: "<verb> <kind> <namespace>/<name>".
type writeLog struct {
	mu     sync.Mutex
	writes []string
}

func (l *writeLog) add(verb string, obj client.Object) {
	kind := fmt.Sprintf("%T", obj)
	kind = kind[strings.LastIndex(kind, ".")+1:]
	if u, ok := obj.(*unstructured.Unstructured); ok {
		kind = u.GetKind()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.writes = append(l.writes, verb+" "+kind+" "+obj.GetNamespace()+"/"+obj.GetName())
}

func (l *writeLog) has(w string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, got := range l.writes {
		if got == w {
			return true
		}
	}
	return false
}

func (l *writeLog) list() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.writes...)
}

// startFunctionController runs the Function controller with cfg, as its
// binary wires it, until the test ends, and records its writes.
func startFunctionController(t *testing.T, rc *rest.Config, cfg fnconfig.Config) *writeLog {
	t.Helper()
	s, err := fnapp.NewScheme()
	require.NoError(t, err)
	cacheOpts, err := fnapp.CacheOptions(&cfg)
	require.NoError(t, err)
	log := &writeLog{}
	mgr := testenv.NewManager(t, rc, ctrl.Options{Scheme: s, Cache: cacheOpts, NewClient: testenv.RecordingClient(log.add)})
	_, err = fnapp.Setup(mgr, fnapp.Options{Config: cfg, Metrics: prometheus.NewRegistry()})
	require.NoError(t, err)
	t.Cleanup(testenv.RunManager(t, mgr))
	return log
}
