package testenv

import (
	"fmt"
	"strings"
	"sync"
)

// PolicyWarnings collects the API server's warnings of one
// ValidatingAdmissionPolicy (bound by a binding of the same name) as
// kubectl prints them, without the API server's prefix; other warnings are
// kept apart. Set it as a rest.Config's WarningHandler.
type PolicyWarnings struct {
	Policy string

	mu     sync.Mutex
	got    []string
	others []string
}

func (w *PolicyWarnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	prefix := fmt.Sprintf("Validation failed for ValidatingAdmissionPolicy '%s' with binding '%s': ", w.Policy, w.Policy)
	if rest, ok := strings.CutPrefix(text, prefix); ok {
		w.got = append(w.got, rest)
		return
	}
	w.others = append(w.others, text)
}

// Take returns the policy's warnings since the last Take.
func (w *PolicyWarnings) Take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.got
	w.got = nil
	return out
}

// Others are the warnings that did not come from the policy.
func (w *PolicyWarnings) Others() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.others...)
}
