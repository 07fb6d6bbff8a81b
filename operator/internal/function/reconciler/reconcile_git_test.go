package reconciler

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/internal/function/git"
	"github.com/kyma-project/serverless-manager/operator/internal/function/resources"
	"github.com/kyma-project/serverless-manager/tests/support/gittest"
)

// countingResolver counts the remote checks of the real resolver.
type countingResolver struct {
	mu    sync.Mutex
	calls int
}

func (c *countingResolver) Resolve(ctx context.Context, url, reference string, auth *git.Auth) (git.Resolution, error) {
	c.mu.Lock()
	c.calls++
	c.mu.Unlock()
	return git.Resolver{Timeout: 5 * time.Second}.Resolve(ctx, url, reference, auth)
}

func (c *countingResolver) take() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.calls
	c.calls = 0
	return n
}

type gitFixture struct {
	*fixture
	repo     *gittest.Repo
	resolver *countingResolver
	first    string // commit of main
	tagged   string // commit of the annotated tag v1
}

func newGitFunction(name, url, reference string) *v1alpha2.Function {
	fn := newFunction(name)
	fn.Spec.Source = v1alpha2.Source{GitRepository: &v1alpha2.GitRepositorySource{
		URL:        url,
		Auth:       &v1alpha2.RepositoryAuth{Type: git.AuthBasic, SecretName: "git-creds"},
		Repository: v1alpha2.Repository{Reference: reference, BaseDir: "/fn"},
	}}
	return fn
}

func gitSecret(password string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "git-creds", Namespace: testNS},
		Data:       map[string][]byte{"username": []byte("alice"), "password": []byte(password)},
	}
}

// newGitFixture serves a repository (main, annotated tag v1, branch
// feature/x) and a Function on reference with the Secret's password.
func newGitFixture(t *testing.T, reference, password string) *gitFixture {
	t.Helper()
	srv := gittest.NewHTTPServer(t, "alice", "s3cret")
	repo := srv.Repo(t, "fns")
	g := &gitFixture{repo: repo, resolver: &countingResolver{}}
	g.tagged = repo.Commit(map[string]string{"fn/handler.js": "v1"}, "v1")
	repo.Git("tag", "-a", "v1", "-m", "v1")
	g.first = repo.Commit(map[string]string{"fn/handler.js": "v2"}, "v2")
	repo.Git("checkout", "-q", "-b", "feature/x")
	repo.Push()
	fn := newGitFunction("hello", repo.URL, reference)
	g.fixture = newFixture(t, append(prerequisites(testNS), fn, gitSecret(password))...)
	g.r.git.resolver = g.resolver
	return g
}

// expectedImage is the pull image for a commit and baseDir (the Git form of
// docs/contributor/upstream-contract.md#image-tag).
func (g *gitFixture) expectedImage(t *testing.T, commit, baseDir string) string {
	fn := g.function(t, "hello")
	fn.Status.Commit, fn.Status.BaseDir = commit, baseDir
	return resources.PullImage(resources.Inputs{Function: fn, Config: &g.r.cfg,
		Registry:  resources.Registry{PushAddress: "registry.example:5000", PullAddress: "registry.example:5000"},
		BaseImage: "example.org/runtime-nodejs22:1"})
}

func fetcherEnv(j *batchv1.Job) map[string]string {
	env := map[string]string{}
	for _, e := range j.Spec.Template.Spec.InitContainers[0].Env {
		env[e.Name] = e.Value
	}
	return env
}

func TestGitFunctionBuildsTheBranchCommitAndRebuildsOnceOnANewCommit(t *testing.T) {
	g := newGitFixture(t, "feature/x", "s3cret")

	// Pass 1: reference resolved, status shows it, a Job builds that commit.
	requeue := g.reconcile(t, "hello")
	assert.Equal(t, g.r.cfg.FunctionReadyRequeueDuration, requeue, "branches are re-checked on the ready interval")
	assert.Equal(t, 1, g.resolver.take())
	assert.Equal(t, map[string]int{"create *v1.Job": 1, "patch/status *v1alpha2.Function": 1}, g.writes.take())
	got := g.function(t, "hello")
	c := assertCondition(t, got, v1alpha2.ConditionConfigurationReady, corev1.ConditionTrue, v1alpha2.ReasonSourceUpdated)
	assert.Contains(t, c.Message, g.first)
	assert.Equal(t, g.first, got.Status.Commit)
	assert.Equal(t, v1alpha2.Repository{Reference: "feature/x", BaseDir: "/fn"}, got.Status.Repository)
	jobs := g.jobs(t)
	require.Len(t, jobs, 1)
	assert.Equal(t, g.first, fetcherEnv(&jobs[0])["APP_REPOSITORY_COMMIT"])
	assert.Equal(t, g.expectedImage(t, g.first, "/fn"), "registry.example:5000/"+testNS+"-hello:"+
		resources.ImageTag(resources.Inputs{Function: got, BaseImage: "example.org/runtime-nodejs22:1"}))
	assert.Equal(t, g.expectedImage(t, g.first, "/fn"), resources.JobDestination(&jobs[0]))

	// Build done; a new commit on the branch inside the interval is not
	// looked for (no remote call, no write).
	g.finishJob(t, &jobs[0], batchv1.JobComplete, "CompletionsReached")
	g.reconcile(t, "hello")
	g.writes.take()
	assert.Equal(t, g.expectedImage(t, g.first, "/fn"), g.function(t, "hello").Status.BuiltImage)
	next := g.repo.Commit(map[string]string{"fn/handler.js": "v3"}, "v3")
	g.now = g.now.Add(time.Minute)
	assert.Equal(t, 4*time.Minute, g.reconcile(t, "hello"), "the rest of the interval")
	assert.Equal(t, 0, g.resolver.take())
	assert.Empty(t, g.writes.take())

	// After the interval: the new commit is found and built once.
	g.now = g.now.Add(4 * time.Minute)
	g.reconcile(t, "hello")
	g.reconcile(t, "hello")
	assert.Equal(t, 1, g.resolver.take())
	assert.Equal(t, map[string]int{"create *v1.Job": 1, "patch/status *v1alpha2.Function": 1}, g.writes.take())
	got = g.function(t, "hello")
	assert.Equal(t, next, got.Status.Commit)
	assertCondition(t, got, v1alpha2.ConditionBuildReady, corev1.ConditionUnknown, v1alpha2.ReasonJobCreated)
	jobs = g.jobs(t)
	require.Len(t, jobs, 2)
	newest := jobs[0]
	if resources.JobDestination(&jobs[1]) != g.expectedImage(t, g.first, "/fn") {
		newest = jobs[1]
	}
	assert.Equal(t, next, fetcherEnv(&newest)["APP_REPOSITORY_COMMIT"])
	assert.Equal(t, g.expectedImage(t, next, "/fn"), resources.JobDestination(&newest))
}

func TestGitReferenceOrBaseDirEditActsAtOnce(t *testing.T) {
	g := newGitFixture(t, "feature/x", "s3cret")
	g.reconcile(t, "hello")
	g.resolver.take()
	g.writes.take()

	tests := []struct {
		name, reference, baseDir string
		commit                   func() string
		requeue                  time.Duration
	}{
		{"to an annotated tag", "v1", "/fn", func() string { return g.tagged }, 0},
		{"baseDir", "v1", "fn", func() string { return g.tagged }, 0},
		{"to a full commit", g.first, "fn", func() string { return g.first }, 0},
		{"back to a branch", "main", "fn", func() string { return g.first }, g.r.cfg.FunctionReadyRequeueDuration},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fn := g.function(t, "hello")
			fn.Spec.Source.GitRepository.Reference, fn.Spec.Source.GitRepository.BaseDir = tt.reference, tt.baseDir
			fn.Generation = int64(i + 2)
			require.NoError(t, g.client.Update(context.Background(), fn))
			g.writes.take()
			g.now = g.now.Add(time.Second)

			assert.Equal(t, tt.requeue, g.reconcile(t, "hello"))
			got := g.function(t, "hello")
			assert.Equal(t, tt.commit(), got.Status.Commit)
			assert.Equal(t, v1alpha2.Repository{Reference: tt.reference, BaseDir: tt.baseDir}, got.Status.Repository)
			var dest []string
			for _, j := range g.jobs(t) {
				dest = append(dest, resources.JobDestination(&j))
			}
			assert.Contains(t, dest, g.expectedImage(t, tt.commit(), tt.baseDir), "the tag follows the new status at once")
			g.resolver.take()
		})
	}

	// Tags and commits are not re-checked by time.
	fn := g.function(t, "hello")
	fn.Spec.Source.GitRepository.Reference = "v1"
	require.NoError(t, g.client.Update(context.Background(), fn))
	g.reconcile(t, "hello")
	assert.Equal(t, 1, g.resolver.take())
	g.now = g.now.Add(time.Hour)
	assert.Zero(t, g.reconcile(t, "hello"))
	assert.Equal(t, 0, g.resolver.take())
}

func TestGitWrongPasswordGivesAClearReasonThenRecovers(t *testing.T) {
	g := newGitFixture(t, "feature/x", "wrong")

	requeue := g.reconcile(t, "hello")
	assert.Equal(t, g.r.cfg.GitFetchRequeueDuration, requeue)
	got := g.function(t, "hello")
	c := assertCondition(t, got, v1alpha2.ConditionConfigurationReady, corev1.ConditionFalse, v1alpha2.ReasonSourceUpdateFailed)
	assert.Contains(t, c.Message, "Authorization to Git server failed (credentials from Secret git-creds)")
	assert.Equal(t, []recorded{{corev1.EventTypeWarning, v1alpha2.ReasonSourceUpdateFailed, c.Message}}, g.rec.events)
	assert.Empty(t, g.jobs(t))
	assert.Empty(t, got.Status.Commit)
	assert.Equal(t, map[string]int{"patch/status *v1alpha2.Function": 1}, g.writes.take())

	// A pass within the backoff (any event): no remote call, no write.
	g.now = g.now.Add(10 * time.Second)
	assert.Equal(t, 20*time.Second, g.reconcile(t, "hello"))
	assert.Equal(t, 1, g.resolver.take())
	assert.Empty(t, g.writes.take())

	// Still wrong after the backoff: the backoff doubles, no new event.
	g.now = g.now.Add(20 * time.Second)
	assert.Equal(t, 2*g.r.cfg.GitFetchRequeueDuration, g.reconcile(t, "hello"))
	assert.Equal(t, 1, g.resolver.take())
	assert.Empty(t, g.writes.take())
	assert.Len(t, g.rec.events, 1)

	// The Secret is fixed: the retry after the backoff recovers and builds.
	require.NoError(t, g.client.Update(context.Background(), gitSecret("s3cret")))
	g.writes.take()
	g.now = g.now.Add(time.Minute)
	g.reconcile(t, "hello")
	got = g.function(t, "hello")
	assertCondition(t, got, v1alpha2.ConditionConfigurationReady, corev1.ConditionTrue, v1alpha2.ReasonSourceUpdated)
	assert.Equal(t, g.first, got.Status.Commit)
	assert.Equal(t, map[string]int{"create *v1.Job": 1, "patch/status *v1alpha2.Function": 1}, g.writes.take())
}

func TestGitFailureReasons(t *testing.T) {
	srv := gittest.NewHTTPServer(t, "alice", "s3cret")
	repo := srv.Repo(t, "fns")
	repo.Commit(map[string]string{"fn/handler.js": "v1"}, "v1")

	tests := []struct {
		name    string
		mutate  func(fn *v1alpha2.Function)
		secret  *corev1.Secret
		message string
	}{
		{"unknown branch", func(fn *v1alpha2.Function) { fn.Spec.Source.GitRepository.Reference = "nope" }, gitSecret("s3cret"),
			`Git repository or reference "nope" not found`},
		{"unreachable host", func(fn *v1alpha2.Function) { fn.Spec.Source.GitRepository.URL = "http://127.0.0.1:1/fns.git" }, gitSecret("s3cret"),
			"Git server unreachable"},
		{"missing Secret", func(*v1alpha2.Function) {}, nil, "Git credentials unusable: auth Secret fn-test/git-creds"},
		{"Secret without password", func(*v1alpha2.Function) {},
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "git-creds", Namespace: testNS}, Data: map[string][]byte{"username": []byte("a")}},
			`needs the key "password"`},
		{"no credentials for a private repository", func(fn *v1alpha2.Function) { fn.Spec.Source.GitRepository.Auth = nil }, nil,
			"Authorization to Git server failed (no credentials given"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fn := newGitFunction("hello", repo.URL, "main")
			tt.mutate(fn)
			objs := append(prerequisites(testNS), fn)
			if tt.secret != nil {
				objs = append(objs, tt.secret)
			}
			f := newFixture(t, objs...)
			assert.Equal(t, f.r.cfg.GitFetchRequeueDuration, f.reconcile(t, "hello"))
			c := assertCondition(t, f.function(t, "hello"), v1alpha2.ConditionConfigurationReady, corev1.ConditionFalse, v1alpha2.ReasonSourceUpdateFailed)
			assert.Contains(t, c.Message, tt.message)
			assert.Empty(t, f.jobs(t))
		})
	}
}

func TestGitContinuousCheckoutRechecksTheBranchOnTheFetchInterval(t *testing.T) {
	g := newGitFixture(t, "feature/x", "s3cret")
	fn := g.function(t, "hello")
	fn.Annotations = map[string]string{v1alpha2.AnnotationContinuousGitCheckout: "True"}
	require.NoError(t, g.client.Update(context.Background(), fn))

	assert.Equal(t, g.r.cfg.GitFetchRequeueDuration, g.reconcile(t, "hello"))
	assert.Equal(t, 1, g.resolver.take())
	next := g.repo.Commit(map[string]string{"fn/handler.js": "v3"}, "v3")

	g.now = g.now.Add(10 * time.Second)
	assert.Equal(t, 20*time.Second, g.reconcile(t, "hello"))
	assert.Equal(t, 0, g.resolver.take())

	g.now = g.now.Add(20 * time.Second)
	assert.Equal(t, g.r.cfg.GitFetchRequeueDuration, g.reconcile(t, "hello"))
	assert.Equal(t, 1, g.resolver.take())
	assert.Equal(t, next, g.function(t, "hello").Status.Commit)
}

func TestGitConditionRecoversFromAnotherStepWithoutARemoteCheck(t *testing.T) {
	g := newGitFixture(t, "v1", "s3cret")
	g.reconcile(t, "hello")
	assert.Equal(t, 1, g.resolver.take())

	// The registry Secret copy goes away and comes back (PrerequisitesMissing in between).
	var secret corev1.Secret
	require.NoError(t, g.client.Get(context.Background(), types.NamespacedName{Namespace: testNS, Name: g.r.cfg.ImageRegistryDefaultDockerConfigSecretName}, &secret))
	require.NoError(t, g.client.Delete(context.Background(), &secret))
	g.reconcile(t, "hello")
	assertCondition(t, g.function(t, "hello"), v1alpha2.ConditionConfigurationReady, corev1.ConditionFalse, v1alpha2.ReasonPrerequisitesMissing)
	secret.ResourceVersion = ""
	require.NoError(t, g.client.Create(context.Background(), &secret))
	g.reconcile(t, "hello")

	got := g.function(t, "hello")
	c := assertCondition(t, got, v1alpha2.ConditionConfigurationReady, corev1.ConditionTrue, v1alpha2.ReasonSourceUpdated)
	assert.Contains(t, c.Message, g.tagged)
	assert.Equal(t, 0, g.resolver.take(), "a tag is not checked again")
}

func TestSwitchingFromGitToInlineClearsTheGitStatus(t *testing.T) {
	g := newGitFixture(t, "main", "s3cret")
	g.reconcile(t, "hello")
	require.NotEmpty(t, g.function(t, "hello").Status.Commit)

	fn := g.function(t, "hello")
	fn.Spec.Source = v1alpha2.Source{Inline: &v1alpha2.InlineSource{Source: "module.exports = { main: () => 'inline' }"}}
	require.NoError(t, g.client.Update(context.Background(), fn))
	g.reconcile(t, "hello")
	got := g.function(t, "hello")
	assert.Empty(t, got.Status.Commit)
	assert.Equal(t, v1alpha2.Repository{}, got.Status.Repository)
	assertCondition(t, got, v1alpha2.ConditionConfigurationReady, corev1.ConditionTrue, v1alpha2.ReasonConfigMapCreated)
}

// Without the fetcher image (the chart always sets it) a Git Function says
// which setting is missing instead of creating a Job that cannot start.
func TestGitFunctionWithoutFetcherImageSaysSo(t *testing.T) {
	g := newGitFixture(t, "feature/x", "s3cret")
	g.r.cfg.Build.RepoFetcherImage = ""
	g.reconcile(t, "hello")
	c := assertCondition(t, g.function(t, "hello"), v1alpha2.ConditionConfigurationReady, corev1.ConditionFalse, v1alpha2.ReasonPrerequisitesMissing)
	assert.Contains(t, c.Message, "APP_FUNCTION_BUILD_REPO_FETCHER_IMAGE")
	assert.Empty(t, g.jobs(t))
	assert.Zero(t, g.resolver.take(), "no remote call")
}
