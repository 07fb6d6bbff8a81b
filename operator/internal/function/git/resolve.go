// Package git resolves the reference of a Git Function to a commit and
// fetches one commit into a directory, in pure Go (go-git; 1.8.4 used
// libgit2 through cgo). Resolving lists the remote's references (what
// `git ls-remote` does), it never clones; a full commit SHA needs no
// network at all. Errors name their cause (errors.Is with ErrAuthentication,
// ErrHostKey, ErrNotFound, ErrUnreachable, ErrInvalid).
package git

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"

	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/storage/memory"
)

// Kind is what a reference named.
type Kind string

const (
	KindBranch Kind = "branch"
	KindTag    Kind = "tag"
	KindCommit Kind = "commit"
	// KindRef: a full reference name (refs/…, HEAD) that is neither a
	// branch nor a tag.
	KindRef Kind = "ref"
)

// Resolution is a reference resolved to a commit.
type Resolution struct {
	Commit string // 40 lowercase hex digits
	Kind   Kind
}

// DefaultTimeout bounds one remote operation of a Resolver.
const DefaultTimeout = 30 * time.Second

// Resolver resolves references. The zero value uses DefaultTimeout.
type Resolver struct {
	Timeout time.Duration
}

var (
	fullSHA  = regexp.MustCompile(`^[0-9a-fA-F]{40}$`)
	shortSHA = regexp.MustCompile(`^[0-9a-fA-F]{4,39}$`)
)

// IsCommit reports whether reference is a full commit SHA (resolved
// without the network).
func IsCommit(reference string) bool { return fullSHA.MatchString(reference) }

// Resolve returns the commit reference names in the repository at url:
// a full 40-hex SHA as it is (no network); else, from the remote's
// reference list, in this order: an exact full name (refs/…, HEAD), the
// branch refs/heads/<reference> (names with "/" included; 1.8.4 missed them), the
// tag refs/tags/<reference> (an annotated tag peeled to its commit).
// Abbreviated SHAs are not resolved (the protocol lists references, not
// objects; resolving them needs a clone): ErrNotFound says to use the full
// SHA.
func (r Resolver) Resolve(ctx context.Context, url, reference string, auth *Auth) (Resolution, error) {
	reference = strings.TrimSpace(reference)
	if reference == "" {
		return Resolution{}, invalid("no reference given")
	}
	if IsCommit(reference) {
		return Resolution{Commit: strings.ToLower(reference), Kind: KindCommit}, nil
	}
	refs, err := r.list(ctx, url, auth)
	if err != nil {
		return Resolution{}, err
	}
	candidates := []struct {
		name string
		kind Kind
	}{
		{reference, KindRef},
		{"refs/heads/" + reference, KindBranch},
		{"refs/tags/" + reference, KindTag},
	}
	for _, c := range candidates {
		if c.kind == KindRef && !strings.HasPrefix(reference, "refs/") && reference != "HEAD" {
			continue
		}
		hash, ok := refs[c.name]
		if !ok {
			continue
		}
		// An annotated tag lists its tag object; the server also lists the
		// commit it points to as <name>^{}.
		if peeled, ok := refs[c.name+"^{}"]; ok {
			hash = peeled
		}
		kind := c.kind
		switch {
		case strings.HasPrefix(c.name, "refs/heads/"):
			kind = KindBranch
		case strings.HasPrefix(c.name, "refs/tags/"):
			kind = KindTag
		}
		return Resolution{Commit: hash, Kind: kind}, nil
	}
	hint := ""
	if shortSHA.MatchString(reference) {
		hint = " (an abbreviated commit is not resolved: use the full 40-digit SHA)"
	}
	return Resolution{}, &Error{Cause: ErrNotFound,
		Err: fmt.Errorf("reference %q is no branch, tag or ref of %s%s", reference, url, hint)}
}

// list returns the remote's references: full name → hash (symbolic
// references resolved, annotated tags also as <name>^{} → commit).
func (r Resolver) list(ctx context.Context, url string, auth *Auth) (map[string]string, error) {
	method, err := prepare(url, auth)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, r.timeout())
	defer cancel()
	remote := gogit.NewRemote(memory.NewStorage(), &config.RemoteConfig{Name: "origin", URLs: []string{url}})
	refs, err := remote.ListContext(ctx, &gogit.ListOptions{Auth: method, PeelingOption: gogit.AppendPeeled})
	if err != nil {
		return nil, classify(fmt.Errorf("listing the references of %s: %w", url, err))
	}
	out := make(map[string]string, len(refs))
	var symbolic []*plumbing.Reference
	for _, ref := range refs {
		switch ref.Type() {
		case plumbing.HashReference:
			out[ref.Name().String()] = ref.Hash().String()
		case plumbing.SymbolicReference:
			symbolic = append(symbolic, ref)
		}
	}
	for _, ref := range symbolic {
		if target, ok := out[ref.Target().String()]; ok {
			out[ref.Name().String()] = target
		}
	}
	return out, nil
}

// prepare checks url and returns the auth method for it. Only network
// transports are allowed: a file URL or a local path would read the
// controller's (or the build Pod's) own file system, and git:// has no
// authentication. The CRD rejects them too, but a Function stored before
// that rule keeps its URL through updates that leave it unchanged.
func prepare(url string, auth *Auth) (transport.AuthMethod, error) {
	ep, err := transport.NewEndpoint(url)
	if err != nil {
		return nil, invalid("repository URL %q: %w", url, err)
	}
	switch ep.Protocol {
	case "http", "https", "ssh":
	default:
		return nil, invalid("repository URL %q: protocol %q is not allowed (use https, http or ssh)", url, ep.Protocol)
	}
	return auth.method(url)
}

func (r Resolver) timeout() time.Duration {
	if r.Timeout > 0 {
		return r.Timeout
	}
	return DefaultTimeout
}
