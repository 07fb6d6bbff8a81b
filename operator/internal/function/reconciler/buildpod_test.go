package reconciler

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/internal/function/resources"
	"github.com/kyma-project/serverless-manager/operator/pkg/build"
)

const testDigest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// buildPod is the Pod of job as the Job controller creates it, its steps
// in the given states (init containers first, the build container last).
func (f *fixture) buildPod(t *testing.T, fn *v1alpha2.Function, job *batchv1.Job, steps ...corev1.ContainerStatus) *corev1.Pod {
	t.Helper()
	labels := resources.FunctionLabels(fn)
	labels[resources.LabelJobName] = job.Name
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: job.Name + "-x", Namespace: job.Namespace, Labels: labels},
		Spec:       job.Spec.Template.Spec,
	}
	require.NoError(t, f.client.Create(context.Background(), pod))
	last := len(steps) - 1
	pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses = steps[:last], steps[last:]
	require.NoError(t, f.client.Status().Update(context.Background(), pod))
	f.writes.take()
	return pod
}

func terminated(name string, exit int32, message string) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: name, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: exit, Message: message, Reason: "Completed"}}}
}

func TestDeploymentRunsTheDigestTheBuildReported(t *testing.T) {
	fn := newFunction("hello")
	f := newFixture(t, append(prerequisites(testNS), fn)...)
	f.reconcile(t, "hello")
	job := f.jobs(t)[0]

	// The Job's end reaches the controller before its Pod's: it waits.
	pod := f.buildPod(t, fn, &job, terminated(resources.ContainerPrepare, 0, ""), terminated(resources.ContainerDependencies, 0, ""),
		corev1.ContainerStatus{Name: resources.ContainerBuild, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}})
	f.finishJob(t, &job, batchv1.JobComplete, "CompletionsReached")
	f.reconcile(t, "hello")
	assert.Empty(t, f.writes.take(), "nothing before the build Pod has ended")
	assert.Empty(t, f.deployments(t))

	pod.Status.ContainerStatuses = []corev1.ContainerStatus{terminated(resources.ContainerBuild, 0, testDigest+"\n")}
	require.NoError(t, f.client.Status().Update(context.Background(), pod))
	f.reconcile(t, "hello")
	got := f.function(t, "hello")
	assertCondition(t, got, v1alpha2.ConditionBuildReady, corev1.ConditionTrue, v1alpha2.ReasonJobFinished)
	deps := f.deployments(t)
	require.Len(t, deps, 1)
	image := deps[0].Spec.Template.Spec.Containers[0].Image
	assert.True(t, strings.HasPrefix(image, "registry.example:5000/fn-test-hello:") && strings.HasSuffix(image, "@"+testDigest), image)
	assert.Equal(t, image, got.Status.BuiltImage)

	// The Pod and Job gone (TTL): the digest stays, nothing changes.
	require.NoError(t, f.client.Delete(context.Background(), pod))
	require.NoError(t, f.client.Delete(context.Background(), &job))
	f.writes.take()
	f.reconcile(t, "hello")
	assert.Empty(t, f.writes.take())
	assert.Equal(t, image, f.deployments(t)[0].Spec.Template.Spec.Containers[0].Image)
}

func TestBuildWithoutADigestRunsTheTag(t *testing.T) {
	for name, pod := range map[string]bool{"simulated Pod, no message": true, "Pod already gone": false} {
		t.Run(name, func(t *testing.T) {
			fn := newFunction("hello")
			f := newFixture(t, append(prerequisites(testNS), fn)...)
			f.reconcile(t, "hello")
			job := f.jobs(t)[0]
			if pod {
				f.buildPod(t, fn, &job, terminated(resources.ContainerPrepare, 0, ""), terminated(resources.ContainerBuild, 0, ""))
			}
			f.finishJob(t, &job, batchv1.JobComplete, "CompletionsReached")
			f.reconcile(t, "hello")
			got := f.function(t, "hello")
			deps := f.deployments(t)
			require.Len(t, deps, 1)
			assert.NotContains(t, got.Status.BuiltImage, "@")
			assert.Equal(t, got.Status.BuiltImage, deps[0].Spec.Template.Spec.Containers[0].Image)
		})
	}
}

func TestFailedStepIsNamedInBuildReady(t *testing.T) {
	npmError := strings.Join([]string{
		"npm error code E404",
		"npm error 404 Not Found - GET https://user:s3cret@registry.example/no-such-package - Not found",
		"npm error 404  'no-such-package@^1.0.0' is not in this registry.",
		"npm error //registry.example/:_authToken=npm_T0KEN",
		"npm error A complete log of this run can be found in: /tmp/.npm/_logs/debug.log",
	}, "\n")
	fn := newFunction("hello")
	f := newFixture(t, append(prerequisites(testNS), fn)...)
	f.reconcile(t, "hello")
	job := f.jobs(t)[0]
	f.buildPod(t, fn, &job, terminated(resources.ContainerPrepare, 0, ""), terminated(resources.ContainerDependencies, 1, npmError),
		corev1.ContainerStatus{Name: resources.ContainerBuild, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}})
	f.finishJob(t, &job, batchv1.JobFailed, "BackoffLimitExceeded")
	f.reconcile(t, "hello")

	c := assertCondition(t, f.function(t, "hello"), v1alpha2.ConditionBuildReady, corev1.ConditionFalse, v1alpha2.ReasonJobFailed)
	assert.Contains(t, c.Message, "step dependencies: npm error code E404")
	assert.Contains(t, c.Message, "'no-such-package@^1.0.0' is not in this registry")
	assert.NotContains(t, c.Message, "s3cret")
	assert.NotContains(t, c.Message, "npm_T0KEN")
	assert.Empty(t, f.deployments(t), "nothing runs a failed build")
}

func TestPackageRegistryConfigIsPartOfTheDependencyKey(t *testing.T) {
	digestOf := func(t *testing.T, secret *corev1.Secret) string {
		t.Helper()
		objs := append(prerequisites(testNS), newFunction("hello"))
		if secret != nil {
			objs = append(objs, secret)
		}
		f := newFixture(t, objs...)
		f.reconcile(t, "hello")
		jobs := f.jobs(t)
		require.Len(t, jobs, 1)
		for _, e := range jobs[0].Spec.Template.Spec.Containers[0].Env {
			if e.Name == build.EnvPackageConfigDigest {
				return e.Value
			}
		}
		t.Fatalf("no %s in the build container", build.EnvPackageConfigDigest)
		return ""
	}
	secret := func(npmrc string) *corev1.Secret {
		return &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: testConfig(t).PackageRegistryConfigSecretName, Namespace: testNS},
			Data:       map[string][]byte{".npmrc": []byte(npmrc)},
		}
	}
	none := digestOf(t, nil)
	a := digestOf(t, secret("registry=https://a.example/\n//a.example/:_authToken=one\n"))
	b := digestOf(t, secret("registry=https://b.example/\n//b.example/:_authToken=one\n"))
	assert.Empty(t, none)
	assert.Regexp(t, `^sha256:[0-9a-f]{64}$`, a)
	assert.NotEqual(t, a, b)
	assert.Equal(t, a, digestOf(t, secret("registry=https://a.example/\n//a.example/:_authToken=one\n")))
}

// A build Pod the scheduler cannot place is named at once, with the
// scheduler's message, and once: placed, the build is reported as running.
func TestBuildPodNotPlaced(t *testing.T) {
	fn := newFunction("hello")
	f := newFixture(t, append(prerequisites(testNS), fn)...)
	f.reconcile(t, "hello")
	job := f.jobs(t)[0]
	pod := f.buildPod(t, fn, &job, corev1.ContainerStatus{Name: resources.ContainerBuild,
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}})
	pod.Status.Conditions = []corev1.PodCondition{notPlaced(noNode)}
	require.NoError(t, f.client.Status().Update(context.Background(), pod))

	f.reconcile(t, "hello")
	assert.Equal(t, map[string]int{"patch/status *v1alpha2.Function": 1}, f.writes.take(), "at once, not after the report delay")
	c := assertCondition(t, f.function(t, "hello"), v1alpha2.ConditionBuildReady, corev1.ConditionUnknown, v1alpha2.ReasonJobPodUnschedulable)
	assert.Equal(t, "Job "+job.Name+": Pod "+pod.Name+" is not placed: "+noNode, c.Message)
	f.reconcile(t, "hello")
	assert.Empty(t, f.writes.take(), "the same cause: no second write")

	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}
	require.NoError(t, f.client.Status().Update(context.Background(), pod))
	f.reconcile(t, "hello")
	c = assertCondition(t, f.function(t, "hello"), v1alpha2.ConditionBuildReady, corev1.ConditionUnknown, v1alpha2.ReasonJobRunning)
	assert.Equal(t, "Job "+job.Name+" is still in progress", c.Message)
}
