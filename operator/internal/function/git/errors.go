package git

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/transport"
)

// The causes a Git operation fails with. Every error this package returns
// for a remote operation wraps exactly one of them (test with errors.Is),
// so callers can name the cause without parsing messages (1.8.4 matched
// "unexpected http status code: 403" in libgit2's text).
var (
	// ErrAuthentication: the server refused the credentials, or wants some
	// and none were given.
	ErrAuthentication = errors.New("authentication failed")
	// ErrHostKey: the SSH server's host key is not the one in knownHosts.
	ErrHostKey = errors.New("SSH host key verification failed")
	// ErrNotFound: the repository, reference or commit does not exist.
	ErrNotFound = errors.New("not found")
	// ErrUnreachable: the server could not be reached or did not answer in
	// time.
	ErrUnreachable = errors.New("server unreachable")
	// ErrInvalid: the request or the credentials are malformed (missing
	// Secret key, unparsable SSH key, bad URL); retrying will not help until
	// the input changes.
	ErrInvalid = errors.New("invalid input")
)

// Error is a failed Git operation: Cause is one of the Err* sentinels above,
// Err what happened.
type Error struct {
	Cause error
	Err   error
}

func (e *Error) Error() string { return fmt.Sprintf("%v: %v", e.Cause, e.Err) }

// Unwrap exposes both the cause (errors.Is(err, ErrAuthentication)) and the
// underlying error.
func (e *Error) Unwrap() []error { return []error{e.Cause, e.Err} }

// Cause returns the sentinel err wraps, or nil.
func Cause(err error) error {
	for _, c := range []error{ErrAuthentication, ErrHostKey, ErrNotFound, ErrUnreachable, ErrInvalid} {
		if errors.Is(err, c) {
			return c
		}
	}
	return nil
}

// classify wraps an error of go-git (or of the transport under it) with its
// cause. Errors already classified are returned as they are.
func classify(err error) error {
	if err == nil || Cause(err) != nil {
		return err
	}
	var cause error
	msg := err.Error()
	var netErr net.Error
	var dnsErr *net.DNSError
	var opErr *net.OpError
	switch {
	case errors.Is(err, transport.ErrAuthenticationRequired), errors.Is(err, transport.ErrAuthorizationFailed),
		strings.Contains(msg, "unable to authenticate"):
		cause = ErrAuthentication
	case strings.Contains(msg, "knownhosts:"), strings.Contains(msg, "host key"):
		cause = ErrHostKey
	case errors.Is(err, transport.ErrRepositoryNotFound), errors.Is(err, transport.ErrEmptyRemoteRepository):
		cause = ErrNotFound
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &dnsErr), errors.As(err, &opErr), errors.As(err, &netErr),
		strings.Contains(msg, "connection refused"), strings.Contains(msg, "no such host"), strings.Contains(msg, "EOF"):
		cause = ErrUnreachable
	case errors.Is(err, transport.ErrInvalidAuthMethod):
		cause = ErrInvalid
	default:
		// Anything else (a server error, a broken pack) may pass; retried as
		// if the server were unreachable.
		cause = ErrUnreachable
	}
	return &Error{Cause: cause, Err: err}
}

func invalid(format string, args ...any) error {
	return &Error{Cause: ErrInvalid, Err: fmt.Errorf(format, args...)}
}
