package reconciler

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/internal/function/resources"
)

// The status fields release 1.13's clients read are filled in from what
// the Deployment gives the Pods.
func TestStatusForRelease113Clients(t *testing.T) {
	tests := []struct {
		name        string
		mutate      func(fn *v1alpha2.Function)
		annotations map[string]string
		warning     bool
	}{
		{name: "nodejs22, nothing set"},
		{name: "nodejs24 with security contexts and annotations", mutate: func(fn *v1alpha2.Function) {
			fn.Spec.Runtime = v1alpha2.RuntimeNodejs24
			fn.Spec.Annotations = map[string]string{"example.com/a": "b"}
			fn.Spec.PodSecurityContext = &corev1.PodSecurityContext{FSGroup: ptr.To[int64](1000)}
			fn.Spec.ContainerSecurityContext = &corev1.SecurityContext{RunAsNonRoot: ptr.To(true)}
		}, annotations: map[string]string{"example.com/a": "b"}},
		{name: "nodejs20 is flagged deprecated", mutate: func(fn *v1alpha2.Function) {
			fn.Spec.Runtime = v1alpha2.RuntimeNodejs20
		}, warning: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fn := newFunction("hello")
			if tt.mutate != nil {
				tt.mutate(fn)
			}
			f := newFixture(t, append(prerequisites(testNS), fn)...)
			f.reconcile(t, "hello")
			jobs := f.jobs(t)
			require.Len(t, jobs, 1)
			f.finishJob(t, &jobs[0], batchv1.JobComplete, "CompletionsReached")
			f.reconcile(t, "hello")

			got := f.function(t, "hello")
			deps := f.deployments(t)
			require.Len(t, deps, 1)
			pod := deps[0].Spec.Template.Spec
			assert.Equal(t, pod.SecurityContext, got.Status.PodSecurityContext, "the Pod's security context in effect")
			assert.Equal(t, pod.Containers[0].SecurityContext, got.Status.ContainerSecurityContext)
			assert.Equal(t, tt.annotations, got.Status.FunctionAnnotations)
			assert.Nil(t, got.Status.GitRepository, "an inline Function has no Git status")

			c := assertCondition(t, got, v1alpha2.ConditionConfigurationReady, corev1.ConditionTrue, v1alpha2.ReasonConfigMapCreated)
			var warnings []recorded
			for _, e := range f.rec.events {
				if e.kind == corev1.EventTypeWarning {
					warnings = append(warnings, e)
				}
			}
			if tt.warning {
				assert.Regexp(t, `^Warning: runtime nodejs20 is deprecated and will be removed in the future\. ConfigMap hello-\w+ created$`, c.Message)
				require.Len(t, warnings, 1, "one Warning event")
				assert.Equal(t, c.Message, warnings[0].message)
			} else {
				assert.NotContains(t, c.Message, "deprecated")
				assert.Empty(t, warnings)
			}
			for _, c := range got.Status.Conditions {
				assert.NotEmpty(t, c.Reason, "metav1.Condition requires a reason")
				assert.False(t, c.LastTransitionTime.IsZero(), "metav1.Condition requires lastTransitionTime")
			}

			// A steady pass writes nothing: the mirrored fields are stable.
			f.writes.take()
			f.reconcile(t, "hello")
			assert.Empty(t, f.writes.take())
		})
	}
}

func TestMirrorStatus(t *testing.T) {
	const commit = "0123456789abcdef0123456789abcdef01234567"
	git := &v1alpha2.GitRepositorySource{URL: "https://git.example/fn.git", Repository: v1alpha2.Repository{BaseDir: "/fn", Reference: "main"}}
	configured := func(msg string) []v1alpha2.Condition {
		return []v1alpha2.Condition{{Type: v1alpha2.ConditionConfigurationReady, Status: corev1.ConditionTrue, Reason: v1alpha2.ReasonSourceUpdated, Message: msg}}
	}
	tests := []struct {
		name    string
		runtime v1alpha2.Runtime
		git     *v1alpha2.GitRepositorySource
		status  v1alpha2.FunctionStatus
		wantGit *v1alpha2.GitRepositoryStatus
		wantMsg string
	}{
		{name: "git: mirrored from the deprecated fields", runtime: v1alpha2.RuntimeNodejs22, git: git,
			status:  v1alpha2.FunctionStatus{Repository: git.Repository, Commit: commit, Conditions: configured("m")},
			wantGit: &v1alpha2.GitRepositoryStatus{URL: git.URL, Repository: git.Repository, Commit: commit}, wantMsg: "m"},
		{name: "git not resolved yet: none", runtime: v1alpha2.RuntimeNodejs22, git: git,
			status: v1alpha2.FunctionStatus{Conditions: configured("m")}, wantMsg: "m"},
		{name: "inline: none, a stale one is dropped", runtime: v1alpha2.RuntimePython312,
			status: v1alpha2.FunctionStatus{GitRepository: &v1alpha2.GitRepositoryStatus{URL: "u"}, Conditions: configured("m")}, wantMsg: "m"},
		{name: "deprecated runtime: warning leads", runtime: v1alpha2.RuntimeNodejs20,
			status: v1alpha2.FunctionStatus{Conditions: configured("m")}, wantMsg: "Warning: runtime nodejs20 is deprecated and will be removed in the future. m"},
		{name: "warning not repeated", runtime: v1alpha2.RuntimeNodejs20,
			status:  v1alpha2.FunctionStatus{Conditions: configured("Warning: runtime nodejs20 is deprecated and will be removed in the future. m")},
			wantMsg: "Warning: runtime nodejs20 is deprecated and will be removed in the future. m"},
		{name: "runtime changed: warning gone", runtime: v1alpha2.RuntimeNodejs24,
			status:  v1alpha2.FunctionStatus{Conditions: configured("Warning: runtime nodejs20 is deprecated and will be removed in the future. m")},
			wantMsg: "m"},
		{name: "failed configuration: no warning", runtime: v1alpha2.RuntimeNodejs20,
			status: v1alpha2.FunctionStatus{Conditions: []v1alpha2.Condition{{Type: v1alpha2.ConditionConfigurationReady, Status: corev1.ConditionFalse,
				Reason: v1alpha2.ReasonInvalidFunctionSpec, Message: "m"}}}, wantMsg: "m"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fn := newFunction("hello")
			fn.Spec.Runtime = tt.runtime
			if tt.git != nil {
				fn.Spec.Source = v1alpha2.Source{GitRepository: tt.git}
			}
			cfg := testConfig(t)
			p := &pass{fn: fn, status: tt.status, in: resources.Inputs{Function: fn, Config: &cfg}}
			mirrorStatus(p)
			assert.Equal(t, tt.wantGit, p.status.GitRepository)
			assert.Equal(t, tt.wantMsg, p.status.Condition(v1alpha2.ConditionConfigurationReady).Message)
		})
	}
}

// A module upgrade that only brings a newer runtime base image rebuilds and
// rolls nothing, also for a Deployment 1.8.4 left; the next change of the
// Function's inputs builds on the new base.
func TestNewRuntimeBaseRebuildsNothingUntilTheFunctionChanges(t *testing.T) {
	tests := []struct {
		name       string
		builtImage bool // status.builtImage recorded (ours) or not (1.8.4's status)
	}{
		{name: "built by this controller", builtImage: true},
		{name: "built by 1.8.4"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			fn := newFunction("hello")
			f := newFixture(t, append(prerequisites(testNS), fn)...)
			p := newPass(fn, &f.r.cfg, metav1.NewTime(f.now))
			_, err := f.r.prerequisites(ctx, p)
			require.NoError(t, err)
			oldBase := p.in.BaseImage
			dep := resources.Deployment(p.in)
			dep.Name = "hello-old12"
			require.NoError(t, f.client.Create(ctx, dep))
			fn = f.function(t, "hello")
			fn.Status.RuntimeImage = oldBase
			if tt.builtImage {
				fn.Status.BuiltImage = p.pullImage
			}
			require.NoError(t, f.client.Status().Update(ctx, fn))

			// The chart brings a new base for the runtime.
			cm := &corev1.ConfigMap{}
			require.NoError(t, f.client.Get(ctx, types.NamespacedName{Namespace: testNS, Name: "dockerfile-nodejs22"}, cm))
			cm.Data["Dockerfile"] = "ARG base_image=example.org/runtime-nodejs22:2\nFROM ${base_image}\n"
			require.NoError(t, f.client.Update(ctx, cm))
			f.writes.take()

			f.reconcile(t, "hello")
			assert.Empty(t, f.jobs(t), "no build")
			deps := f.deployments(t)
			require.Len(t, deps, 1)
			assert.Equal(t, dep.Generation, deps[0].Generation, "no rollout")
			assert.Equal(t, dep.Spec.Template.Spec.Containers[0].Image, deps[0].Spec.Template.Spec.Containers[0].Image)
			got := f.function(t, "hello")
			assert.Equal(t, oldBase, got.Status.RuntimeImage, "the base the running image was built on")
			assert.Equal(t, p.pullImage, got.Status.BuiltImage)

			// A source change builds on the new base.
			got.Spec.Source.Inline.Source = "module.exports = { main: () => 'new' }"
			got.Generation++
			require.NoError(t, f.client.Update(ctx, got))
			f.reconcile(t, "hello")
			jobs := f.jobs(t)
			require.Len(t, jobs, 1)
			assert.Equal(t, "example.org/runtime-nodejs22:2", f.function(t, "hello").Status.RuntimeImage)
		})
	}
}
