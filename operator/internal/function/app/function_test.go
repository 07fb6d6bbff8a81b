package app_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/internal/function/config"
	"github.com/kyma-project/serverless-manager/operator/internal/function/resources"
)

// One API server for all cases; each case has its own namespace and leaves
// no unfinished build Job behind (the build cap is cluster-wide).
func TestFunctionController(t *testing.T) {
	e := start(t)

	t.Run("inline Function to Running, with the writes it costs", func(t *testing.T) {
		ns := e.namespace(t, "inline")
		e.createFunction(t, ns, "hello")
		fn := e.waitCondition(t, ns, "hello", v1alpha2.ConditionBuildReady, corev1.ConditionUnknown, v1alpha2.ReasonJobCreated)
		assert.Equal(t, v1alpha2.ReasonConfigMapCreated, conditionOf(fn, v1alpha2.ConditionConfigurationReady).Reason)
		assert.Len(t, children(t, e, ns, "hello", &corev1.ConfigMapList{}).Items, 1)
		jobs := e.jobs(t, ns, "hello")
		require.Len(t, jobs, 1)
		assert.Empty(t, e.deployments(t, ns, "hello"), "no Deployment before the build")

		e.finishJob(t, jobs[0], true)
		dep := e.waitDeployment(t, ns, "hello")
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			assert.Len(c, children(c, e, ns, "hello", &corev1.ServiceList{}).Items, 1)
		}, eventual, tick)
		// The new Deployment gets a moment to become ready before the status is written.
		assert.Empty(t, conditionOf(e.function(t, ns, "hello"), v1alpha2.ConditionRunning).Status)

		e.readyDeployment(t, dep)
		fn = e.waitCondition(t, ns, "hello", v1alpha2.ConditionRunning, corev1.ConditionTrue, v1alpha2.ReasonDeploymentReady)
		assert.Equal(t, corev1.ConditionTrue, conditionOf(fn, v1alpha2.ConditionBuildReady).Status)
		assert.Equal(t, dep.Spec.Template.Spec.Containers[0].Image, fn.Status.BuiltImage)
		assert.Equal(t, fn.Generation, fn.Status.ObservedGeneration)
		assert.Equal(t, int32(1), fn.Status.Replicas)
		assert.NotEmpty(t, fn.Status.PodSelector)

		w := e.writes.of(ns, "hello")
		t.Logf("writes for one Function from creation to Running: %d %v", total(w), w)
		assert.Equal(t, 1, w["create *v1.ConfigMap"])
		assert.Equal(t, 1, w["create *v1.Job"])
		assert.Equal(t, 1, w["create *v1.Deployment"])
		assert.Equal(t, 1, w["create *v1.Service"])
		assert.LessOrEqual(t, total(w), 8)
	})

	t.Run("a first Deployment that is slow to become ready: the status says so after a moment", func(t *testing.T) {
		ns := e.namespace(t, "slow")
		e.createFunction(t, ns, "hello")
		e.waitCondition(t, ns, "hello", v1alpha2.ConditionBuildReady, corev1.ConditionUnknown, v1alpha2.ReasonJobCreated)
		e.finishJob(t, e.jobs(t, ns, "hello")[0], true)
		dep := e.waitDeployment(t, ns, "hello")
		fn := e.waitCondition(t, ns, "hello", v1alpha2.ConditionRunning, corev1.ConditionUnknown, v1alpha2.ReasonDeploymentWaiting)
		assert.Equal(t, corev1.ConditionTrue, conditionOf(fn, v1alpha2.ConditionBuildReady).Status)
		assert.Equal(t, dep.Spec.Template.Spec.Containers[0].Image, fn.Status.BuiltImage)
		assert.GreaterOrEqual(t, conditionOf(fn, v1alpha2.ConditionRunning).LastTransitionTime.Sub(dep.CreationTimestamp.Time), 4*time.Second)
	})

	t.Run("status not rewritten when nothing changed", func(t *testing.T) {
		ns := e.namespace(t, "steady")
		e.runFunction(t, ns, "hello")
		before := e.writes.of(ns, "hello")
		// Passes without a change: the Deployment is touched (its event
		// triggers a pass), the Function's labels change.
		dep := e.deployments(t, ns, "hello")[0]
		dep.Annotations["touched"] = "yes"
		require.NoError(t, e.c.Update(context.Background(), &dep))
		e.edit(t, ns, "hello", func(fn *v1alpha2.Function) { fn.Annotations = map[string]string{"touched": "yes"} })
		time.Sleep(2 * time.Second)
		assert.Equal(t, before, e.writes.of(ns, "hello"))
	})

	t.Run("source change builds once", func(t *testing.T) {
		ns := e.namespace(t, "source")
		fn := e.runFunction(t, ns, "hello")
		oldImage := fn.Status.BuiltImage
		e.edit(t, ns, "hello", func(fn *v1alpha2.Function) {
			fn.Spec.Source.Inline.Source = "def main(event, context):\n    return 'changed'\n"
		})
		e.waitCondition(t, ns, "hello", v1alpha2.ConditionBuildReady, corev1.ConditionUnknown, v1alpha2.ReasonJobCreated)
		assert.Never(t, func() bool { return len(e.jobs(t, ns, "hello")) != 2 }, 2*time.Second, tick, "exactly one new Job")
		jobs := unfinished(e.jobs(t, ns, "hello"))
		require.Len(t, jobs, 1)
		assert.Equal(t, oldImage, e.deployments(t, ns, "hello")[0].Spec.Template.Spec.Containers[0].Image)

		e.finishJob(t, jobs[0], true)
		fn = e.waitCondition(t, ns, "hello", v1alpha2.ConditionRunning, corev1.ConditionUnknown, v1alpha2.ReasonDeploymentUpdated)
		assert.NotEqual(t, oldImage, fn.Status.BuiltImage)
		assert.Equal(t, fn.Status.BuiltImage, e.deployments(t, ns, "hello")[0].Spec.Template.Spec.Containers[0].Image)
	})

	t.Run("env change rolls the Deployment without a Job", func(t *testing.T) {
		ns := e.namespace(t, "env")
		e.runFunction(t, ns, "hello")
		e.edit(t, ns, "hello", func(fn *v1alpha2.Function) {
			fn.Spec.Env = []corev1.EnvVar{{Name: "GREETING", Value: "hi"}}
		})
		e.waitCondition(t, ns, "hello", v1alpha2.ConditionRunning, corev1.ConditionUnknown, v1alpha2.ReasonDeploymentUpdated)
		deps := e.deployments(t, ns, "hello")
		require.Len(t, deps, 1)
		assert.Equal(t, corev1.EnvVar{Name: "GREETING", Value: "hi"}, deps[0].Spec.Template.Spec.Containers[0].Env[0])
		assert.Len(t, e.jobs(t, ns, "hello"), 1, "no new Job")
	})

	t.Run("failed build is reported and retried", func(t *testing.T) {
		ns := e.namespace(t, "failed")
		e.createFunction(t, ns, "hello")
		e.waitCondition(t, ns, "hello", v1alpha2.ConditionBuildReady, corev1.ConditionUnknown, v1alpha2.ReasonJobCreated)
		first := e.jobs(t, ns, "hello")[0]
		e.finishJob(t, first, false)
		fn := e.waitCondition(t, ns, "hello", v1alpha2.ConditionBuildReady, corev1.ConditionFalse, v1alpha2.ReasonJobFailed)
		assert.Contains(t, conditionOf(fn, v1alpha2.ConditionBuildReady).Message, "BackoffLimitExceeded: Job has reached the specified backoff limit")

		// After the backoff: the failed Job is deleted and a new one created.
		e.waitCondition(t, ns, "hello", v1alpha2.ConditionBuildReady, corev1.ConditionUnknown, v1alpha2.ReasonJobCreated)
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			jobs := e.jobs(c, ns, "hello")
			if assert.Len(c, jobs, 1) {
				assert.NotEqual(c, first.Name, jobs[0].Name)
			}
		}, eventual, tick)
		e.finishAll(t, ns)
		e.waitCondition(t, ns, "hello", v1alpha2.ConditionBuildReady, corev1.ConditionTrue, v1alpha2.ReasonJobFinished)
	})

	t.Run("build cap of N respected with N+2 Functions", func(t *testing.T) {
		ns := e.namespace(t, "cap")
		names := []string{"f1", "f2", "f3", "f4"}
		for _, n := range names {
			e.createFunction(t, ns, n)
		}
		waitingCount := func(c require.TestingT) int {
			n := 0
			for _, name := range names {
				if conditionOf(e.function(c, ns, name), v1alpha2.ConditionBuildReady).Reason == v1alpha2.ReasonJobQueued {
					n++
				}
			}
			return n
		}
		allJobs := func(c require.TestingT) []batchJobs {
			var out []batchJobs
			for _, name := range names {
				out = append(out, batchJobs{name, e.jobs(c, ns, name)})
			}
			return out
		}
		running := func(c require.TestingT) int {
			n := 0
			for _, j := range allJobs(c) {
				n += len(unfinished(j.jobs))
			}
			return n
		}
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			assert.Equal(c, maxJobs, running(c))
			assert.Equal(c, len(names)-maxJobs, waitingCount(c))
		}, eventual, tick)
		assert.Never(t, func() bool { return running(t) > maxJobs }, time.Second, tick)

		// One build ends: a waiting Function gets the slot at once (no polling).
		for _, j := range allJobs(t) {
			if u := unfinished(j.jobs); len(u) == 1 {
				e.finishJob(t, u[0], true)
				break
			}
		}
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			assert.Equal(c, maxJobs, running(c))
			assert.Equal(c, len(names)-maxJobs-1, waitingCount(c))
		}, 5*time.Second, tick)
		for range names {
			e.finishAll(t, ns)
			time.Sleep(200 * time.Millisecond)
		}
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			for _, name := range names {
				assert.Equal(c, corev1.ConditionTrue, conditionOf(e.function(c, ns, name), v1alpha2.ConditionBuildReady).Status, name)
			}
		}, eventual, tick)
		assert.Zero(t, running(t))
	})

	t.Run("missing prerequisite is a condition; its arrival resumes the Function", func(t *testing.T) {
		ctx := context.Background()
		base := &corev1.ServiceAccount{}
		require.NoError(t, e.c.Get(ctx, client.ObjectKey{Namespace: baseNS, Name: "serverless-function"}, base))
		require.NoError(t, e.c.Delete(ctx, base))
		ns := e.namespace(t, "prereq")
		e.createFunction(t, ns, "hello")
		fn := e.waitCondition(t, ns, "hello", v1alpha2.ConditionConfigurationReady, corev1.ConditionFalse, v1alpha2.ReasonPrerequisitesMissing)
		assert.Contains(t, conditionOf(fn, v1alpha2.ConditionConfigurationReady).Message, "ServiceAccount serverless-function not found in namespace prereq")
		assert.Empty(t, e.jobs(t, ns, "hello"))

		base.ResourceVersion, base.UID = "", ""
		require.NoError(t, e.c.Create(ctx, base))
		e.waitCondition(t, ns, "hello", v1alpha2.ConditionBuildReady, corev1.ConditionUnknown, v1alpha2.ReasonJobCreated)
		e.waitCondition(t, ns, "hello", v1alpha2.ConditionConfigurationReady, corev1.ConditionTrue, v1alpha2.ReasonConfigMapCreated)
		e.finishAll(t, ns)
	})

	t.Run("copies come from the cache: a new namespace's, and a Secret its user took over", func(t *testing.T) {
		ctx := context.Background()
		fresh := e.namespace(t, "fresh")
		for _, name := range []string{"a", "b", "c"} {
			e.createFunction(t, fresh, name)
		}
		// The user's registry Secret (the base's content, their label) is
		// there before the first Function.
		taken := e.namespace(t, "taken")
		base := &corev1.Secret{}
		require.NoError(t, e.c.Get(ctx, client.ObjectKey{Namespace: baseNS, Name: config.DefaultRegistrySecretName}, base))
		mine := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: taken, Name: base.Name,
			Labels: map[string]string{v1alpha2.LabelConfig: v1alpha2.ConfigCredentials, v1alpha2.LabelManagedBy: v1alpha2.ManagedByUser}},
			Type: base.Type, Data: base.Data}
		require.NoError(t, e.c.Create(ctx, mine))
		e.createFunction(t, taken, "hello")

		// Past the prerequisites: the source ConfigMap is made (the build
		// may wait for a slot).
		for _, name := range []string{"a", "b", "c"} {
			e.waitCondition(t, fresh, name, v1alpha2.ConditionConfigurationReady, corev1.ConditionTrue, v1alpha2.ReasonConfigMapCreated)
		}
		e.waitCondition(t, taken, "hello", v1alpha2.ConditionConfigurationReady, corev1.ConditionTrue, v1alpha2.ReasonConfigMapCreated)
		assert.Zero(t, e.copyReads.in(fresh), "copies of a new namespace read from the API server")
		assert.Zero(t, e.copyReads.in(taken), "copies of a namespace with a user's Secret read from the API server")
		got := &corev1.Secret{}
		require.NoError(t, e.c.Get(ctx, client.ObjectKeyFromObject(mine), got))
		assert.Equal(t, mine.Labels, got.Labels, "the user's Secret stays theirs")
		// Every build done, so the slots are free for the next test.
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			e.finishAll(t, fresh)
			e.finishAll(t, taken)
			for _, fn := range []struct{ ns, name string }{{fresh, "a"}, {fresh, "b"}, {fresh, "c"}, {taken, "hello"}} {
				assert.Equal(c, corev1.ConditionTrue, conditionOf(e.function(c, fn.ns, fn.name), v1alpha2.ConditionBuildReady).Status, fn.name)
			}
		}, eventual, tick)
	})

	t.Run("kubectl scale: replicas reach the Deployment without a rollout", func(t *testing.T) {
		ns := e.namespace(t, "scale")
		e.runFunction(t, ns, "hello")
		before := e.deployments(t, ns, "hello")[0]
		e.edit(t, ns, "hello", func(fn *v1alpha2.Function) { fn.Spec.Replicas = ptrTo(int32(3)) })
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			deps := e.deployments(c, ns, "hello")
			if assert.Len(c, deps, 1) {
				assert.Equal(c, int32(3), *deps[0].Spec.Replicas)
				assert.Equal(c, before.Spec.Template, deps[0].Spec.Template)
			}
		}, eventual, tick)
		assert.Equal(t, corev1.ConditionTrue, conditionOf(e.function(t, ns, "hello"), v1alpha2.ConditionRunning).Status,
			"a replicas change is no rollout")
	})

	t.Run("every option: HPA, secret mounts, labels, annotations, override; then steady", func(t *testing.T) {
		ns := e.namespace(t, "options")
		ctx := context.Background()
		require.NoError(t, e.c.Create(ctx, &v1alpha2.Function{
			ObjectMeta: metav1.ObjectMeta{Name: "full", Namespace: ns, Labels: map[string]string{"team": "a"}},
			Spec: v1alpha2.FunctionSpec{
				Runtime:              v1alpha2.RuntimeNodejs22,
				RuntimeImageOverride: "example.org/custom-node:1",
				Source: v1alpha2.Source{Inline: &v1alpha2.InlineSource{
					Source: "module.exports = { main: () => 'full' }", Dependencies: `{"name":"full"}`}},
				Env: []corev1.EnvVar{{Name: "A", Value: "1"}, {Name: "FROM_SECRET", ValueFrom: &corev1.EnvVarSource{
					SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Key: "k"}}}},
				ScaleConfig:  &v1alpha2.ScaleConfig{MinReplicas: ptrTo(int32(1)), MaxReplicas: ptrTo(int32(3))},
				SecretMounts: []v1alpha2.SecretMount{{SecretName: "my.secret", MountPath: "/secret"}},
				Labels:       map[string]string{"pod": "label"},
				Annotations:  map[string]string{"pod/annotation": "yes"},
				ResourceConfiguration: &v1alpha2.ResourceConfiguration{
					Function: &v1alpha2.ResourceRequirements{Profile: "M"},
					Build:    &v1alpha2.ResourceRequirements{Profile: "fast"},
				},
				Replicas: ptrTo(int32(1)),
			},
		}))
		e.waitCondition(t, ns, "full", v1alpha2.ConditionBuildReady, corev1.ConditionUnknown, v1alpha2.ReasonJobCreated)
		e.finishJob(t, e.jobs(t, ns, "full")[0], true)
		e.readyDeployment(t, e.waitDeployment(t, ns, "full"))
		fn := e.waitCondition(t, ns, "full", v1alpha2.ConditionRunning, corev1.ConditionTrue, v1alpha2.ReasonDeploymentReady)
		assert.Equal(t, "example.org/custom-node:1", fn.Status.RuntimeImage)
		assert.Equal(t, "M", fn.Status.FunctionResourceProfile)
		assert.Equal(t, "fast", fn.Status.BuildResourceProfile)
		assert.Equal(t, "1Gi", ptrTo(e.deployments(t, ns, "full")[0].Spec.Template.Spec.Containers[0].Resources.Limits[corev1.ResourceMemory]).String())
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			assert.Len(c, children(c, e, ns, "full", &autoscalingv2.HorizontalPodAutoscalerList{}).Items, 1)
		}, eventual, tick)

		before := e.writes.of(ns, "full")
		t.Logf("writes for a Function with every option: %d %v", total(before), before)
		// Touch every child: each triggers a pass that must find nothing to change.
		for _, l := range []client.ObjectList{&corev1.ConfigMapList{}, &corev1.ServiceList{}, &autoscalingv2.HorizontalPodAutoscalerList{}} {
			children(t, e, ns, "full", l)
			items, err := meta.ExtractList(l)
			require.NoError(t, err)
			for _, o := range items {
				obj := o.(client.Object)
				obj.SetAnnotations(merge(obj.GetAnnotations(), map[string]string{"touched": "yes"}))
				require.NoError(t, e.c.Update(ctx, obj))
			}
		}
		time.Sleep(2 * time.Second)
		assert.Equal(t, before, e.writes.of(ns, "full"))
	})

	t.Run("takeover of a 1.8.4 Function: no Job, no rollout, its HPA updated in place", func(t *testing.T) {
		ctx := context.Background()
		e.stop() // 1.8.4 ran until now
		ns := e.namespace(t, "takeover")
		e.createFunction(t, ns, "old")
		fn := e.function(t, ns, "old")
		fn.Spec.ScaleConfig = &v1alpha2.ScaleConfig{MinReplicas: ptrTo(int32(1)), MaxReplicas: ptrTo(int32(3))}
		require.NoError(t, e.c.Update(ctx, fn))
		cfg := controllerConfig(t)
		in := resources.Inputs{Function: fn, Config: &cfg, Registry: resources.Registry{PushAddress: "registry.example:5000", PullAddress: "registry.example:5000"},
			BaseImage: "example.org/function-runtime-python312:1"}
		// The children as 1.8.4 made them: random names, no TTL on the Job, no
		// annotation record on the Deployment.
		cm := resources.SourceConfigMap(in)
		require.NoError(t, e.c.Create(ctx, cm))
		job := resources.BuildJob(in, cm.Name)
		job.Spec.TTLSecondsAfterFinished, job.Spec.ActiveDeadlineSeconds = nil, nil
		require.NoError(t, e.c.Create(ctx, job))
		e.finishJob(t, *job, true)
		dep := resources.Deployment(in)
		delete(dep.Annotations, resources.AnnotationPodAnnotationKeys)
		require.NoError(t, e.c.Create(ctx, dep))
		e.readyDeployment(t, *dep)
		require.NoError(t, e.c.Create(ctx, resources.Service(in)))
		// 1.8.4's autoscaler: autoscaling/v1, a CPU target for the whole Pod.
		hpa := &autoscalingv1.HorizontalPodAutoscaler{ObjectMeta: resources.HPA(in).ObjectMeta, Spec: autoscalingv1.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv1.CrossVersionObjectReference{APIVersion: v1alpha2.GroupVersion.String(), Kind: "Function", Name: "old"},
			MinReplicas:    ptrTo(int32(1)), MaxReplicas: 3, TargetCPUUtilizationPercentage: ptrTo(cfg.TargetCPUUtilizationPercentage),
		}}
		require.NoError(t, e.c.Create(ctx, hpa))
		now := metav1.Now()
		fn.Status = v1alpha2.FunctionStatus{
			Runtime: v1alpha2.RuntimePython312, RuntimeImage: in.BaseImage, PodSelector: resources.PodSelector(fn), Replicas: 1,
			Conditions: []v1alpha2.Condition{
				{Type: v1alpha2.ConditionRunning, Status: corev1.ConditionTrue, Reason: v1alpha2.ReasonDeploymentReady, Message: "Deployment " + dep.Name + " is ready", LastTransitionTime: now},
				{Type: v1alpha2.ConditionBuildReady, Status: corev1.ConditionTrue, Reason: v1alpha2.ReasonJobFinished, Message: "Job " + job.Name + " finished", LastTransitionTime: now},
				{Type: v1alpha2.ConditionConfigurationReady, Status: corev1.ConditionTrue, Reason: v1alpha2.ReasonConfigMapCreated, Message: "ConfigMap " + cm.Name + " created", LastTransitionTime: now},
			},
		}
		require.NoError(t, e.c.Status().Update(ctx, fn))
		depBefore := e.deployments(t, ns, "old")[0]

		e.startController(t)
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			got := e.function(c, ns, "old")
			assert.Equal(c, got.Generation, got.Status.ObservedGeneration)
			assert.Equal(c, dep.Spec.Template.Spec.Containers[0].Image, got.Status.BuiltImage)
		}, eventual, tick)
		time.Sleep(time.Second)
		assert.Len(t, e.jobs(t, ns, "old"), 1, "no new Job")
		deps := e.deployments(t, ns, "old")
		require.Len(t, deps, 1)
		assert.Equal(t, depBefore.Generation, deps[0].Generation, "no rollout")
		assert.Equal(t, depBefore.ResourceVersion, deps[0].ResourceVersion, "Deployment untouched")
		w := e.writes.of(ns, "old")
		t.Logf("writes to take over a 1.8.4 Function: %v", w)
		assert.Equal(t, map[string]int{"patch/status *v1alpha2.Function": 1, "update *v2.HorizontalPodAutoscaler": 1}, w,
			"one status write (builtImage, observedGeneration) and the HPA's metric")
		hpas := children(t, e, ns, "old", &autoscalingv2.HorizontalPodAutoscalerList{}).Items
		require.Len(t, hpas, 1)
		assert.Equal(t, hpa.UID, hpas[0].UID, "the same HPA")
		assert.Equal(t, hpa.Labels, hpas[0].Labels)
		assert.Equal(t, resources.HPA(in).Spec.Metrics, hpas[0].Spec.Metrics, "the function container's CPU")
		got := e.function(t, ns, "old")
		assert.Equal(t, v1alpha2.ReasonDeploymentReady, conditionOf(got, v1alpha2.ConditionRunning).Reason)
	})

	t.Run("a restarted controller writes nothing", func(t *testing.T) {
		events := func() int {
			var l eventsv1.EventList
			require.NoError(t, e.c.List(context.Background(), &l))
			return len(l.Items)
		}
		// Every Function with a Deployment has its status written (none is
		// in its first-rollout delay, whose timer a stop would drop).
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			var fns v1alpha2.FunctionList
			require.NoError(c, e.c.List(context.Background(), &fns))
			for _, fn := range fns.Items {
				if len(e.deployments(c, fn.Namespace, fn.Name)) > 0 {
					assert.NotEmpty(c, conditionOf(&fn, v1alpha2.ConditionRunning).Status, "%s/%s", fn.Namespace, fn.Name)
				}
			}
		}, eventual, tick)
		e.stop()
		before := events()
		e.writes.all()
		e.startController(t)
		time.Sleep(3 * time.Second)
		assert.Empty(t, e.writes.all())
		assert.NotZero(t, before, "the Functions above emitted events")
		assert.Equal(t, before, events())
		// The restarted controller works.
		ns := e.namespace(t, "restart")
		e.createFunction(t, ns, "after-restart")
		e.waitCondition(t, ns, "after-restart", v1alpha2.ConditionBuildReady, corev1.ConditionUnknown, v1alpha2.ReasonJobCreated)
		e.finishAll(t, ns)
	})
}

type batchJobs struct {
	name string
	jobs []batchv1.Job
}

func ptrTo[T any](v T) *T { return &v }

func merge(a, b map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}
