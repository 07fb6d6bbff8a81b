package framework

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// Condition is checked until it reports done. detail describes what it saw
// (e.g. "2/3 replicas available") and ends up in the failure message. An
// error counts as "not yet" (the object may not exist yet) and is reported if
// the wait times out; wrap it with StopWaiting to give up at once.
type Condition func(ctx context.Context) (done bool, detail string, err error)

// PollInterval is the pause between two checks of a Condition.
var PollInterval = 200 * time.Millisecond

// attemptTimeout bounds one check, so a hanging request cannot eat the deadline.
const attemptTimeout = 10 * time.Second

type stopWaiting struct{ err error }

func (s stopWaiting) Error() string { return s.err.Error() }
func (s stopWaiting) Unwrap() error { return s.err }

// StopWaiting marks err as final: Poll returns at once instead of polling on.
func StopWaiting(err error) error { return stopWaiting{err} }

// Poll checks cond until it is done, returns a final error, ctx ends or
// timeout passes. The error says what was awaited, for how long, what was
// observed last and appends the output of the dump functions.
func Poll(ctx context.Context, timeout time.Duration, what string, cond Condition, dumps ...func() string) error {
	_, err := poll(ctx, timeout, what, cond, dumps...)
	return err
}

// poll is Poll that also returns the detail of the last check that was not
// done ("" when the first was).
func poll(ctx context.Context, timeout time.Duration, what string, cond Condition, dumps ...func() string) (waited string, _ error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	var (
		attempts int
		detail   string
		lastErr  error
	)
	for {
		attempts++
		actx, acancel := context.WithTimeout(ctx, attemptTimeout)
		done, d, err := cond(actx)
		acancel()
		if d != "" {
			detail = d
		}
		if err == nil && done {
			return waited, nil
		}
		waited = d
		if err != nil {
			waited = err.Error()
		}
		lastErr = err
		var stop stopWaiting
		if errors.As(err, &stop) {
			return waited, failure(fmt.Sprintf("gave up waiting for %s after %s", what, since(start)), detail, stop.err, dumps)
		}
		select {
		case <-ctx.Done():
			return waited, failure(fmt.Sprintf("timed out after %s waiting for %s (checked %d times)", since(start), what, attempts), detail, lastErr, dumps)
		case <-time.After(PollInterval):
		}
	}
}

// WaitFor is Poll inside a test: it fails the test with Poll's message, and
// logs how long the wait took when it succeeds (and, for a long one, what
// it saw last while it waited).
func WaitFor(t testing.TB, timeout time.Duration, what string, cond Condition, dumps ...func() string) {
	t.Helper()
	start := time.Now()
	waited, err := poll(t.Context(), timeout, what, cond, dumps...)
	if err != nil {
		t.Fatal(err.Error())
	}
	took := since(start)
	if took < sayWhatWasAwaited || waited == "" {
		t.Logf("%s after %s", what, took)
		return
	}
	t.Logf("%s after %s (last seen before: %s)", what, took, waited)
}

// sayWhatWasAwaited: a wait that lasts longer logs what its last check
// before the end saw, for a look at where a test's time goes.
const sayWhatWasAwaited = 5 * time.Second

func failure(headline, detail string, err error, dumps []func() string) error {
	var b strings.Builder
	b.WriteString(headline)
	if detail != "" {
		fmt.Fprintf(&b, "\nlast observed: %s", detail)
	}
	if err != nil {
		fmt.Fprintf(&b, "\nlast error: %v", err)
	}
	b.WriteString(Dumps(dumps...))
	return errors.New(b.String())
}

// Dumps is the output of every dump, each on lines of its own, for a
// failure message that is not a wait's.
func Dumps(dumps ...func() string) string {
	var b strings.Builder
	for _, dump := range dumps {
		b.WriteString("\n")
		b.WriteString(strings.TrimRight(dump(), "\n"))
	}
	return b.String()
}

func since(t time.Time) time.Duration { return time.Since(t).Round(time.Millisecond) }
