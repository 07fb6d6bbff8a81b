package reconciler

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/internal/function/git"
)

// gitSpec is what a Git Function's last remote check was for: any change
// checks again at once (1.8.4 ignored reference and baseDir
// edits for up to 5 minutes).
type gitSpec struct {
	url, reference, baseDir, authType, secretName string
}

func gitSpecOf(repo *v1alpha2.GitRepositorySource) gitSpec {
	s := gitSpec{url: repo.URL, reference: repo.Reference, baseDir: repo.BaseDir}
	if repo.Auth != nil {
		s.authType, s.secretName = repo.Auth.Type, repo.Auth.SecretName
	}
	return s
}

// gitCheck is the outcome of a Function's last remote check.
type gitCheck struct {
	spec     gitSpec
	at       time.Time
	kind     git.Kind        // what the reference named (after a success)
	commit   string          // what it resolved to (after a success)
	keys     *git.SecretKeys // the auth Secret's layout (buildless mode, after a success)
	failures int             // consecutive failures (backoff)
}

// gitChecks remembers the last remote check of each Git Function, in
// memory: after a restart every Git Function is checked once (a remote
// read, no API write when nothing changed).
type gitChecks struct {
	mu sync.Mutex
	m  map[types.NamespacedName]gitCheck
}

func newGitChecks() *gitChecks { return &gitChecks{m: map[types.NamespacedName]gitCheck{}} }

func (g *gitChecks) get(key types.NamespacedName) (gitCheck, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	c, ok := g.m[key]
	return c, ok
}

func (g *gitChecks) succeeded(key types.NamespacedName, spec gitSpec, at time.Time, res git.Resolution, keys *git.SecretKeys) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.m[key] = gitCheck{spec: spec, at: at, kind: res.Kind, commit: res.Commit, keys: keys}
}

// failed records a failure and returns how many in a row there were for
// this spec.
func (g *gitChecks) failed(key types.NamespacedName, spec gitSpec, at time.Time) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	c := g.m[key]
	n := 1
	if c.spec == spec {
		n = c.failures + 1
	}
	g.m[key] = gitCheck{spec: spec, at: at, failures: n}
	return n
}

func (g *gitChecks) forget(key types.NamespacedName) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.m, key)
}

// gitBackoff is base doubled per earlier failure, capped at maxRetryDelay.
func gitBackoff(base time.Duration, failures int) time.Duration {
	d := base
	for i := 1; i < failures && d < maxRetryDelay; i++ {
		d *= 2
	}
	return min(d, maxRetryDelay)
}
