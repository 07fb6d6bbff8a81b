package app_test

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	crzap "sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/internal/function/app"
	"github.com/kyma-project/serverless-manager/operator/internal/function/config"
	"github.com/kyma-project/serverless-manager/operator/internal/function/resources"
	"github.com/kyma-project/serverless-manager/tests/support/testenv"
)

const (
	baseNS   = "kyma-system"
	maxJobs  = 2
	backoff  = 2 * time.Second
	eventual = 20 * time.Second
	tick     = 50 * time.Millisecond
)

// writes counts the controller's writes per Function (objects carrying its
// function-name label, and the Function's status).
type writes struct {
	mu sync.Mutex
	n  map[string]map[string]int // namespace/function → "verb kind" → count
}

func (w *writes) add(verb string, obj client.Object) {
	fn := obj.GetLabels()[v1alpha2.LabelFunctionName]
	if _, ok := obj.(*v1alpha2.Function); ok {
		fn = obj.GetName()
	}
	if fn == "" {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	key := obj.GetNamespace() + "/" + fn
	if w.n[key] == nil {
		w.n[key] = map[string]int{}
	}
	w.n[key][fmt.Sprintf("%s %T", verb, obj)]++
}

func (w *writes) of(ns, fn string) map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]int{}
	for k, v := range w.n[ns+"/"+fn] {
		out[k] = v
	}
	return out
}

// all returns every count and starts over.
func (w *writes) all() map[string]map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.n
	w.n = map[string]map[string]int{}
	return out
}

func total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// copyReads counts the controller's GETs of single per-namespace copies
// (registry Secret, Dockerfile ConfigMaps, Function ServiceAccount) from the
// API server, by namespace: the cache should answer them all.
type copyReads struct {
	mu sync.Mutex
	n  map[string]int
}

var copyPath = regexp.MustCompile(`^/api/v1/namespaces/([^/]+)/(secrets/serverless-registry-config-default|configmaps/dockerfile-[a-z0-9]+|serviceaccounts/serverless-function)$`)

func (r *copyReads) wrap(next http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		if m := copyPath.FindStringSubmatch(req.URL.Path); req.Method == http.MethodGet && m != nil {
			r.mu.Lock()
			r.n[m[1]]++
			r.mu.Unlock()
		}
		return next.RoundTrip(req)
	})
}

func (r *copyReads) in(ns string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n[ns]
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

type env struct {
	c         client.Client // test client, straight to the API server
	rest      *rest.Config
	writes    *writes
	copyReads *copyReads
	cfg       config.Config // of the next controller started
	// drainSettle of the next controller started (0: the default).
	drainSettle time.Duration
	stop        func() // stops the running controller
}

// start runs the Function controller (Function reconciler and copies) against
// a real API server, with the base objects in the base namespace; configure
// sets the controller's settings before it starts. With -short the test is
// skipped.
func start(t *testing.T, configure ...func(*env)) *env {
	t.Helper()
	if testing.Short() {
		t.Skip("starts an API server")
	}
	// controller-runtime's logger is global: logs with -v, silence otherwise.
	if testing.Verbose() {
		log.SetLogger(crzap.New(crzap.UseDevMode(true)))
	} else {
		log.SetLogger(logr.Discard())
	}
	te := testenv.Start(t, "charts/serverless/crds")
	scheme, err := app.NewScheme()
	require.NoError(t, err)
	c, err := client.New(te.Config, client.Options{Scheme: scheme})
	require.NoError(t, err)
	e := &env{c: c, rest: te.Config, writes: &writes{n: map[string]map[string]int{}}, copyReads: &copyReads{n: map[string]int{}}, cfg: controllerConfig(t)}
	for _, f := range configure {
		f(e)
	}
	e.startController(t)
	t.Cleanup(func() { e.stop() })
	createBases(t, c)
	return e
}

// quickDrain lets a drain end a second after the last replica went:
// envtest has no node to wait for.
func quickDrain(e *env) { e.drainSettle = time.Second }

// controllerConfig is the configuration of the controller under test.
func controllerConfig(t *testing.T) config.Config {
	t.Helper()
	// Presets as the chart writes them (1024Mi is stored as 1Gi: compared semantically).
	env := map[string]string{config.EnvResourceConfig: `
function:
  resources:
    defaultPreset: S
    presets:
      S: {requestCpu: 100m, requestMemory: 128Mi, limitCpu: 200m, limitMemory: 256Mi}
      M: {requestCpu: 200m, requestMemory: 256Mi, limitCpu: 400m, limitMemory: 1024Mi}
buildJob:
  resources:
    defaultPreset: normal
    presets:
      normal: {requestCpu: 500m, requestMemory: 700Mi, limitCpu: 1100m, limitMemory: 1100Mi}
      fast: {requestCpu: 900m, requestMemory: 1100Mi, limitCpu: 1700m, limitMemory: 1100Mi}
`,
		// The controller's own image runs the build steps, as the chart sets it.
		config.EnvBuildRepoFetcherImage: "europe-docker.pkg.dev/kyma-project/prod/serverless-function-controller:0.1.0",
	}
	cfg, err := config.Load(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	require.NoError(t, err)
	cfg.Build.MaxSimultaneousJobs = maxJobs
	cfg.GitFetchRequeueDuration = backoff
	return cfg
}

// startController starts a controller process (a manager), as the binary does.
func (e *env) startController(t *testing.T) {
	t.Helper()
	scheme, err := app.NewScheme()
	require.NoError(t, err)
	cfg := e.cfg
	cacheOpts, err := app.CacheOptions(&cfg)
	require.NoError(t, err)
	rc := rest.CopyConfig(e.rest)
	rc.WrapTransport = e.copyReads.wrap
	mgr := testenv.NewManager(t, rc, manager.Options{Scheme: scheme, Cache: cacheOpts, NewClient: testenv.RecordingClient(e.writes.add)})
	_, err = app.Setup(mgr, app.Options{Config: cfg, Metrics: prometheus.NewRegistry(), DrainSettle: e.drainSettle})
	require.NoError(t, err)
	e.stop = testenv.RunManager(t, mgr)
}

func createBases(t *testing.T, c client.Client) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: baseNS}}))
	require.NoError(t, c.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: config.DefaultRegistrySecretName, Namespace: baseNS,
			Labels: map[string]string{v1alpha2.LabelConfig: v1alpha2.ConfigCredentials}},
		Type: corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{
			"isInternal": []byte("false"), "registryAddress": []byte("registry.example:5000"),
			corev1.DockerConfigJsonKey: []byte(`{"auths":{}}`),
		},
	}))
	require.NoError(t, c.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{
		Name: config.DefaultImagePullAccountName, Namespace: baseNS,
		Labels: map[string]string{v1alpha2.LabelConfig: v1alpha2.ConfigServiceAccount}}}))
	for _, rt := range v1alpha2.Runtimes() {
		require.NoError(t, c.Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: resources.DockerfileConfigMapName(rt), Namespace: baseNS,
				Labels: map[string]string{v1alpha2.LabelConfig: v1alpha2.ConfigRuntime}},
			Data: map[string]string{"Dockerfile": fmt.Sprintf("ARG base_image=example.org/function-runtime-%s:1\nFROM ${base_image}\n", rt)},
		}))
	}
}

func (e *env) namespace(t *testing.T, name string) string {
	t.Helper()
	require.NoError(t, e.c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}))
	return name
}

func (e *env) createFunction(t *testing.T, ns, name string) {
	t.Helper()
	require.NoError(t, e.c.Create(context.Background(), &v1alpha2.Function{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1alpha2.FunctionSpec{
			Runtime: v1alpha2.RuntimePython312,
			Source: v1alpha2.Source{Inline: &v1alpha2.InlineSource{
				Source: fmt.Sprintf("def main(event, context):\n    return %q\n", name)}},
			Replicas: ptr.To[int32](1),
		},
	}))
}

func (e *env) function(t require.TestingT, ns, name string) *v1alpha2.Function {
	fn := &v1alpha2.Function{}
	require.NoError(t, e.c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, fn))
	return fn
}

// edit changes a Function with a retry on conflicts.
func (e *env) edit(t *testing.T, ns, name string, change func(*v1alpha2.Function)) {
	t.Helper()
	require.Eventually(t, func() bool {
		fn := e.function(t, ns, name)
		change(fn)
		return e.c.Update(context.Background(), fn) == nil
	}, eventual, tick)
}

func children[L client.ObjectList](t require.TestingT, e *env, ns, fn string, list L) L {
	require.NoError(t, e.c.List(context.Background(), list, client.InNamespace(ns),
		client.MatchingLabels{v1alpha2.LabelFunctionName: fn}))
	return list
}

func (e *env) jobs(t require.TestingT, ns, fn string) []batchv1.Job {
	return children(t, e, ns, fn, &batchv1.JobList{}).Items
}

func (e *env) deployments(t require.TestingT, ns, fn string) []appsv1.Deployment {
	return children(t, e, ns, fn, &appsv1.DeploymentList{}).Items
}

func unfinished(jobs []batchv1.Job) []batchv1.Job {
	var out []batchv1.Job
	for _, j := range jobs {
		done := false
		for _, c := range j.Status.Conditions {
			if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
				done = true
			}
		}
		if !done {
			out = append(out, j)
		}
	}
	return out
}

// finishJob sets a Job's status as the Job controller would (there is none
// in envtest): success or failure with the intermediate condition the API
// server requires.
func (e *env) finishJob(t *testing.T, j batchv1.Job, succeed bool) {
	t.Helper()
	now := metav1.Now()
	start := metav1.NewTime(now.Add(-5 * time.Second))
	j.Status.StartTime = &start
	if succeed {
		j.Status.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, Reason: "CompletionsReached", LastTransitionTime: now},
			{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, Reason: "CompletionsReached", LastTransitionTime: now},
		}
		j.Status.Succeeded, j.Status.CompletionTime = 1, &now
	} else {
		j.Status.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit", LastTransitionTime: now},
			{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit", LastTransitionTime: now},
		}
		j.Status.Failed = 1
	}
	require.NoError(t, e.c.Status().Update(context.Background(), &j))
}

// readyDeployment sets the Deployment's status as the Deployment controller would.
func (e *env) readyDeployment(t *testing.T, d appsv1.Deployment) {
	t.Helper()
	d.Status = appsv1.DeploymentStatus{
		ObservedGeneration: d.Generation, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1,
		Conditions: []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable", Message: "ok"},
			{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable", Message: "ok"},
		},
	}
	require.NoError(t, e.c.Status().Update(context.Background(), &d))
}

// conditionOf is fn's condition of type typ, empty when fn has none (for
// assertions and polls on a condition that may not be set yet).
func conditionOf(fn *v1alpha2.Function, typ string) v1alpha2.Condition {
	if c := fn.Status.Condition(typ); c != nil {
		return *c
	}
	return v1alpha2.Condition{}
}

func (e *env) waitCondition(t *testing.T, ns, name, typ string, status corev1.ConditionStatus, reason string) *v1alpha2.Function {
	t.Helper()
	var fn *v1alpha2.Function
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		fn = e.function(c, ns, name)
		got := conditionOf(fn, typ)
		assert.Equal(c, status, got.Status, "%s %s", typ, got.Message)
		assert.Equal(c, reason, got.Reason, "%s %s", typ, got.Message)
	}, eventual, tick)
	return fn
}

// runFunction takes a new Function to Running and returns it.
func (e *env) runFunction(t *testing.T, ns, name string) *v1alpha2.Function {
	t.Helper()
	e.createFunction(t, ns, name)
	e.waitCondition(t, ns, name, v1alpha2.ConditionBuildReady, corev1.ConditionUnknown, v1alpha2.ReasonJobCreated)
	jobs := e.jobs(t, ns, name)
	require.Len(t, jobs, 1)
	e.finishJob(t, jobs[0], true)
	e.readyDeployment(t, e.waitDeployment(t, ns, name))
	return e.waitCondition(t, ns, name, v1alpha2.ConditionRunning, corev1.ConditionTrue, v1alpha2.ReasonDeploymentReady)
}

// waitDeployment waits for the Function's one Deployment.
func (e *env) waitDeployment(t *testing.T, ns, name string) appsv1.Deployment {
	t.Helper()
	return waitOne(t, func(c require.TestingT) []appsv1.Deployment { return e.deployments(c, ns, name) })
}

// waitOne waits until list returns exactly one object and returns it.
func waitOne[T any](t *testing.T, list func(c require.TestingT) []T) T {
	t.Helper()
	var one T
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		if got := list(c); assert.Len(c, got, 1) {
			one = got[0]
		}
	}, eventual, tick)
	return one
}

// finishAll completes every unfinished Job of ns, so the build slots are free
// for the next test.
func (e *env) finishAll(t *testing.T, ns string) {
	t.Helper()
	var l batchv1.JobList
	require.NoError(t, e.c.List(context.Background(), &l, client.InNamespace(ns)))
	for _, j := range unfinished(l.Items) {
		e.finishJob(t, j, true)
	}
}
