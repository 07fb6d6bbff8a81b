package docs

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
)

// rejectionWords mark a line that says which env names the API server
// refuses, as opposed to one that lists what the module sets.
var rejectionWords = regexp.MustCompile(`(?i)\b(reserved|refuses|rejects)\b`)

// Wherever a page says which spec.env names are reserved (a line that
// speaks of reserving, refusing or rejecting and names two reserved names
// or more), it names every name the CRD rejects: a page cannot keep an old,
// shorter list.
func TestReservedEnvListsAreComplete(t *testing.T) {
	want := v1alpha2.ReservedEnv()
	lists := map[string]bool{}
	for _, p := range allPages(t) {
		for _, line := range strings.Split(p.Prose(), "\n") {
			if !rejectionWords.MatchString(line) {
				continue
			}
			spans := map[string]bool{}
			for _, s := range CodeSpans(line) {
				spans[s] = true
			}
			named := 0
			for _, n := range want {
				if spans[n] {
					named++
				}
			}
			if named < 2 {
				continue
			}
			lists[p.Path] = true
			for _, n := range want {
				assert.True(t, spans[n], "%s lists reserved env names but not %s: %q", p.Path, n, strings.TrimSpace(line))
			}
		}
	}
	// The pages this test must find: the Function CR's, the runtimes'
	// environment and the tutorial on environment variables.
	for _, p := range []string{
		functionCR,
		"docs/user/technical-reference/04-40-runtimes.md",
		"docs/user/tutorials/01-41-inject-environment-variables.md",
	} {
		assert.True(t, lists[p], "%s lists the reserved env names", p)
	}
}
