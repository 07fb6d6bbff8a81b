package docs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/serverless-manager/tests/support/cliext"
	"github.com/kyma-project/serverless-manager/tests/support/repo"
)

// cliExtension is the chart's `kyma function` extension.
const cliExtension = "charts/serverless/files/cli/kyma-commands.yaml"

// kymaFunctionCalls are the `kyma function …` invocations a page shows:
// command lines of its shell blocks and code spans of its prose, from
// `kyma` on.
func kymaFunctionCalls(p Page) []string {
	texts := p.Commands()
	texts = append(texts, CodeSpans(p.Prose())...)
	var calls []string
	for _, s := range texts {
		if i := strings.Index(s, "kyma function"); i >= 0 {
			calls = append(calls, s[i:])
		}
	}
	return calls
}

// allFlags are the long flag names of every command of the extension.
func allFlags(e *cliext.Extension, into map[string]bool) {
	for _, f := range e.Flags {
		into["--"+f.Name] = true
	}
	for i := range e.SubCommands {
		allFlags(&e.SubCommands[i], into)
	}
}

// Every `kyma function` command the documentation shows exists in the
// module's CLI extension with every flag it gives that command, and on a
// user page about those commands every flag named on its own (`--dir`) is
// a flag of one of them.
func TestKymaCLICommandsInDocsExist(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(repo.MustRoot(), cliExtension))
	require.NoError(t, err)
	ext, err := cliext.Parse(raw)
	require.NoError(t, err)
	flags := map[string]bool{}
	allFlags(ext, flags)

	seen := 0
	for _, p := range allPages(t) {
		calls := kymaFunctionCalls(p)
		for _, call := range calls {
			seen++
			words, err := cliext.Words(call, map[string]string{"NAMESPACE": "default"})
			if !assert.NoError(t, err, "%s: %s", p.Path, call) {
				continue
			}
			// The CLI's own help flag is on every command.
			rest := words[2:]
			rest = slicesDelete(rest, "--help", "-h")
			if len(rest) == 0 {
				continue
			}
			_, err = ext.Resolve(rest)
			assert.NoError(t, err, "%s: %s", p.Path, call)
		}
		// Contributor pages name flags of other tools beside these.
		if len(calls) == 0 || !strings.HasPrefix(p.Path, "docs/user/") {
			continue
		}
		for _, span := range CodeSpans(p.Prose()) {
			if !strings.HasPrefix(span, "--") {
				continue
			}
			name, _, _ := strings.Cut(strings.Fields(span)[0], "=")
			assert.True(t, flags[name], "%s names %s, which no `kyma function` command has", p.Path, name)
		}
	}
	assert.NotZero(t, seen, "the documentation shows `kyma function` commands")
}

func slicesDelete(words []string, drop ...string) []string {
	var out []string
	for _, w := range words {
		keep := true
		for _, d := range drop {
			if w == d {
				keep = false
			}
		}
		if keep {
			out = append(out, w)
		}
	}
	return out
}
