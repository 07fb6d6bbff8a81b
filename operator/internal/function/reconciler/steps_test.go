package reconciler

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/internal/function/resources"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
)

func (f *fixture) jobs(t *testing.T) []batchv1.Job {
	t.Helper()
	var l batchv1.JobList
	require.NoError(t, f.client.List(context.Background(), &l, client.InNamespace(testNS)))
	return l.Items
}

func (f *fixture) deployments(t *testing.T) []appsv1.Deployment {
	t.Helper()
	var l appsv1.DeploymentList
	require.NoError(t, f.client.List(context.Background(), &l, client.InNamespace(testNS)))
	return l.Items
}

func (f *fixture) finishJob(t *testing.T, j *batchv1.Job, typ batchv1.JobConditionType, reason string) {
	t.Helper()
	start := metav1.NewTime(f.now.Add(-10 * time.Second))
	j.Status.StartTime = &start
	j.Status.Conditions = append(j.Status.Conditions, batchv1.JobCondition{
		Type: typ, Status: corev1.ConditionTrue, Reason: reason, Message: "the message", LastTransitionTime: metav1.NewTime(f.now),
	})
	if typ == batchv1.JobComplete {
		end := metav1.NewTime(f.now)
		j.Status.CompletionTime = &end
		j.Status.Succeeded = 1
	} else {
		j.Status.Failed = 1
	}
	require.NoError(t, f.client.Status().Update(context.Background(), j))
	f.writes.take()
}

func assertCondition(t *testing.T, fn *v1alpha2.Function, typ string, status corev1.ConditionStatus, reason string) *v1alpha2.Condition {
	t.Helper()
	c := fn.Status.Condition(typ)
	if assert.NotNil(t, c, "condition %s", typ) {
		assert.Equal(t, status, c.Status, "%s: %s", typ, c.Message)
		assert.Equal(t, reason, c.Reason, "%s: %s", typ, c.Message)
	}
	return c
}

func TestInlineFunctionFromSourceToDeployment(t *testing.T) {
	fn := newFunction("hello")
	f := newFixture(t, append(prerequisites(testNS), fn)...)

	// Pass 1: source ConfigMap, build Job, one status write.
	f.reconcile(t, "hello")
	assert.Equal(t, map[string]int{"create *v1.ConfigMap": 1, "create *v1.Job": 1, "patch/status *v1alpha2.Function": 1}, f.writes.take())
	got := f.function(t, "hello")
	assertCondition(t, got, v1alpha2.ConditionConfigurationReady, corev1.ConditionTrue, v1alpha2.ReasonConfigMapCreated)
	assertCondition(t, got, v1alpha2.ConditionBuildReady, corev1.ConditionUnknown, v1alpha2.ReasonJobCreated)
	assert.Equal(t, int64(1), got.Status.ObservedGeneration)
	assert.Equal(t, "example.org/runtime-nodejs22:1", got.Status.RuntimeImage)
	assert.Equal(t, resources.PodSelector(fn), got.Status.PodSelector)
	jobs := f.jobs(t)
	require.Len(t, jobs, 1)
	assert.Equal(t, "1", jobs[0].Annotations[AnnotationGeneration])

	// Pass 2, nothing changed (e.g. the Job's own create event): no write at all.
	f.reconcile(t, "hello")
	assert.Empty(t, f.writes.take())

	// The Job finishes: Deployment and Service, build remembered.
	f.finishJob(t, &jobs[0], batchv1.JobComplete, "CompletionsReached")
	f.reconcile(t, "hello")
	assert.Equal(t, map[string]int{"create *v1.Deployment": 1, "create *v1.Service": 1, "patch/status *v1alpha2.Function": 1}, f.writes.take())
	got = f.function(t, "hello")
	assertCondition(t, got, v1alpha2.ConditionBuildReady, corev1.ConditionTrue, v1alpha2.ReasonJobFinished)
	assertCondition(t, got, v1alpha2.ConditionRunning, corev1.ConditionUnknown, v1alpha2.ReasonDeploymentCreated)
	deps := f.deployments(t)
	require.Len(t, deps, 1)
	assert.Equal(t, deps[0].Spec.Template.Spec.Containers[0].Image, got.Status.BuiltImage)
	assert.Contains(t, got.Status.BuiltImage, "registry.example:5000/fn-test-hello:")

	// The Deployment becomes available: Running True, one Normal event.
	dep := deps[0]
	dep.Status = appsv1.DeploymentStatus{ObservedGeneration: dep.Generation, Replicas: 1, Conditions: []appsv1.DeploymentCondition{
		depCond(appsv1.DeploymentAvailable, corev1.ConditionTrue, "MinimumReplicasAvailable"),
		depCond(appsv1.DeploymentProgressing, corev1.ConditionTrue, "NewReplicaSetAvailable"),
	}}
	require.NoError(t, f.client.Status().Update(context.Background(), &dep))
	f.writes.take()
	f.reconcile(t, "hello")
	assert.Equal(t, map[string]int{"patch/status *v1alpha2.Function": 1}, f.writes.take())
	got = f.function(t, "hello")
	assertCondition(t, got, v1alpha2.ConditionRunning, corev1.ConditionTrue, v1alpha2.ReasonDeploymentReady)
	assert.Equal(t, int32(1), got.Status.Replicas)
	assert.Empty(t, f.rec.events, "a first rollout as expected is in the status only")

	assert.Equal(t, 1.0, f.counter(t, "serverless_function_builds_started_total"))
	// The build of 10 s is observed once.
	count, sum := f.histogram(t, "serverless_function_build_duration_seconds")
	assert.Equal(t, uint64(1), count)
	assert.Equal(t, 10.0, sum)

	// Steady state, and after the Job's TTL removed it: nothing to do, no rebuild.
	require.NoError(t, f.client.Delete(context.Background(), &jobs[0]))
	f.writes.take()
	f.reconcile(t, "hello")
	assert.Empty(t, f.writes.take())
	assert.Empty(t, f.jobs(t))
}

func TestEnvChangeRollsTheDeploymentWithoutABuild(t *testing.T) {
	fn := newFunction("hello")
	f := newFixture(t, append(prerequisites(testNS), fn)...)
	f.reconcile(t, "hello")
	jobs := f.jobs(t)
	f.finishJob(t, &jobs[0], batchv1.JobComplete, "CompletionsReached")
	f.reconcile(t, "hello")
	f.writes.take()

	got := f.function(t, "hello")
	got.Spec.Env = []corev1.EnvVar{{Name: "GREETING", Value: "hi"}}
	got.Generation = 2
	require.NoError(t, f.client.Update(context.Background(), got))
	f.writes.take()
	f.reconcile(t, "hello")
	assert.Equal(t, map[string]int{"update *v1.Deployment": 1, "patch/status *v1alpha2.Function": 1}, f.writes.take())
	dep := f.deployments(t)[0]
	assert.Equal(t, "GREETING", dep.Spec.Template.Spec.Containers[0].Env[0].Name)
	got = f.function(t, "hello")
	assertCondition(t, got, v1alpha2.ConditionRunning, corev1.ConditionUnknown, v1alpha2.ReasonDeploymentUpdated)
	assert.Equal(t, int64(2), got.Status.ObservedGeneration)
	assert.Len(t, f.jobs(t), 1, "no new Job")
}

func TestSourceChangeBuildsOnceAndKeepsTheRunningImage(t *testing.T) {
	fn := newFunction("hello")
	f := newFixture(t, append(prerequisites(testNS), fn)...)
	f.reconcile(t, "hello")
	jobs := f.jobs(t)
	f.finishJob(t, &jobs[0], batchv1.JobComplete, "CompletionsReached")
	f.reconcile(t, "hello")
	oldImage := f.deployments(t)[0].Spec.Template.Spec.Containers[0].Image
	f.writes.take()

	got := f.function(t, "hello")
	got.Spec.Source.Inline.Source = "module.exports = { main: () => 'bye' }"
	got.Generation = 2
	require.NoError(t, f.client.Update(context.Background(), got))
	f.writes.take()
	f.reconcile(t, "hello")
	f.reconcile(t, "hello")
	assert.Equal(t, map[string]int{"update *v1.ConfigMap": 1, "create *v1.Job": 1, "patch/status *v1alpha2.Function": 1}, f.writes.take())
	assert.Len(t, f.jobs(t), 2)
	assert.Equal(t, oldImage, f.deployments(t)[0].Spec.Template.Spec.Containers[0].Image, "the running image stays until the build ends")
	got = f.function(t, "hello")
	assertCondition(t, got, v1alpha2.ConditionConfigurationReady, corev1.ConditionTrue, v1alpha2.ReasonConfigMapUpdated)
	assertCondition(t, got, v1alpha2.ConditionBuildReady, corev1.ConditionUnknown, v1alpha2.ReasonJobCreated)
}

func TestFailedBuildIsReportedAndRetriedAfterTheBackoff(t *testing.T) {
	fn := newFunction("hello")
	f := newFixture(t, append(prerequisites(testNS), fn)...)
	f.reconcile(t, "hello")
	jobs := f.jobs(t)
	f.finishJob(t, &jobs[0], batchv1.JobFailed, "DeadlineExceeded")

	requeue := f.reconcile(t, "hello")
	assert.Equal(t, 30*time.Second, requeue)
	got := f.function(t, "hello")
	c := assertCondition(t, got, v1alpha2.ConditionBuildReady, corev1.ConditionFalse, v1alpha2.ReasonJobFailed)
	assert.Contains(t, c.Message, "DeadlineExceeded: the message")
	assert.Equal(t, []recorded{{corev1.EventTypeWarning, v1alpha2.ReasonJobFailed, c.Message}}, f.rec.events)
	assert.Empty(t, f.deployments(t))
	f.writes.take()

	assert.Equal(t, 1.0, f.counter(t, "serverless_function_builds_failed_total"))

	// Within the backoff: nothing.
	f.now = f.now.Add(10 * time.Second)
	assert.Equal(t, 20*time.Second, f.reconcile(t, "hello"))
	assert.Empty(t, f.writes.take())

	// After it: the failed Job goes, a new one comes.
	f.now = f.now.Add(20 * time.Second)
	assert.Zero(t, f.reconcile(t, "hello"))
	assert.Equal(t, map[string]int{"delete *v1.Job": 1, "create *v1.Job": 1, "patch/status *v1alpha2.Function": 1}, f.writes.take())
	left := f.jobs(t)
	require.Len(t, left, 1)
	assert.NotEqual(t, jobs[0].Name, left[0].Name)
	assertCondition(t, f.function(t, "hello"), v1alpha2.ConditionBuildReady, corev1.ConditionUnknown, v1alpha2.ReasonJobCreated)

	// The second failure waits twice as long.
	f.finishJob(t, &left[0], batchv1.JobFailed, "BackoffLimitExceeded")
	assert.Equal(t, time.Minute, f.reconcile(t, "hello"))
	f.reconcile(t, "hello")
	assert.Equal(t, 2.0, f.counter(t, "serverless_function_builds_failed_total"), "each failure counted once")
	assert.Equal(t, 2.0, f.counter(t, "serverless_function_builds_started_total"))
}

// capFixture: Functions a, b and c and 2 build slots, each Function
// reconciled once (c waits for a slot).
func capFixture(t *testing.T) *fixture {
	t.Helper()
	objs := prerequisites(testNS)
	for _, n := range []string{"a", "b", "c"} {
		objs = append(objs, newFunction(n))
	}
	f := newFixture(t, objs...)
	for _, n := range []string{"a", "b", "c"} {
		f.reconcile(t, n)
	}
	return f
}

func TestBuildCapMakesFunctionsWait(t *testing.T) {
	f := capFixture(t)
	assert.Len(t, f.jobs(t), 2, "cap of 2")
	c := assertCondition(t, f.function(t, "c"), v1alpha2.ConditionBuildReady, corev1.ConditionUnknown, v1alpha2.ReasonJobQueued)
	assert.Equal(t, "queued behind the build limit: 2 of 2 builds running, 0 ahead of it in the queue", c.Message)
	assert.Equal(t, []types.NamespacedName{{Namespace: testNS, Name: "c"}}, f.r.slots.Waiting(2))

	jobs := f.jobs(t)
	f.finishJob(t, &jobs[0], batchv1.JobComplete, "CompletionsReached")
	f.writes.take()
	// A slot is free: c's build starts. That is the status's only news, so
	// the status waits for the build to end, up to progressReportDelay.
	assert.Equal(t, progressReportDelay, f.reconcile(t, "c"))
	assert.Equal(t, map[string]int{"create *v1.Job": 1}, f.writes.take())
	assert.Empty(t, f.r.slots.Waiting(2))
	assertCondition(t, f.function(t, "c"), v1alpha2.ConditionBuildReady, corev1.ConditionUnknown, v1alpha2.ReasonJobQueued)

	// Still running after it: reported once.
	f.now = f.now.Add(progressReportDelay)
	f.reconcile(t, "c")
	f.reconcile(t, "c")
	assert.Equal(t, map[string]int{"patch/status *v1alpha2.Function": 1}, f.writes.take())
	assertCondition(t, f.function(t, "c"), v1alpha2.ConditionBuildReady, corev1.ConditionUnknown, v1alpha2.ReasonJobRunning)
}

func TestQuickBuildIsReportedOnceItEnds(t *testing.T) {
	f := capFixture(t)
	jobs := f.jobs(t)
	f.finishJob(t, &jobs[0], batchv1.JobComplete, "CompletionsReached")
	f.writes.take()
	f.reconcile(t, "c")
	var built batchv1.Job
	for _, j := range f.jobs(t) {
		if j.Labels[v1alpha2.LabelFunctionName] == "c" {
			built = j
		}
	}
	require.NotEmpty(t, built.Name)
	started := f.writes.take()

	// The build ends within progressReportDelay: from the waiting status,
	// one write says it is built (no "Job created" before it).
	f.finishJob(t, &built, batchv1.JobComplete, "CompletionsReached")
	f.now = f.now.Add(progressReportDelay / 2)
	f.reconcile(t, "c")
	ended := f.writes.take()
	const patch = "patch/status *v1alpha2.Function"
	assert.Equal(t, 1, started[patch]+ended[patch], "build started: %v, ended: %v", started, ended)
	assertCondition(t, f.function(t, "c"), v1alpha2.ConditionBuildReady, corev1.ConditionTrue, v1alpha2.ReasonJobFinished)
}

func TestOnlyBuildNews(t *testing.T) {
	t0 := metav1.Date(2026, 2, 1, 12, 0, 0, 0, time.UTC)
	waiting := func() *v1alpha2.FunctionStatus {
		st := &v1alpha2.FunctionStatus{RuntimeImage: "base:1"}
		setCondition(st, v1alpha2.ConditionConfigurationReady, corev1.ConditionTrue, v1alpha2.ReasonConfigMapCreated, "ok", t0)
		setCondition(st, v1alpha2.ConditionBuildReady, corev1.ConditionUnknown, v1alpha2.ReasonJobWaiting, "waiting", t0)
		return st
	}
	tests := []struct {
		name string
		old  *v1alpha2.FunctionStatus
		edit func(*v1alpha2.FunctionStatus)
		want bool
	}{
		{name: "a Job started", old: waiting(), want: true, edit: func(st *v1alpha2.FunctionStatus) {
			setCondition(st, v1alpha2.ConditionBuildReady, corev1.ConditionUnknown, v1alpha2.ReasonJobCreated, "Job x created", t0)
		}},
		{name: "a Job started on a new base", old: waiting(), want: true, edit: func(st *v1alpha2.FunctionStatus) {
			st.RuntimeImage = "base:2"
			setCondition(st, v1alpha2.ConditionBuildReady, corev1.ConditionUnknown, v1alpha2.ReasonJobCreated, "Job x created", t0)
		}},
		{name: "first status", old: &v1alpha2.FunctionStatus{}, want: false, edit: func(st *v1alpha2.FunctionStatus) {
			*st = *waiting()
		}},
		{name: "the source changed too", old: waiting(), want: false, edit: func(st *v1alpha2.FunctionStatus) {
			setCondition(st, v1alpha2.ConditionConfigurationReady, corev1.ConditionTrue, v1alpha2.ReasonConfigMapUpdated, "ok", t0)
			setCondition(st, v1alpha2.ConditionBuildReady, corev1.ConditionUnknown, v1alpha2.ReasonJobCreated, "Job x created", t0)
		}},
		{name: "a new generation", old: waiting(), want: false, edit: func(st *v1alpha2.FunctionStatus) {
			st.ObservedGeneration = 2
			setCondition(st, v1alpha2.ConditionBuildReady, corev1.ConditionUnknown, v1alpha2.ReasonJobCreated, "Job x created", t0)
		}},
		{name: "Running changed", old: waiting(), want: false, edit: func(st *v1alpha2.FunctionStatus) {
			setCondition(st, v1alpha2.ConditionRunning, corev1.ConditionUnknown, v1alpha2.ReasonDeploymentWaiting, "w", t0)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cur := tt.old.DeepCopy()
			tt.edit(cur)
			assert.Equal(t, tt.want, onlyBuildNews(tt.old, cur))
		})
	}
}

func TestPrerequisitesMissing(t *testing.T) {
	objs := prerequisites(testNS)
	tests := []struct {
		name string
		drop string
		want string
	}{
		{"registry Secret", "serverless-registry-config-default", "registry Secret serverless-registry-config-default not found in namespace fn-test"},
		{"Dockerfile ConfigMap", "dockerfile-nodejs22", "Dockerfile ConfigMap dockerfile-nodejs22 not found in namespace fn-test"},
		{"ServiceAccount", "serverless-function", "ServiceAccount serverless-function not found in namespace fn-test"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var keep []client.Object
			for _, o := range objs {
				if o.GetName() != tt.drop {
					keep = append(keep, o)
				}
			}
			f := newFixture(t, append(keep, newFunction("hello"))...)
			f.reconcile(t, "hello")
			c := assertCondition(t, f.function(t, "hello"), v1alpha2.ConditionConfigurationReady, corev1.ConditionFalse, v1alpha2.ReasonPrerequisitesMissing)
			assert.Contains(t, c.Message, tt.want)
			assert.Empty(t, f.jobs(t))
		})
	}
}

func TestInvalidFunctionIsReportedOnce(t *testing.T) {
	fn := newFunction("hello")
	fn.Spec.Env = []corev1.EnvVar{{Name: "1X"}}
	f := newFixture(t, append(prerequisites(testNS), fn)...)
	assert.Zero(t, f.reconcile(t, "hello"))
	assertCondition(t, f.function(t, "hello"), v1alpha2.ConditionConfigurationReady, corev1.ConditionFalse, v1alpha2.ReasonInvalidFunctionSpec)
	f.writes.take()
	f.reconcile(t, "hello")
	assert.Empty(t, f.writes.take())
	assert.Len(t, f.rec.events, 1)
	assert.Empty(t, f.jobs(t))
}

func TestDeploymentOf184IsAdoptedWithoutABuild(t *testing.T) {
	fn := newFunction("hello")
	f := newFixture(t, append(prerequisites(testNS), fn)...)
	// What 1.8.4 left: a Deployment running the image the tag formula gives, no Job.
	p := newPass(fn, &f.r.cfg, metav1.NewTime(f.now))
	_, err := f.r.prerequisites(context.Background(), p)
	require.NoError(t, err)
	dep := resources.Deployment(p.in)
	dep.Name = "hello-old12"
	require.NoError(t, f.client.Create(context.Background(), dep))
	f.writes.take()

	f.reconcile(t, "hello")
	assert.Empty(t, f.jobs(t))
	got := f.function(t, "hello")
	assertCondition(t, got, v1alpha2.ConditionBuildReady, corev1.ConditionTrue, v1alpha2.ReasonJobFinished)
	assert.Equal(t, p.pullImage, got.Status.BuiltImage)
	deps := f.deployments(t)
	require.Len(t, deps, 1)
	assert.Equal(t, dep.Generation, deps[0].Generation)
}

func TestNewFunctionWaitsSilentlyForItsCopies(t *testing.T) {
	fn := newFunction("hello")
	f := newFixture(t, fn)
	f.r.started = fn.CreationTimestamp.Add(-time.Hour)
	f.now = fn.CreationTimestamp.Add(3 * time.Second)
	assert.Equal(t, 7*time.Second, f.reconcile(t, "hello"), "requeued for the rest of the grace")
	assert.Empty(t, f.writes.take(), "no status, no children")
	assert.Empty(t, f.rec.events)

	f.now = fn.CreationTimestamp.Add(11 * time.Second)
	f.reconcile(t, "hello")
	assertCondition(t, f.function(t, "hello"), v1alpha2.ConditionConfigurationReady, corev1.ConditionFalse, v1alpha2.ReasonPrerequisitesMissing)
}

func TestExcludedNamespaceIsReportedAtOnce(t *testing.T) {
	fn := newFunction("hello")
	f := newFixture(t, fn)
	f.r.cfg.ExcludedNamespaces = []string{testNS}
	f.now = fn.CreationTimestamp.Add(time.Second)
	f.reconcile(t, "hello")
	c := assertCondition(t, f.function(t, "hello"), v1alpha2.ConditionConfigurationReady, corev1.ConditionFalse, v1alpha2.ReasonPrerequisitesMissing)
	assert.Contains(t, c.Message, "namespace fn-test is excluded")
}

func TestJustStartedControllerWaitsSilentlyForAdoptedCopies(t *testing.T) {
	fn := newFunction("hello")
	fn.Status.Conditions = []v1alpha2.Condition{{Type: v1alpha2.ConditionConfigurationReady, Status: corev1.ConditionTrue,
		Reason: v1alpha2.ReasonConfigMapCreated, Message: "ConfigMap hello-abcde created"}}
	f := newFixture(t, fn)
	f.r.started = f.now.Add(-2 * time.Second)
	assert.Equal(t, 8*time.Second, f.reconcile(t, "hello"))
	assert.Empty(t, f.writes.take())
	assert.Empty(t, f.rec.events)
	assertCondition(t, f.function(t, "hello"), v1alpha2.ConditionConfigurationReady, corev1.ConditionTrue, v1alpha2.ReasonConfigMapCreated)
}

func TestRuntimeChangeWaitsForTheBuildBeforeTheDeployment(t *testing.T) {
	fn := newFunction("hello")
	f := builtFixture(t, fn)
	f.reconcile(t, "hello")
	before := f.deployments(t)[0]

	got := f.function(t, "hello")
	got.Spec.Runtime = v1alpha2.RuntimeNodejs20
	got.Spec.Env = []corev1.EnvVar{{Name: "A", Value: "1"}}
	got.Generation = 2
	require.NoError(t, f.client.Update(context.Background(), got))
	f.writes.take()
	f.reconcile(t, "hello")
	assert.Equal(t, map[string]int{"create *v1.Job": 1, "patch/status *v1alpha2.Function": 1}, f.writes.take(),
		"a new build; the Deployment (old image, old runtime) is left alone")
	assert.Equal(t, before.Spec.Template, f.deployments(t)[0].Spec.Template)

	f.finishRebuild(t, "hello")
	assert.Equal(t, map[string]int{"update *v1.Deployment": 1, "patch/status *v1alpha2.Function": 1}, f.writes.take())
	c := f.deployments(t)[0].Spec.Template.Spec.Containers[0]
	assert.Equal(t, "A", c.Env[0].Name)
	assert.Equal(t, "nodejs20", liveRuntime(&f.deployments(t)[0]))
}

// A Deployment on an image that is no build of the Function (buildless
// mode's runtime image, after a switch to build mode) keeps its Pods until
// the build is done, then rolls once.
func TestDeploymentOnAnotherImageWaitsForTheBuild(t *testing.T) {
	fn := newFunction("hello")
	f := builtFixture(t, fn)
	f.reconcile(t, "hello")
	d := f.deployments(t)[0]
	d.Spec.Template.Spec.Containers[0].Image = "europe-docker.pkg.dev/kyma-project/prod/function-runtime-nodejs22:1.13.0"
	d.Spec.Template.Spec.Containers[0].Command = []string{"sh", "-c", "npm start;"}
	d.Spec.Template.Spec.Containers[0].Env = append(d.Spec.Template.Spec.Containers[0].Env, corev1.EnvVar{Name: "FUNC_HANDLER_SOURCE", Value: fn.Spec.Source.Inline.Source})
	require.NoError(t, f.client.Update(context.Background(), &d))
	before := f.deployments(t)[0]

	got := f.function(t, "hello")
	got.Spec.Source.Inline.Source += "// changed\n"
	got.Generation = 2
	require.NoError(t, f.client.Update(context.Background(), got))
	f.writes.take()
	f.reconcile(t, "hello")
	assert.Equal(t, map[string]int{"update *v1.ConfigMap": 1, "create *v1.Job": 1, "patch/status *v1alpha2.Function": 1}, f.writes.take(),
		"the new source and its build; the Deployment on the other image is left alone")
	assert.Equal(t, before.Spec.Template, f.deployments(t)[0].Spec.Template)

	f.finishRebuild(t, "hello")
	assert.Equal(t, map[string]int{"update *v1.Deployment": 1, "patch/status *v1alpha2.Function": 1}, f.writes.take(), "one rollout, to the build")
	c := f.deployments(t)[0].Spec.Template.Spec.Containers[0]
	assert.Contains(t, c.Image, testNS+"-hello:")
	assert.Empty(t, c.Command, "the built image's own entrypoint")
}

// finishRebuild completes the one unfinished build Job of Function name and
// reconciles it.
func (f *fixture) finishRebuild(t *testing.T, name string) {
	t.Helper()
	newJob := unfinishedJobs(f.jobs(t))
	require.Len(t, newJob, 1)
	f.finishJob(t, &newJob[0], batchv1.JobComplete, "CompletionsReached")
	f.reconcile(t, name)
}

func unfinishedJobs(jobs []batchv1.Job) []batchv1.Job {
	var out []batchv1.Job
	for _, j := range jobs {
		if !jobDone(&j) {
			out = append(out, j)
		}
	}
	return out
}

// built returns a fixture whose Function "hello" has been built once.
func builtFixture(t *testing.T, fn *v1alpha2.Function, objs ...client.Object) *fixture {
	t.Helper()
	f := newFixture(t, append(append(prerequisites(testNS), fn), objs...)...)
	f.reconcile(t, fn.Name)
	jobs := f.jobs(t)
	require.Len(t, jobs, 1)
	f.finishJob(t, &jobs[0], batchv1.JobComplete, "CompletionsReached")
	return f
}

func TestForeignServiceIsNotTakenOver(t *testing.T) {
	foreign := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: testNS},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 1234}}}}
	f := builtFixture(t, newFunction("hello"), foreign)
	assert.Equal(t, 30*time.Second, f.reconcile(t, "hello"), "retried: the foreign Service's removal sends no event")
	c := assertCondition(t, f.function(t, "hello"), v1alpha2.ConditionRunning, corev1.ConditionFalse, v1alpha2.ReasonServiceFailed)
	assert.Contains(t, c.Message, "does not belong to the Function")
	svc := &corev1.Service{}
	require.NoError(t, f.client.Get(context.Background(), client.ObjectKeyFromObject(foreign), svc))
	assert.Equal(t, int32(1234), svc.Spec.Ports[0].Port, "left alone")
}

// functionCPU is the metric the controller's HPAs carry: the function
// container's CPU in percent of its request (testConfig's target, 50).
var functionCPU = []autoscalingv2.MetricSpec{{
	Type: autoscalingv2.ContainerResourceMetricSourceType,
	ContainerResource: &autoscalingv2.ContainerResourceMetricSource{Name: corev1.ResourceCPU, Container: resources.ContainerFunction,
		Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](50)}},
}}

func (f *fixture) hpas(t *testing.T) []autoscalingv2.HorizontalPodAutoscaler {
	t.Helper()
	var l autoscalingv2.HorizontalPodAutoscalerList
	require.NoError(t, f.client.List(context.Background(), &l, client.InNamespace(testNS)))
	return l.Items
}

// hpaWrites keeps the HPA entries of a writeCounter's counts.
func hpaWrites(counts map[string]int) map[string]int {
	out := map[string]int{}
	for k, n := range counts {
		if strings.HasSuffix(k, ".HorizontalPodAutoscaler") {
			out[k] = n
		}
	}
	return out
}

func TestHPAFollowsScaleConfig(t *testing.T) {
	fn := newFunction("hello")
	fn.Spec.ScaleConfig = &v1alpha2.ScaleConfig{MinReplicas: ptr.To[int32](1), MaxReplicas: ptr.To[int32](4)}
	f := builtFixture(t, fn)
	f.writes.take()
	f.reconcile(t, "hello")
	assert.Equal(t, map[string]int{"create *v2.HorizontalPodAutoscaler": 1}, hpaWrites(f.writes.take()))
	require.Len(t, f.hpas(t), 1)
	assert.Equal(t, int32(4), f.hpas(t)[0].Spec.MaxReplicas)
	assert.Equal(t, functionCPU, f.hpas(t)[0].Spec.Metrics)
	f.reconcile(t, "hello")
	assert.Empty(t, hpaWrites(f.writes.take()), "the next pass writes no HPA")

	got := f.function(t, "hello")
	got.Spec.ScaleConfig.MaxReplicas = ptr.To[int32](6)
	require.NoError(t, f.client.Update(context.Background(), got))
	f.reconcile(t, "hello")
	require.Len(t, f.hpas(t), 1)
	assert.Equal(t, int32(6), f.hpas(t)[0].Spec.MaxReplicas)

	got = f.function(t, "hello")
	got.Spec.ScaleConfig = nil
	require.NoError(t, f.client.Update(context.Background(), got))
	f.reconcile(t, "hello")
	assert.Empty(t, f.hpas(t))
}

// An HPA 1.8.4 made (autoscaling/v1, the Pod's CPU; through autoscaling/v2
// a Resource metric) is updated in place to the function container's CPU:
// same object, name and labels, and nothing more to write on the next pass.
func TestHPAOfRelease184IsUpdatedInPlace(t *testing.T) {
	fn := newFunction("hello")
	fn.Spec.ScaleConfig = &v1alpha2.ScaleConfig{MinReplicas: ptr.To[int32](2), MaxReplicas: ptr.To[int32](5)}
	old := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "hello-x7k2p", GenerateName: "hello-", Namespace: testNS, UID: "uid-old-hpa",
			Labels:            resources.FunctionLabels(fn),
			CreationTimestamp: metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 1, 0, time.UTC))},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "serverless.kyma-project.io/v1alpha2", Kind: "Function", Name: "hello"},
			MinReplicas:    ptr.To[int32](2), MaxReplicas: 5,
			Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
				Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](50)}}}},
		},
	}
	f := builtFixture(t, fn, old)
	f.writes.take()
	f.reconcile(t, "hello")
	assert.Equal(t, map[string]int{"update *v2.HorizontalPodAutoscaler": 1}, hpaWrites(f.writes.take()))
	hpas := f.hpas(t)
	require.Len(t, hpas, 1)
	assert.Equal(t, old.UID, hpas[0].UID, "the same object")
	assert.Equal(t, old.Name, hpas[0].Name)
	assert.Equal(t, old.Labels, hpas[0].Labels)
	assert.Equal(t, old.Spec.ScaleTargetRef, hpas[0].Spec.ScaleTargetRef)
	assert.Equal(t, int32(2), *hpas[0].Spec.MinReplicas)
	assert.Equal(t, int32(5), hpas[0].Spec.MaxReplicas)
	assert.Equal(t, functionCPU, hpas[0].Spec.Metrics)

	f.reconcile(t, "hello")
	assert.Empty(t, hpaWrites(f.writes.take()), "the next pass writes no HPA")
}

func TestExtraChildrenAreDeletedKeepingTheOldest(t *testing.T) {
	fn := newFunction("hello")
	f := builtFixture(t, fn)
	f.reconcile(t, "hello")
	cms := func() []corev1.ConfigMap {
		var l corev1.ConfigMapList
		require.NoError(t, f.client.List(context.Background(), &l, client.InNamespace(testNS),
			client.MatchingLabels(resources.InternalLabels(fn))))
		return l.Items
	}
	first := cms()[0]
	extra := first.DeepCopy()
	extra.ResourceVersion, extra.Name, extra.GenerateName = "", "", "hello-"
	extra.CreationTimestamp = metav1.NewTime(first.CreationTimestamp.Add(time.Hour))
	require.NoError(t, f.client.Create(context.Background(), extra))
	require.Len(t, cms(), 2)
	f.writes.take()
	f.reconcile(t, "hello")
	assert.Equal(t, map[string]int{"delete *v1.ConfigMap": 1}, f.writes.take())
	left := cms()
	require.Len(t, left, 1)
	assert.Equal(t, first.Name, left[0].Name)
}

// Where a copy is read from: the cache, which holds the controller's
// copies and those their users took over; the API server only when the
// cache has none after the prerequisites grace (a 1.8.4 copy the copies
// controller has not adopted yet), or in a namespace where the controller
// makes no copies. Within the grace a missing copy is one not made yet:
// reading it from the API server would fetch a 404 per Function.
func TestWhereCopiesAreRead(t *testing.T) {
	var secret *corev1.Secret
	var others []client.Object
	for _, o := range prerequisites(testNS) {
		if s, ok := o.(*corev1.Secret); ok {
			secret = s.DeepCopy()
			continue
		}
		others = append(others, o)
	}
	require.NotNil(t, secret)
	userSecret := secret.DeepCopy()
	userSecret.Labels = map[string]string{v1alpha2.LabelManagedBy: v1alpha2.ManagedByUser}
	leftBy184 := secret.DeepCopy()
	leftBy184.Labels = map[string]string{v1alpha2.LabelConfig: v1alpha2.ConfigCredentials}
	tests := []struct {
		name         string
		cache, api   []client.Object // the Secret where it is
		age          time.Duration   // of the Function (the controller runs for long)
		excluded     bool
		wantAPIReads int
		wantJob      bool
		wantRequeue  time.Duration
	}{
		{name: "user's Secret in the cache, new Function", cache: []client.Object{userSecret}, api: []client.Object{userSecret},
			age: time.Second, wantJob: true},
		{name: "copy not made yet, within the grace", age: 3 * time.Second, wantRequeue: 7 * time.Second},
		{name: "1.8.4 copy not adopted yet, within the grace", api: []client.Object{leftBy184},
			age: 3 * time.Second, wantRequeue: 7 * time.Second},
		{name: "1.8.4 copy not adopted yet, after the grace", api: []client.Object{leftBy184},
			age: 11 * time.Second, wantAPIReads: 1, wantJob: true},
		{name: "no Secret anywhere, after the grace", age: 11 * time.Second, wantAPIReads: 1},
		{name: "excluded namespace: a user's copy whatever its labels", api: []client.Object{leftBy184},
			age: time.Second, excluded: true, wantAPIReads: 1, wantJob: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fn := newFunction("hello")
			objs := append(append([]client.Object{fn}, others...), tt.cache...)
			f := newFixture(t, objs...)
			f.r.started = fn.CreationTimestamp.Add(-time.Hour)
			f.now = fn.CreationTimestamp.Add(tt.age)
			if tt.excluded {
				f.r.cfg.ExcludedNamespaces = []string{testNS}
			}
			reads := 0
			f.r.api = interceptor.NewClient(fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(tt.api...).Build(),
				interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
					reads++
					return c.Get(ctx, key, obj, opts...)
				}})
			f.writes.take()
			assert.Equal(t, tt.wantRequeue, f.reconcile(t, "hello"))
			assert.Equal(t, tt.wantAPIReads, reads, "reads from the API server")
			if tt.wantJob {
				assert.Len(t, f.jobs(t), 1)
				assertCondition(t, f.function(t, "hello"), v1alpha2.ConditionConfigurationReady, corev1.ConditionTrue, v1alpha2.ReasonConfigMapCreated)
				return
			}
			assert.Empty(t, f.jobs(t))
			if tt.wantRequeue > 0 {
				assert.Empty(t, f.writes.take(), "silent within the grace")
				return
			}
			assertCondition(t, f.function(t, "hello"), v1alpha2.ConditionConfigurationReady, corev1.ConditionFalse, v1alpha2.ReasonPrerequisitesMissing)
		})
	}
}

// With the opt-in to clean an external registry, a Function's repository is
// recorded as the module's before its first build pushes (one write, none
// for later builds); without it nothing is written.
func TestBuildRecordsItsExternalRepositoryWithTheOptIn(t *testing.T) {
	for _, optIn := range []bool{false, true} {
		t.Run(fmt.Sprintf("opt-in %v", optIn), func(t *testing.T) {
			f := newFixture(t, append(prerequisites(testNS), newFunction("hello"))...)
			f.r.cfg.RegistryCleanupExternal = optIn
			f.reconcile(t, "hello")
			writes := f.writes.take()
			record := &corev1.ConfigMap{}
			err := f.client.Get(context.Background(), types.NamespacedName{Namespace: f.r.cfg.BaseNamespace, Name: module.RegistryRepositoriesName}, record)
			if !optIn {
				assert.True(t, apierrors.IsNotFound(err), "no record without the opt-in: %v", err)
				assert.Equal(t, 1, writes["create *v1.ConfigMap"], "the source ConfigMap only")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, map[string]string{testNS + "-hello": "registry.example:5000"}, record.Data)
			assert.Equal(t, 2, writes["create *v1.ConfigMap"], "the source ConfigMap and the record")

			// A source change builds again: the source ConfigMap is the only ConfigMap written.
			jobs := f.jobs(t)
			f.finishJob(t, &jobs[0], batchv1.JobComplete, "CompletionsReached")
			f.reconcile(t, "hello")
			got := f.function(t, "hello")
			got.Spec.Source.Inline.Source = "module.exports = { main: () => 'bye' }"
			got.Generation = 2
			require.NoError(t, f.client.Update(context.Background(), got))
			f.writes.take()
			f.reconcile(t, "hello")
			assert.Equal(t, map[string]int{"update *v1.ConfigMap": 1, "create *v1.Job": 1, "patch/status *v1alpha2.Function": 1}, f.writes.take())
		})
	}
}

func TestTerminatingNamespaceEndsThePassQuietly(t *testing.T) {
	fn := newFunction("hello")
	f := newFixture(t, append(prerequisites(testNS), fn)...)
	// What the API server answers a create in a namespace being deleted.
	f.writes.refuseCreate = func(obj client.Object) error {
		err := apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, obj.GetName(),
			fmt.Errorf("unable to create new content in namespace %s because it is being terminated", obj.GetNamespace()))
		err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{
			Type: corev1.NamespaceTerminatingCause, Message: err.Error(), Field: "metadata.namespace"})
		return err
	}
	res, err := f.r.Reconcile(context.Background(), reconcileRequest("hello"))
	require.NoError(t, err, "no retry: the Function goes with its namespace")
	assert.Zero(t, res.RequeueAfter)
	assert.Empty(t, f.rec.events)
	assert.Equal(t, map[string]int{"create *v1.ConfigMap": 1}, f.writes.take(), "no status write either")
}
