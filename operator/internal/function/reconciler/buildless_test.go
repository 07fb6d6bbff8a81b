package reconciler

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/internal/function/config"
	"github.com/kyma-project/serverless-manager/operator/internal/function/git"
	"github.com/kyma-project/serverless-manager/operator/internal/function/resources"
)

// fakeLeftovers records which Functions the reconciler reported converted.
type fakeLeftovers struct {
	converted []string
	forgotten []string
}

func (l *fakeLeftovers) Converted(_ context.Context, fn *v1alpha2.Function) error {
	l.converted = append(l.converted, fn.Name)
	return nil
}

func (l *fakeLeftovers) Forget(_ context.Context, key types.NamespacedName) {
	l.forgotten = append(l.forgotten, key.Name)
}

func (l *fakeLeftovers) Wake() <-chan event.GenericEvent { return nil }

func buildlessTestConfig(t *testing.T) config.Config {
	cfg := testConfig(t)
	cfg.Mode = config.ModeBuildless
	cfg.Buildless.InitImage = "example.org/function-buildless-init:1.13.0"
	cfg.Buildless.RuntimeImages = map[v1alpha2.Runtime]string{}
	for _, rt := range v1alpha2.Runtimes() {
		cfg.Buildless.RuntimeImages[rt] = "example.org/function-runtime-" + string(rt) + ":1.13.0"
	}
	return cfg
}

func newBuildlessFixture(t *testing.T, resolver GitResolver, objs ...client.Object) (*fixture, *fakeLeftovers) {
	t.Helper()
	writes := &writeCounter{}
	f := &fixture{rec: &recorder{}, writes: writes, now: time.Date(2026, 2, 1, 12, 0, 0, 0, time.UTC)}
	funcs := writes.funcs()
	count := funcs.Create
	// The API server stamps what it creates (the fake client does not).
	funcs.Create = func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
		obj.SetCreationTimestamp(metav1.NewTime(f.now))
		return count(ctx, c, obj, opts...)
	}
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).
		WithStatusSubresource(&v1alpha2.Function{}, &appsv1.Deployment{}).
		WithObjects(objs...).WithInterceptorFuncs(funcs).Build()
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	require.NoError(t, err)
	left := &fakeLeftovers{}
	f.client, f.reg = c, reg
	f.r = New(c, f.rec, m, nil, Options{Config: buildlessTestConfig(t), CacheWait: time.Second, Git: resolver,
		Leftovers: left, Now: func() time.Time { return f.now }})
	return f, left
}

func (f *fixture) readyDeployment(t *testing.T) appsv1.Deployment {
	t.Helper()
	deps := f.deployments(t)
	require.Len(t, deps, 1)
	dep := deps[0]
	dep.Status = appsv1.DeploymentStatus{ObservedGeneration: dep.Generation, Replicas: ptr.Deref(dep.Spec.Replicas, 1),
		Conditions: []appsv1.DeploymentCondition{
			depCond(appsv1.DeploymentAvailable, corev1.ConditionTrue, "MinimumReplicasAvailable"),
			depCond(appsv1.DeploymentProgressing, corev1.ConditionTrue, "NewReplicaSetAvailable"),
		}}
	require.NoError(t, f.client.Status().Update(context.Background(), &dep))
	f.writes.take()
	return dep
}

// A new inline Function: Deployment and Service created in one pass, the
// status written once it runs; 1.13's status fields, no build state.
func TestBuildlessInlineFunction(t *testing.T) {
	fn := newFunction("hello")
	fn.Spec.Annotations = map[string]string{"example.com/owner": "a"}
	fn.Status.BuiltImage = "registry.example:5000/fn-test-hello:abc"
	fn.Status.Conditions = []v1alpha2.Condition{{Type: v1alpha2.ConditionBuildReady, Status: corev1.ConditionTrue, Reason: v1alpha2.ReasonJobFinished}}
	f, left := newBuildlessFixture(t, nil, fn)

	f.reconcile(t, "hello")
	assert.Equal(t, map[string]int{"create *v1.Deployment": 1, "create *v1.Service": 1}, f.writes.take(),
		"the status waits for the new Deployment to run")
	assert.Equal(t, []string{"hello"}, left.converted)
	deps := f.deployments(t)
	require.Len(t, deps, 1)
	want := resources.BuildlessDeployment(resources.BuildlessInputs{Function: fn, Config: &f.r.cfg})
	assert.Equal(t, want.Spec, deps[0].Spec)
	assert.Equal(t, "hello-", deps[0].GenerateName)

	f.readyDeployment(t)
	f.reconcile(t, "hello")
	assert.Equal(t, map[string]int{"patch/status *v1alpha2.Function": 1}, f.writes.take())
	got := f.function(t, "hello")
	assertCondition(t, got, v1alpha2.ConditionConfigurationReady, corev1.ConditionTrue, v1alpha2.ReasonFunctionSpecValidated)
	assertCondition(t, got, v1alpha2.ConditionRunning, corev1.ConditionTrue, v1alpha2.ReasonDeploymentReady)
	assert.Nil(t, got.Status.Condition(v1alpha2.ConditionBuildReady), "no BuildReady in buildless mode")
	assert.Equal(t, "Function configured", got.Status.Condition(v1alpha2.ConditionConfigurationReady).Message)
	assert.Empty(t, got.Status.BuiltImage)
	assert.Equal(t, "example.org/function-runtime-nodejs22:1.13.0", got.Status.RuntimeImage)
	assert.Equal(t, map[string]string{"example.com/owner": "a"}, got.Status.FunctionAnnotations)
	assert.Equal(t, resources.BuildlessPodSecurityContext(fn), got.Status.PodSecurityContext)
	assert.Equal(t, resources.BuildlessContainerSecurityContext(fn), got.Status.ContainerSecurityContext)
	assert.Equal(t, resources.PodSelector(fn), got.Status.PodSelector)
	assert.Equal(t, int64(1), got.Status.ObservedGeneration)
	assert.Equal(t, int32(1), got.Status.Replicas)
	assert.Nil(t, got.Status.GitRepository)

	// Steady state: nothing written.
	f.reconcile(t, "hello")
	assert.Empty(t, f.writes.take())

	// A scale only scales; an env change rolls once.
	f.edit(t, "hello", func(fn *v1alpha2.Function) { fn.Spec.Replicas = ptr.To[int32](3) })
	f.reconcile(t, "hello")
	assert.Equal(t, map[string]int{"update *v1.Deployment": 1, "patch/status *v1alpha2.Function": 1}, f.writes.take())
	assert.Equal(t, deps[0].Spec.Template, f.deployments(t)[0].Spec.Template)
	f.edit(t, "hello", func(fn *v1alpha2.Function) { fn.Spec.Env = []corev1.EnvVar{{Name: "A", Value: "b"}} })
	f.reconcile(t, "hello")
	assert.Equal(t, map[string]int{"update *v1.Deployment": 1, "patch/status *v1alpha2.Function": 1}, f.writes.take())
	assertCondition(t, f.function(t, "hello"), v1alpha2.ConditionRunning, corev1.ConditionUnknown, v1alpha2.ReasonDeploymentUpdated)

	// Gone: the leftovers forget it.
	require.NoError(t, f.client.Delete(context.Background(), f.function(t, "hello")))
	f.reconcile(t, "hello")
	assert.Equal(t, []string{"hello"}, left.forgotten)
}

// edit changes a Function as a user would (generation moves).
func (f *fixture) edit(t *testing.T, name string, change func(*v1alpha2.Function)) {
	t.Helper()
	fn := f.function(t, name)
	change(fn)
	fn.Generation++
	require.NoError(t, f.client.Update(context.Background(), fn))
	f.writes.take()
}

// A Deployment as release 1.13 made it is adopted without a write, and a
// Function with an annotation a tool put on the template keeps it.
func TestBuildlessAdoptsRelease113Deployment(t *testing.T) {
	fn := newFunction("hello")
	fn.Spec.Annotations = map[string]string{"example.com/owner": "a"}
	fn.Status.FunctionAnnotations = map[string]string{"example.com/owner": "a"}
	f, _ := newBuildlessFixture(t, nil, fn)
	dep := resources.BuildlessDeployment(resources.BuildlessInputs{Function: fn, Config: &f.r.cfg})
	dep.Name = "hello-x7k2p"
	dep.Spec.Template.Annotations["kubectl.kubernetes.io/restartedAt"] = "2026-07-10T10:00:00Z"
	require.NoError(t, f.client.Create(context.Background(), dep))
	require.NoError(t, f.client.Create(context.Background(), resources.BuildlessService(fn)))
	f.readyDeployment(t)

	f.reconcile(t, "hello")
	assert.Equal(t, map[string]int{"patch/status *v1alpha2.Function": 1}, f.writes.take(), "only the status")
	assertCondition(t, f.function(t, "hello"), v1alpha2.ConditionRunning, corev1.ConditionTrue, v1alpha2.ReasonDeploymentReady)
	assert.Equal(t, "2026-07-10T10:00:00Z", f.deployments(t)[0].Spec.Template.Annotations["kubectl.kubernetes.io/restartedAt"])
}

// Several Deployments: the one on the Function's template stays (not the
// oldest), the others go; none is created.
func TestBuildlessDuplicatesKeepOne(t *testing.T) {
	fn := newFunction("hello")
	f, _ := newBuildlessFixture(t, nil, fn)
	old := resources.Deployment(resources.Inputs{Function: fn, Config: &f.r.cfg})
	old.Name, old.CreationTimestamp = "hello-old", metav1.NewTime(f.now.Add(-time.Hour))
	current := resources.BuildlessDeployment(resources.BuildlessInputs{Function: fn, Config: &f.r.cfg})
	current.Name, current.CreationTimestamp = "hello-new", metav1.NewTime(f.now.Add(-time.Minute))
	require.NoError(t, f.client.Create(context.Background(), old))
	require.NoError(t, f.client.Create(context.Background(), current))
	f.writes.take()

	f.reconcile(t, "hello")
	deps := f.deployments(t)
	require.Len(t, deps, 1)
	assert.Equal(t, "hello-new", deps[0].Name)
	assert.Equal(t, 1, f.writes.take()["delete *v1.Deployment"])
}

type fixedResolver struct {
	res   git.Resolution
	calls int
}

func (r *fixedResolver) Resolve(context.Context, string, string, *git.Auth) (git.Resolution, error) {
	r.calls++
	return r.res, nil
}

// A Git Function: the reference resolved by the controller, the init
// container cloning that commit with the auth Secret's keys by its type;
// the Secret is read with each check only.
func TestBuildlessGitFunction(t *testing.T) {
	fn := newFunction("g")
	fn.Spec.Runtime = v1alpha2.RuntimePython312
	fn.Spec.Source = v1alpha2.Source{GitRepository: &v1alpha2.GitRepositorySource{
		URL:        "https://github.com/example/functions.git",
		Auth:       &v1alpha2.RepositoryAuth{Type: "basic", SecretName: "creds"},
		Repository: v1alpha2.Repository{BaseDir: "/fn", Reference: "main"},
	}}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds", Namespace: testNS}, Type: corev1.SecretTypeBasicAuth,
		Data: map[string][]byte{"username": []byte("u"), "password": []byte("p")}}
	commit := "3f1c0e6a9b8d7c5e4f3a2b1c0d9e8f7a6b5c4d3e"
	resolver := &fixedResolver{res: git.Resolution{Commit: commit, Kind: git.KindBranch}}
	f, _ := newBuildlessFixture(t, resolver, fn, secret)

	requeue := f.reconcile(t, "g")
	assert.Equal(t, progressReportDelay, requeue, "the status waits for the new Deployment")
	deps := f.deployments(t)
	require.Len(t, deps, 1)
	init := deps[0].Spec.Template.Spec.InitContainers
	require.Len(t, init, 1)
	assert.Equal(t, "example.org/function-buildless-init:1.13.0", init[0].Image)
	assert.Contains(t, init[0].Env, corev1.EnvVar{Name: "APP_REPOSITORY_COMMIT", Value: commit})
	assert.Contains(t, init[0].Env, corev1.EnvVar{Name: "APP_REPOSITORY_USERNAME", ValueFrom: &corev1.EnvVarSource{
		SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}, Key: "username"}}})

	f.readyDeployment(t)
	f.now = f.now.Add(time.Second)
	requeue = f.reconcile(t, "g")
	assert.Equal(t, f.r.cfg.FunctionReadyRequeueDuration-time.Second, requeue, "a branch is checked again after the ready requeue")
	got := f.function(t, "g")
	assertCondition(t, got, v1alpha2.ConditionConfigurationReady, corev1.ConditionTrue, v1alpha2.ReasonFunctionSpecValidated)
	assertCondition(t, got, v1alpha2.ConditionRunning, corev1.ConditionTrue, v1alpha2.ReasonDeploymentReady)
	assert.Equal(t, &v1alpha2.GitRepositoryStatus{URL: fn.Spec.Source.GitRepository.URL,
		Repository: v1alpha2.Repository{BaseDir: "/fn", Reference: "main"}, Commit: commit}, got.Status.GitRepository)
	assert.Equal(t, commit, got.Status.Commit)
	assert.Equal(t, "/fn", got.Status.BaseDir)
	assert.Equal(t, 1, resolver.calls)

	// Not due: no remote call, the auth layout remembered, nothing written.
	f.writes.take()
	f.reconcile(t, "g")
	assert.Empty(t, f.writes.take())
	assert.Equal(t, 1, resolver.calls)
}

// A Secret whose type contradicts the auth type stops the Function with
// 1.13's reason, naming the cause; no Deployment.
func TestBuildlessGitAuthSecretMismatch(t *testing.T) {
	fn := newFunction("g")
	fn.Spec.Source = v1alpha2.Source{GitRepository: &v1alpha2.GitRepositorySource{
		URL: "https://github.com/example/functions.git", Auth: &v1alpha2.RepositoryAuth{Type: "key", SecretName: "creds"},
		Repository: v1alpha2.Repository{Reference: "main"},
	}}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds", Namespace: testNS}, Type: corev1.SecretTypeBasicAuth,
		Data: map[string][]byte{"username": []byte("u"), "password": []byte("p")}}
	f, _ := newBuildlessFixture(t, &fixedResolver{}, fn, secret)
	f.reconcile(t, "g")
	got := f.function(t, "g")
	c := assertCondition(t, got, v1alpha2.ConditionConfigurationReady, corev1.ConditionFalse, v1alpha2.ReasonSourceUpdateFailed)
	assert.Contains(t, c.Message, `needs auth type "basic"`)
	assert.Empty(t, f.deployments(t))
}

// A build-mode Deployment is updated once to the buildless template; then
// the leftovers are told.
func TestBuildlessTakesOverBuildModeDeployment(t *testing.T) {
	fn := newFunction("hello")
	fn.Status.Conditions = []v1alpha2.Condition{{Type: v1alpha2.ConditionRunning, Status: corev1.ConditionTrue, Reason: v1alpha2.ReasonDeploymentReady}}
	f, left := newBuildlessFixture(t, nil, fn)
	old := resources.Deployment(resources.Inputs{Function: fn, Config: &f.r.cfg})
	old.Name = "hello-built"
	require.NoError(t, f.client.Create(context.Background(), old))
	f.readyDeployment(t)

	f.reconcile(t, "hello")
	assert.Equal(t, map[string]int{"update *v1.Deployment": 1, "create *v1.Service": 1, "patch/status *v1alpha2.Function": 1}, f.writes.take())
	deps := f.deployments(t)
	require.Len(t, deps, 1)
	assert.Equal(t, "hello-built", deps[0].Name, "the same Deployment")
	assert.Empty(t, deps[0].Spec.Template.Spec.ServiceAccountName)
	assertCondition(t, f.function(t, "hello"), v1alpha2.ConditionRunning, corev1.ConditionUnknown, v1alpha2.ReasonDeploymentUpdated)
	assert.Equal(t, []string{"hello"}, left.converted)

	f.reconcile(t, "hello")
	assert.Empty(t, f.writes.take()["update *v1.Deployment"], "once")
}
