package reconciler

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/internal/function/git"
	"github.com/kyma-project/serverless-manager/operator/internal/function/resources"
	"github.com/kyma-project/serverless-manager/operator/internal/steps"
)

// GitResolver resolves a Git Function's reference to a commit
// (git.Resolver; tests may count or fail calls).
type GitResolver interface {
	Resolve(ctx context.Context, url, reference string, auth *git.Auth) (git.Resolution, error)
}

// gitDeps are the Git parts of a Reconciler.
type gitDeps struct {
	resolver GitResolver
	checks   *gitChecks
	// auth reads the credentials from the auth Secret, and in buildless
	// mode which of its keys the Pod reads (nil in build mode).
	auth func(authType string, secret *corev1.Secret) (*git.Auth, *git.SecretKeys, error)
}

// buildAuth reads the auth Secret as 1.8.4's fetcher does (its keys).
func buildAuth(authType string, secret *corev1.Secret) (*git.Auth, *git.SecretKeys, error) {
	auth, err := git.AuthFromSecret(authType, secret.Data)
	return auth, nil, err
}

// buildlessAuth reads the auth Secret as release 1.13 does: its keys by the
// Secret's type.
func buildlessAuth(authType string, secret *corev1.Secret) (*git.Auth, *git.SecretKeys, error) {
	keys, err := git.SecretKeysOf(secret.Type, authType, secret.Data)
	if err != nil {
		return nil, nil, err
	}
	auth, err := keys.Auth(authType, secret.Data)
	if err != nil {
		return nil, nil, err
	}
	return auth, &keys, nil
}

// gitSource is the source step of a Git Function in build mode: checkGit, with
// the image tag and the build Job derived from the status values it records
// (docs/contributor/upstream-contract.md#image-tag), so a new commit or an
// edited reference/baseDir builds once, in this very pass.
func (r *Reconciler) gitSource(ctx context.Context, p *pass) (steps.Outcome, error) {
	if p.fn.Spec.Source.GitRepository == nil {
		return r.noSource(p)
	}
	if missing := r.ownImageMissing(); missing != nil {
		setCondition(&p.status, v1alpha2.ConditionConfigurationReady, missing.status, missing.reason, missing.message, p.now)
		return steps.Fail(missing.reason), nil
	}
	// A Function switched from inline to Git keeps no source ConfigMap.
	for i := range p.configMaps {
		if err := r.remove(ctx, &p.configMaps[i]); err != nil {
			return steps.Outcome{}, err
		}
	}
	return r.checkGit(ctx, p, func() {
		// The children are derived from the status values just set.
		fn := p.fn.DeepCopy()
		fn.Status.Commit, fn.Status.Reference, fn.Status.BaseDir = p.status.Commit, p.status.Reference, p.status.BaseDir
		p.in.Function = fn
		p.pullImage, p.pushImage = resources.PullImage(p.in), resources.PushImage(p.in)
	})
}

func (r *Reconciler) noSource(p *pass) (steps.Outcome, error) {
	setCondition(&p.status, v1alpha2.ConditionConfigurationReady, corev1.ConditionFalse, v1alpha2.ReasonInvalidFunctionSpec,
		"spec.source has neither inline nor gitRepository", p.now)
	return steps.Fail(v1alpha2.ReasonInvalidFunctionSpec), nil
}

// checkGit resolves spec.source.gitRepository.reference to a commit when a
// check is due and records commit, reference and baseDir in the status
// (changed runs when one of them changed); p.gitKeys is the auth Secret's
// layout of the last check.
//
// A check is due when the Function is new to this process, its Git spec
// (url, reference, baseDir, auth) changed since the last check, a failed
// check's backoff is over, or — branches only — the last check is older
// than APP_FUNCTION_FUNCTION_READY_REQUEUE_DURATION (branchInterval). Tags and commits are checked only on
// spec changes. A failure sets ConfigurationReady False SourceUpdateFailed
// naming the cause and ends the pass, retried after GitFetchRequeueDuration
// doubled per failure (cap 5 min); the running Deployment stays.
func (r *Reconciler) checkGit(ctx context.Context, p *pass, changed func()) (steps.Outcome, error) {
	repo := p.fn.Spec.Source.GitRepository
	spec := gitSpecOf(repo)
	due, wait := r.gitDue(p, spec)
	if !due {
		last, _ := r.git.checks.get(p.key)
		if last.failures > 0 {
			// Still failing: keep the condition, wait for the backoff.
			return steps.Fail(v1alpha2.ReasonSourceUpdateFailed).Within(wait), nil
		}
		// The last check's result; it may not be in the status yet (a pass
		// that did not write it).
		return steps.Next().Within(wait), r.recordGit(p, git.Resolution{Commit: last.commit, Kind: last.kind}, last.keys, changed)
	}

	res, keys, err := r.resolveGit(ctx, p, repo)
	if err != nil {
		n := r.git.checks.failed(p.key, spec, p.now.Time)
		setCondition(&p.status, v1alpha2.ConditionConfigurationReady, corev1.ConditionFalse, v1alpha2.ReasonSourceUpdateFailed,
			gitFailure(p.fn, err), p.now)
		return steps.Fail(v1alpha2.ReasonSourceUpdateFailed).Within(gitBackoff(r.cfg.GitFetchRequeueDuration, n)), nil
	}
	r.git.checks.succeeded(p.key, spec, p.now.Time, res, keys)
	out := steps.Next()
	if res.Kind == git.KindBranch {
		out = out.Within(r.branchInterval(p.fn))
	}
	return out, r.recordGit(p, res, keys, changed)
}

// recordGit puts a check's result into the status; changed runs when
// commit, reference or baseDir changed. ConfigurationReady becomes True
// also when another step's failure (prerequisites, validation) is over.
func (r *Reconciler) recordGit(p *pass, res git.Resolution, keys *git.SecretKeys, changed func()) error {
	repo := p.fn.Spec.Source.GitRepository
	p.gitKeys = keys
	st := &p.status
	if st.Commit != res.Commit || st.Reference != repo.Reference || st.BaseDir != repo.BaseDir ||
		!isTrue(st, v1alpha2.ConditionConfigurationReady) {
		st.Commit, st.Reference, st.BaseDir = res.Commit, repo.Reference, repo.BaseDir
		setCondition(st, v1alpha2.ConditionConfigurationReady, corev1.ConditionTrue, v1alpha2.ReasonSourceUpdated,
			sourcesUpdated(p.fn.Name, res.Kind, repo.Reference, res.Commit), p.now)
		if changed != nil {
			changed()
		}
	}
	return nil
}

// gitDue decides whether this pass contacts the remote; when not, wait is
// how long until it will (0: only a spec change will).
func (r *Reconciler) gitDue(p *pass, spec gitSpec) (bool, time.Duration) {
	last, ok := r.git.checks.get(p.key)
	if !ok || last.spec != spec {
		return true, 0
	}
	now := p.now.Time
	if last.failures > 0 {
		next := last.at.Add(gitBackoff(r.cfg.GitFetchRequeueDuration, last.failures))
		return !now.Before(next), next.Sub(now)
	}
	if last.kind != git.KindBranch {
		return false, 0
	}
	next := last.at.Add(r.branchInterval(p.fn))
	return !now.Before(next), next.Sub(now)
}

// branchInterval is how often a branch is re-checked: the ready requeue
// interval, or with the continuousGitCheckout annotation the (shorter) Git
// fetch interval (APP_FUNCTION_GIT_FETCH_REQUEUE_DURATION) — 1.8.4 checked
// on each of its 1-second polls then; we do not poll.
func (r *Reconciler) branchInterval(fn *v1alpha2.Function) time.Duration {
	if strings.EqualFold(fn.Annotations[v1alpha2.AnnotationContinuousGitCheckout], "true") {
		return min(r.cfg.GitFetchRequeueDuration, r.cfg.FunctionReadyRequeueDuration)
	}
	return r.cfg.FunctionReadyRequeueDuration
}

// errAuthSecret: the auth Secret cannot be used.
var errAuthSecret = errors.New("auth Secret")

// resolveGit reads the auth Secret (from the API server: user Secrets are
// not cached) and resolves the reference.
func (r *Reconciler) resolveGit(ctx context.Context, p *pass, repo *v1alpha2.GitRepositorySource) (git.Resolution, *git.SecretKeys, error) {
	var (
		auth *git.Auth
		keys *git.SecretKeys
	)
	if a := repo.Auth; a != nil {
		var reader client.Reader = r.client
		if r.api != nil {
			reader = r.api
		}
		secret := &corev1.Secret{}
		key := types.NamespacedName{Namespace: p.fn.Namespace, Name: a.SecretName}
		if err := reader.Get(ctx, key, secret); err != nil {
			return git.Resolution{}, nil, fmt.Errorf("%w %s: %w", errAuthSecret, key, err)
		}
		var err error
		if auth, keys, err = r.git.auth(a.Type, secret); err != nil {
			return git.Resolution{}, nil, fmt.Errorf("%w %s: %w", errAuthSecret, key, err)
		}
	}
	res, err := r.git.resolver.Resolve(ctx, repo.URL, repo.Reference, auth)
	return res, keys, err
}

// gitFailure is the ConfigurationReady message of a failed check: the
// cause first, then the details.
func gitFailure(fn *v1alpha2.Function, err error) string {
	repo := fn.Spec.Source.GitRepository
	secret := "no credentials given (spec.source.gitRepository.auth)"
	if repo.Auth != nil {
		secret = "credentials from Secret " + repo.Auth.SecretName
	}
	switch {
	case errors.Is(err, errAuthSecret):
		return fmt.Sprintf("Git credentials unusable: %v", err)
	case errors.Is(err, git.ErrAuthentication):
		return fmt.Sprintf("Authorization to Git server failed (%s): %v", secret, err)
	case errors.Is(err, git.ErrHostKey):
		return fmt.Sprintf("Git server's SSH host key rejected (knownHosts in the auth Secret): %v", err)
	case errors.Is(err, git.ErrNotFound):
		return fmt.Sprintf("Git repository or reference %q not found: %v", repo.Reference, err)
	case errors.Is(err, git.ErrUnreachable):
		return fmt.Sprintf("Git server unreachable: %v", err)
	}
	return fmt.Sprintf("Sources update failed: %v", err)
}

// sourcesUpdated is the SourceUpdated message (1.8.4: "Sources <fn> updated").
func sourcesUpdated(name string, kind git.Kind, reference, commit string) string {
	return fmt.Sprintf("Sources %s updated: %s %q at commit %s", name, kind, reference, commit)
}
