package reconciler

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/internal/function/config"
)

func TestValidateFunction(t *testing.T) {
	cfg := testConfig(t)
	tests := []struct {
		name  string
		edit  func(fn *v1alpha2.Function)
		wants []string // substrings, one per message, in order
	}{
		{name: "valid", edit: func(*v1alpha2.Function) {}},
		{name: "unknown runtime", edit: func(fn *v1alpha2.Function) { fn.Spec.Runtime = "go1" }, wants: []string{`spec.runtime "go1"`}},
		{name: "name is no DNS-1035 label (no Service possible)", edit: func(fn *v1alpha2.Function) { fn.Name = "1st" },
			wants: []string{`metadata.name "1st" cannot name the Function's Service`}},
		{name: "bad env name", edit: func(fn *v1alpha2.Function) { fn.Spec.Env = []corev1.EnvVar{{Name: "A B"}} },
			wants: []string{`spec.env[0].name "A B"`}},
		{name: "secret mounts: bad name, duplicate secret and path", edit: func(fn *v1alpha2.Function) {
			fn.Spec.SecretMounts = []v1alpha2.SecretMount{
				{SecretName: "Bad_Name", MountPath: "/a"}, {SecretName: "s", MountPath: "/b"}, {SecretName: "s", MountPath: "/b"},
			}
		}, wants: []string{`secretMounts[0].secretName "Bad_Name"`, `secretMounts[2].secretName "s" is mounted twice`, `secretMounts[2].mountPath "/b" is already in use`}},
		{name: "mount over /tmp", edit: func(fn *v1alpha2.Function) {
			fn.Spec.SecretMounts = []v1alpha2.SecretMount{{SecretName: "s", MountPath: "/tmp"}}
		}, wants: []string{`mountPath "/tmp" is already in use`}},
		{name: "node dependencies not an object", edit: func(fn *v1alpha2.Function) { fn.Spec.Source.Inline.Dependencies = "left-pad" },
			wants: []string{"dependencies must be a package.json object"}},
		{name: "blank node dependencies are fine", edit: func(fn *v1alpha2.Function) { fn.Spec.Source.Inline.Dependencies = "  " }},
		{name: "python dependencies are free text", edit: func(fn *v1alpha2.Function) {
			fn.Spec.Runtime = v1alpha2.RuntimePython312
			fn.Spec.Source.Inline.Dependencies = "requests==2.31"
		}},
		{name: "label and annotation syntax", edit: func(fn *v1alpha2.Function) {
			fn.Spec.Labels = map[string]string{"ok": "bad value!"}
			fn.Spec.Annotations = map[string]string{"bad key!": "x"}
		}, wants: []string{`spec.labels["ok"] value`, `spec.annotations key "bad key!"`}},
		{name: "custom resources below requests", edit: func(fn *v1alpha2.Function) {
			fn.Spec.ResourceConfiguration = &v1alpha2.ResourceConfiguration{Function: &v1alpha2.ResourceRequirements{
				Resources: &corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")},
					Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
				},
			}}
		}, wants: []string{"spec.resourceConfiguration.function"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { assertValidation(t, &cfg, tt.edit, tt.wants) })
	}
}

// In FIPS mode, as in release 1.13: no runtime without a FIPS image, no
// Git over SSH.
func TestValidateFunctionInFIPSMode(t *testing.T) {
	cfg := testConfig(t)
	cfg.FIPSMode = true
	git := func(url string) func(fn *v1alpha2.Function) {
		return func(fn *v1alpha2.Function) {
			fn.Spec.Source = v1alpha2.Source{GitRepository: &v1alpha2.GitRepositorySource{URL: url}}
		}
	}
	tests := []struct {
		name  string
		edit  func(fn *v1alpha2.Function)
		wants []string
	}{
		{name: "nodejs22", edit: func(*v1alpha2.Function) {}},
		{name: "nodejs24", edit: func(fn *v1alpha2.Function) { fn.Spec.Runtime = v1alpha2.RuntimeNodejs24 }},
		{name: "nodejs20", edit: func(fn *v1alpha2.Function) { fn.Spec.Runtime = v1alpha2.RuntimeNodejs20 },
			wants: []string{"spec.runtime nodejs20 cannot run in FIPS mode"}},
		{name: "python312", edit: func(fn *v1alpha2.Function) { fn.Spec.Runtime = v1alpha2.RuntimePython312 },
			wants: []string{"spec.runtime python312 cannot run in FIPS mode"}},
		{name: "Git over HTTPS", edit: git("https://example.com/org/repo.git")},
		{name: "Git over ssh://", edit: git("ssh://git@example.com/org/repo.git"),
			wants: []string{`spec.source.gitRepository.url "ssh://git@example.com/org/repo.git" is reached over SSH`}},
		{name: "Git SCP-like", edit: git("git@example.com:org/repo.git"),
			wants: []string{`"git@example.com:org/repo.git" is reached over SSH`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { assertValidation(t, &cfg, tt.edit, tt.wants) })
	}
}

// assertValidation checks the messages of a Function changed by edit:
// one per want, in order, each containing it.
func assertValidation(t *testing.T, cfg *config.Config, edit func(fn *v1alpha2.Function), wants []string) {
	t.Helper()
	fn := newFunction("hello")
	edit(fn)
	msgs := validateFunction(fn, cfg)
	if assert.Len(t, msgs, len(wants), "%q", msgs) {
		for i, w := range wants {
			assert.Contains(t, msgs[i], w)
		}
	}
}

func depWith(gen, observed int64, conds ...appsv1.DeploymentCondition) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "hello-abcde", Generation: gen},
		Status:     appsv1.DeploymentStatus{ObservedGeneration: observed, Conditions: conds},
	}
}

func depCond(t appsv1.DeploymentConditionType, s corev1.ConditionStatus, reason string) appsv1.DeploymentCondition {
	return appsv1.DeploymentCondition{Type: t, Status: s, Reason: reason, Message: "msg"}
}

func TestDeploymentState(t *testing.T) {
	availTrue := depCond(appsv1.DeploymentAvailable, corev1.ConditionTrue, "MinimumReplicasAvailable")
	availFalse := depCond(appsv1.DeploymentAvailable, corev1.ConditionFalse, "MinimumReplicasUnavailable")
	progDone := depCond(appsv1.DeploymentProgressing, corev1.ConditionTrue, "NewReplicaSetAvailable")
	progRolling := depCond(appsv1.DeploymentProgressing, corev1.ConditionTrue, "ReplicaSetUpdated")
	progFailed := depCond(appsv1.DeploymentProgressing, corev1.ConditionFalse, "ProgressDeadlineExceeded")
	tests := []struct {
		name   string
		dep    *appsv1.Deployment
		status corev1.ConditionStatus
		reason string
	}{
		{"not seen by the Deployment controller yet (not failed; 1.8.4 called it failed)", depWith(1, 0), corev1.ConditionUnknown, v1alpha2.ReasonDeploymentWaiting},
		{"old generation observed", depWith(2, 1, availTrue, progDone), corev1.ConditionUnknown, v1alpha2.ReasonDeploymentWaiting},
		{"ready", depWith(1, 1, availTrue, progDone), corev1.ConditionTrue, v1alpha2.ReasonDeploymentReady},
		{"rolling out, old Pods available", depWith(1, 1, availTrue, progRolling), corev1.ConditionUnknown, v1alpha2.ReasonDeploymentWaiting},
		{"first rollout, nothing available yet", depWith(1, 1, availFalse, progRolling), corev1.ConditionUnknown, v1alpha2.ReasonDeploymentWaiting},
		{"rolled out but Pods gone", depWith(1, 1, availFalse, progDone), corev1.ConditionUnknown, v1alpha2.ReasonMinReplicasNotAvailable},
		{"progress deadline exceeded", depWith(1, 1, availFalse, progFailed), corev1.ConditionFalse, v1alpha2.ReasonDeploymentFailed},
		{"no progressing condition", depWith(1, 1, availTrue), corev1.ConditionTrue, v1alpha2.ReasonDeploymentReady},
		{"Pods refused", depWith(1, 1, availFalse, progRolling, depCond(appsv1.DeploymentReplicaFailure, corev1.ConditionTrue, "FailedCreate")),
			corev1.ConditionFalse, v1alpha2.ReasonReplicaRefused},
		{"Pods cannot be deleted", depWith(1, 1, availTrue, progRolling, depCond(appsv1.DeploymentReplicaFailure, corev1.ConditionTrue, "FailedDelete")),
			corev1.ConditionFalse, v1alpha2.ReasonDeploymentFailed},
		{"Pods created again", depWith(1, 1, availTrue, progDone, depCond(appsv1.DeploymentReplicaFailure, corev1.ConditionFalse, "FailedCreate")),
			corev1.ConditionTrue, v1alpha2.ReasonDeploymentReady},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, reason, msg := deploymentState(tt.dep)
			assert.Equal(t, tt.status, status)
			assert.Equal(t, tt.reason, reason)
			assert.Contains(t, msg, "hello-abcde")
		})
	}
}

func TestSetConditionMovesTimeOnlyOnStatusChange(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Minute))
	st := &v1alpha2.FunctionStatus{}
	setCondition(st, v1alpha2.ConditionBuildReady, corev1.ConditionUnknown, v1alpha2.ReasonJobCreated, "a", t0)
	setCondition(st, v1alpha2.ConditionBuildReady, corev1.ConditionUnknown, v1alpha2.ReasonJobRunning, "b", t1)
	assert.Equal(t, t0, st.Condition(v1alpha2.ConditionBuildReady).LastTransitionTime, "same status: time kept")
	assert.Equal(t, "b", st.Condition(v1alpha2.ConditionBuildReady).Message)
	setCondition(st, v1alpha2.ConditionBuildReady, corev1.ConditionTrue, v1alpha2.ReasonJobFinished, "c", t1)
	assert.Equal(t, t1, st.Condition(v1alpha2.ConditionBuildReady).LastTransitionTime)
	setCondition(st, v1alpha2.ConditionConfigurationReady, corev1.ConditionTrue, v1alpha2.ReasonConfigMapCreated, "d", t1)
	assert.Equal(t, []string{v1alpha2.ConditionBuildReady, v1alpha2.ConditionConfigurationReady},
		[]string{st.Conditions[0].Type, st.Conditions[1].Type}, "new types appended, order kept")
}

func TestStatusEvents(t *testing.T) {
	cond := func(typ string, s corev1.ConditionStatus, reason, msg string) v1alpha2.Condition {
		return v1alpha2.Condition{Type: typ, Status: s, Reason: reason, Message: msg}
	}
	tests := []struct {
		name    string
		old     []v1alpha2.Condition
		cur     []v1alpha2.Condition
		reasons []string
	}{
		{name: "progress emits nothing",
			cur: []v1alpha2.Condition{cond(v1alpha2.ConditionConfigurationReady, corev1.ConditionTrue, v1alpha2.ReasonConfigMapCreated, "x"),
				cond(v1alpha2.ConditionBuildReady, corev1.ConditionUnknown, v1alpha2.ReasonJobCreated, "x")}},
		{name: "failure warns",
			old:     []v1alpha2.Condition{cond(v1alpha2.ConditionBuildReady, corev1.ConditionUnknown, v1alpha2.ReasonJobCreated, "x")},
			cur:     []v1alpha2.Condition{cond(v1alpha2.ConditionBuildReady, corev1.ConditionFalse, v1alpha2.ReasonJobFailed, "y")},
			reasons: []string{v1alpha2.ReasonJobFailed}},
		{name: "same failure again is silent",
			old: []v1alpha2.Condition{cond(v1alpha2.ConditionBuildReady, corev1.ConditionFalse, v1alpha2.ReasonJobFailed, "y")},
			cur: []v1alpha2.Condition{cond(v1alpha2.ConditionBuildReady, corev1.ConditionFalse, v1alpha2.ReasonJobFailed, "y")}},
		{name: "becoming ready as expected is silent",
			old: []v1alpha2.Condition{cond(v1alpha2.ConditionRunning, corev1.ConditionUnknown, v1alpha2.ReasonDeploymentCreated, "x")},
			cur: []v1alpha2.Condition{cond(v1alpha2.ConditionRunning, corev1.ConditionTrue, v1alpha2.ReasonDeploymentReady, "y")}},
		{name: "a new Function running at once is silent",
			cur: []v1alpha2.Condition{cond(v1alpha2.ConditionRunning, corev1.ConditionTrue, v1alpha2.ReasonDeploymentReady, "y")}},
		{name: "recovering from a failure is one Normal event",
			old: []v1alpha2.Condition{cond(v1alpha2.ConditionBuildReady, corev1.ConditionFalse, v1alpha2.ReasonJobFailed, "x"),
				cond(v1alpha2.ConditionRunning, corev1.ConditionTrue, v1alpha2.ReasonDeploymentReady, "y")},
			cur: []v1alpha2.Condition{cond(v1alpha2.ConditionBuildReady, corev1.ConditionTrue, v1alpha2.ReasonJobFinished, "z"),
				cond(v1alpha2.ConditionRunning, corev1.ConditionTrue, v1alpha2.ReasonDeploymentReady, "y")},
			reasons: []string{v1alpha2.ReasonJobFinished}},
		{name: "still ready is silent",
			old: []v1alpha2.Condition{cond(v1alpha2.ConditionRunning, corev1.ConditionTrue, v1alpha2.ReasonDeploymentReady, "y")},
			cur: []v1alpha2.Condition{cond(v1alpha2.ConditionRunning, corev1.ConditionTrue, v1alpha2.ReasonDeploymentReady, "z")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var reasons []string
			for _, e := range statusEvents(&v1alpha2.FunctionStatus{Conditions: tt.old}, &v1alpha2.FunctionStatus{Conditions: tt.cur}) {
				reasons = append(reasons, e.reason)
			}
			assert.Equal(t, tt.reasons, reasons)
		})
	}
}

func TestRetryDelayDoublesUpToTheCap(t *testing.T) {
	r := newRetries()
	key := types.NamespacedName{Namespace: "a", Name: "b"}
	var got []time.Duration
	for range 6 {
		got = append(got, r.delay(key, 30*time.Second))
		r.retried(key)
	}
	assert.Equal(t, []time.Duration{30 * time.Second, time.Minute, 2 * time.Minute, 4 * time.Minute, 5 * time.Minute, 5 * time.Minute}, got)
	r.reset(key)
	assert.Equal(t, 30*time.Second, r.delay(key, 30*time.Second))
}

func TestFirstRolloutWait(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	ready := []appsv1.DeploymentCondition{
		depCond(appsv1.DeploymentAvailable, corev1.ConditionTrue, "MinimumReplicasAvailable"),
		depCond(appsv1.DeploymentProgressing, corev1.ConditionTrue, "NewReplicaSetAvailable"),
	}
	running := []v1alpha2.Condition{{Type: v1alpha2.ConditionRunning, Status: corev1.ConditionUnknown}}
	tests := []struct {
		name    string
		stored  []v1alpha2.Condition
		rolled  string
		age     time.Duration
		isReady bool
		want    time.Duration
	}{
		{name: "just created", rolled: v1alpha2.ReasonDeploymentCreated, want: progressReportDelay},
		{name: "new and rolling out", age: 2 * time.Second, want: 3 * time.Second},
		{name: "new and ready: write now", age: 2 * time.Second, isReady: true},
		{name: "new, not ready, delay over: write", age: 6 * time.Second},
		{name: "Running already reported: write as usual", stored: running, age: time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fn := newFunction("hello")
			fn.Status.Conditions = tt.stored
			p := newPass(fn, ptrConfig(testConfig(t)), metav1.NewTime(now))
			p.rolled = tt.rolled
			dep := depWith(1, 1)
			dep.CreationTimestamp = metav1.NewTime(now.Add(-tt.age))
			if tt.isReady {
				dep.Status.Conditions = ready
			}
			assert.Equal(t, tt.want, firstRolloutWait(p, dep))
		})
	}
}

func ptrConfig[T any](v T) *T { return &v }
