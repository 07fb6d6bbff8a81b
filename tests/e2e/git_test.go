//go:build e2e

package e2e

// End-to-end tests of Git Functions: a Git server this test starts (smart
// HTTP by `git http-backend`, basic auth; gittest) serves a repository made
// with the git CLI at the real node's address, where Pods reach this
// machine. The Function controller's Pod resolves references there, the
// build Pod's init container (`function-controller fetch`) clones the
// commit, and the Function's Pod answers with what that commit holds.

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/tests/support/gittest"
)

func gitFunction(ns, name, url, reference, secret string) *v1alpha2.Function {
	return &v1alpha2.Function{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha2.FunctionSpec{Runtime: v1alpha2.RuntimeNodejs22, Source: v1alpha2.Source{GitRepository: &v1alpha2.GitRepositorySource{
			URL:        url,
			Auth:       &v1alpha2.RepositoryAuth{Type: "basic", SecretName: secret},
			Repository: v1alpha2.Repository{Reference: reference, BaseDir: "/fn"},
		}}},
	}
}

func gitCredentials(ns, name, password string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Data:       map[string][]byte{"username": []byte("alice"), "password": []byte(password)},
	}
}

// fetchedCommits are the commits the Function's build Jobs fetch (all of them).
func (f *fnEnv) fetchedCommits(ns, name string) []string {
	f.t.Helper()
	jobs, _, _, _, err := f.children(f.t.Context(), ns, name)
	require.NoError(f.t, err)
	var out []string
	for _, j := range jobs {
		init := j.Spec.Template.Spec.InitContainers
		require.NotEmpty(f.t, init, "Job %s fetches the source", j.Name)
		assert.Equal(f.t, "repo-fetcher", init[0].Name, "Job %s fetches the source first", j.Name)
		assert.Equal(f.t, []string{"/function-controller", "fetch"}, init[0].Command, "the init container runs our own binary")
		for _, e := range init[0].Env {
			if e.Name == "APP_REPOSITORY_COMMIT" {
				out = append(out, e.Value)
			}
		}
	}
	return out
}

// answers waits until the Git Function's Service answers with body: the
// handler of the commit it runs.
func (f *fnEnv) answers(ns, name, body string) {
	f.t.Helper()
	f.cluster.WaitForAnswer(f.t, time.Minute, ns, name, "/", func(got string) bool { return got == body }, f.dumpsFor(ns, name)...)
}

func testGitFunctions(t *testing.T, f *fnEnv) {
	// Not on loopback: the controller's and the build's Pods clone from it.
	srv := gittest.NewHTTPServer(t, "alice", "s3cret", gittest.ListenOn(f.cluster.NodeIP()))
	repo := srv.Repo(t, "functions")
	first := repo.Commit(map[string]string{
		"fn/handler.js":   "module.exports = { main: () => 'v1' };\n",
		"fn/package.json": `{ "name": "fn", "version": "1.0.0" }`,
		"README.md":       "not built\n",
	}, "v1")
	repo.Git("tag", "-a", "v1", "-m", "release v1")
	repo.Git("checkout", "-q", "-b", "feature/x")
	feature := repo.Commit(map[string]string{"fn/handler.js": "module.exports = { main: () => 'feature' };\n"}, "feature")
	repo.Push()

	ctx := t.Context()
	ns := f.cluster.Namespace(t, "git")
	require.NoError(t, f.c.Create(ctx, gitCredentials(ns, "git-creds", "s3cret")))

	branch := func(t *testing.T) {
		f := f.in(t)
		t.Run("a branch with a slash reaches Running at its commit", func(t *testing.T) {
			f := f.in(t)
			fn := gitFunction(ns, "branch", repo.URL, "feature/x", "git-creds")
			// Re-checked every APP_FUNCTION_GIT_FETCH_REQUEUE_DURATION (30 s), not 5 min.
			fn.Annotations = map[string]string{v1alpha2.AnnotationContinuousGitCheckout: "true"}
			require.NoError(t, f.fcs.Create(ctx, fn))
			got := f.waitRunning(ns, "branch")
			assert.Equal(t, feature, got.Status.Commit)
			assert.Equal(t, v1alpha2.Repository{Reference: "feature/x", BaseDir: "/fn"}, got.Status.Repository)
			assert.Equal(t, v1alpha2.ReasonSourceUpdated, got.Status.Condition(v1alpha2.ConditionConfigurationReady).Reason)
			assert.Equal(t, []string{feature}, f.fetchedCommits(ns, "branch"))
			assert.Equal(t, got.Status.BuiltImage, f.deployment(ns, "branch").Spec.Template.Spec.Containers[0].Image)
			assert.Equal(t, 1, f.jobs.count(ns, "branch"))
			f.answers(ns, "branch", "feature")
		})
		if t.Failed() {
			return
		}
		t.Run("a new commit pushed is built once", func(t *testing.T) {
			f := f.in(t)
			before := f.waitRunning(ns, "branch")
			next := repo.Commit(map[string]string{"fn/handler.js": "module.exports = { main: () => 'feature 2' };\n"}, "feature 2")
			after := f.waitFunction(ns, "branch", "to run the new commit", 2*time.Minute, func(fn *v1alpha2.Function) bool {
				return isRunning(fn) && fn.Status.Commit == next && fn.Status.BuiltImage != before.Status.BuiltImage
			})
			assert.Equal(t, after.Status.BuiltImage, f.deployment(ns, "branch").Spec.Template.Spec.Containers[0].Image)
			assert.Contains(t, f.fetchedCommits(ns, "branch"), next)
			f.requireJobsStay(ns, "branch", 2, "exactly one new build")
			f.answers(ns, "branch", "feature 2")
		})
	}

	tagAndCommit := func(t *testing.T) {
		f := f.in(t)
		require.NoError(t, f.fcs.Create(ctx, gitFunction(ns, "tag", repo.URL, "v1", "git-creds")))
		require.NoError(t, f.fcs.Create(ctx, gitFunction(ns, "commit", repo.URL, first, "git-creds")))
		for _, name := range []string{"tag", "commit"} {
			got := f.waitRunning(ns, name)
			assert.Equal(t, first, got.Status.Commit, "%s: the annotated tag's commit", name)
			assert.Equal(t, []string{first}, f.fetchedCommits(ns, name))
		}
		tag, commit := f.waitRunning(ns, "tag"), f.waitRunning(ns, "commit")
		assert.NotEqual(t, tag.Status.BuiltImage, commit.Status.BuiltImage, "one image per Function (uid in the tag)")
		f.answers(ns, "tag", "v1")
		f.answers(ns, "commit", "v1")
	}

	wrongPassword := func(t *testing.T) {
		f := f.in(t)
		require.NoError(t, f.c.Create(ctx, gitCredentials(ns, "wrong-creds", "wrong")))
		require.NoError(t, f.fcs.Create(ctx, gitFunction(ns, "auth", repo.URL, "main", "wrong-creds")))
		got := f.waitFunction(ns, "auth", "to report the authentication failure", time.Minute, func(fn *v1alpha2.Function) bool {
			c := fn.Status.Condition(v1alpha2.ConditionConfigurationReady)
			return c != nil && c.Status == corev1.ConditionFalse && c.Reason == v1alpha2.ReasonSourceUpdateFailed
		})
		assert.Contains(t, got.Status.Condition(v1alpha2.ConditionConfigurationReady).Message, "Authorization to Git server failed (credentials from Secret wrong-creds)")
		assert.Equal(t, 0, f.jobs.count(ns, "auth"), "no build without sources")

		secret := &corev1.Secret{}
		require.NoError(t, f.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "wrong-creds"}, secret))
		secret.Data["password"] = []byte("s3cret")
		require.NoError(t, f.c.Update(ctx, secret))
		got = f.waitFunction(ns, "auth", "to recover after the retry backoff", 2*time.Minute, isRunning)
		assert.Equal(t, first, got.Status.Commit)
		f.answers(ns, "auth", "v1")
	}

	// Three Functions of their own.
	sideBySide(t,
		subtest{"branch", branch},
		subtest{"tag and commit references", tagAndCommit},
		subtest{"a wrong password gives a clear reason, the fixed Secret recovers", wrongPassword},
	)
	if t.Failed() {
		return
	}

	// The tag's Function moves to the branch, at the commit pushed above.
	t.Run("a reference edit acts at once", func(t *testing.T) {
		f := f.in(t)
		jobs := f.jobs.count(ns, "tag")
		f.editFunction(ns, "tag", func(fn *v1alpha2.Function) { fn.Spec.Source.GitRepository.Reference = "feature/x" })
		f.waitFunction(ns, "tag", "to build the branch", 20*time.Second, func(fn *v1alpha2.Function) bool {
			return fn.Status.Reference == "feature/x" && fn.Status.Commit != first
		})
		f.waitRunning(ns, "tag")
		f.requireJobsStay(ns, "tag", jobs+1, "one build for the new reference")
		f.answers(ns, "tag", "feature 2")
	})
}
