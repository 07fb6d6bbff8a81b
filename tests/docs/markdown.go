// Package docs reads the repository's Markdown documentation the way its
// tests need it: the code blocks of a page, the YAML a tutorial applies
// (heredocs of its shell blocks), the files it shows, and the tables of
// the troubleshooting guides. docs_test.go checks the documentation with
// it; tests/e2e/tutorials_test.go applies what the tutorials show.
package docs

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kyma-project/serverless-manager/operator/pkg/manifest"
	"github.com/kyma-project/serverless-manager/tests/support/repo"
)

// Tutorials is the folder of the user tutorials, relative to the root.
const Tutorials = "docs/user/tutorials"

// Page is one Markdown file.
type Page struct {
	// Path is relative to the repository root, with forward slashes.
	Path string
	Text string
}

// Read reads a page by its path relative to the repository root.
func Read(path string) (Page, error) {
	root, err := repo.Root()
	if err != nil {
		return Page{}, err
	}
	data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(path)))
	if err != nil {
		return Page{}, err
	}
	return Page{Path: path, Text: string(data)}, nil
}

// Block is a fenced code block.
type Block struct {
	// Info is the fence's info string: the language, then optionally a
	// file name ("javascript handler.js").
	Info string
	Body string
	// Line is the line of the opening fence (1-based).
	Line int
}

// Lang is the first word of the info string.
func (b Block) Lang() string {
	f := strings.Fields(b.Info)
	if len(f) == 0 {
		return ""
	}
	return f[0]
}

// File is the second word of the info string: the file the block shows.
func (b Block) File() string {
	f := strings.Fields(b.Info)
	if len(f) < 2 {
		return ""
	}
	return f[1]
}

var fence = regexp.MustCompile("^( {0,3})(```+|~~~+)(.*)$")

// Blocks are the page's fenced code blocks in order.
func (p Page) Blocks() []Block {
	var out []Block
	lines := strings.Split(p.Text, "\n")
	for i := 0; i < len(lines); i++ {
		m := fence.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		indent, marker := m[1], m[2]
		b := Block{Info: strings.TrimSpace(m[3]), Line: i + 1}
		var body []string
		for i++; i < len(lines); i++ {
			if strings.HasPrefix(strings.TrimPrefix(lines[i], indent), marker) && strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(lines[i]), marker)) == "" {
				break
			}
			body = append(body, strings.TrimPrefix(lines[i], indent))
		}
		b.Body = strings.Join(body, "\n")
		if len(body) > 0 {
			b.Body += "\n"
		}
		out = append(out, b)
	}
	return out
}

// Prose is the page without its code blocks.
func (p Page) Prose() string {
	var b strings.Builder
	inside := ""
	for _, line := range strings.Split(p.Text, "\n") {
		if m := fence.FindStringSubmatch(line); m != nil {
			switch {
			case inside == "":
				inside = m[2]
				continue
			case strings.HasPrefix(m[2], inside) && strings.TrimSpace(m[3]) == "":
				inside = ""
				continue
			}
		}
		if inside == "" {
			b.WriteString(line)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// Heredoc is a command of a shell block that reads a here-document:
// `kubectl apply -n "$NAMESPACE" -f - <<EOF` and the lines up to EOF.
type Heredoc struct {
	// Command is the line that opens it.
	Command string
	// Body is the document, each line ending in a newline.
	Body string
	// Quoted: the delimiter is quoted (<<'EOF'), so the shell expands
	// nothing in the body.
	Quoted bool
	Line   int
}

var heredocStart = regexp.MustCompile(`<<-?\s*(['"]?)([A-Za-z_]+)(['"]?)\s*$`)

// Heredocs are the here-documents of the page's shell blocks.
func (p Page) Heredocs() []Heredoc {
	var out []Heredoc
	for _, b := range p.Blocks() {
		if !isShell(b.Lang()) {
			continue
		}
		lines := strings.Split(b.Body, "\n")
		for i := 0; i < len(lines); i++ {
			m := heredocStart.FindStringSubmatch(lines[i])
			if m == nil {
				continue
			}
			h := Heredoc{Command: lines[i], Quoted: m[1] != "", Line: b.Line + 1 + i}
			var body strings.Builder
			for i++; i < len(lines) && lines[i] != m[2]; i++ {
				body.WriteString(lines[i])
				body.WriteByte('\n')
			}
			h.Body = body.String()
			out = append(out, h)
		}
	}
	return out
}

func isShell(lang string) bool { return lang == "bash" || lang == "sh" || lang == "shell" }

// Commands are the command lines of the page's shell blocks: comments,
// here-document bodies and blank lines left out, continuation lines
// (ending in \) joined.
func (p Page) Commands() []string {
	var out []string
	for _, b := range p.Blocks() {
		if !isShell(b.Lang()) {
			continue
		}
		lines := strings.Split(b.Body, "\n")
		for i := 0; i < len(lines); i++ {
			line := strings.TrimSpace(lines[i])
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			for strings.HasSuffix(line, `\`) && i+1 < len(lines) {
				i++
				line = strings.TrimSpace(strings.TrimSuffix(line, `\`)) + " " + strings.TrimSpace(lines[i])
			}
			out = append(out, line)
			if m := heredocStart.FindStringSubmatch(line); m != nil {
				for i++; i < len(lines) && lines[i] != m[2]; i++ {
				}
			}
		}
	}
	return out
}

// Command is the one command line of the page that starts with prefix.
func (p Page) Command(prefix string) (string, error) {
	var found []string
	for _, c := range p.Commands() {
		if strings.HasPrefix(c, prefix) {
			found = append(found, c)
		}
	}
	if len(found) != 1 {
		return "", fmt.Errorf("%s: %d commands start with %q, want 1: %q", p.Path, len(found), prefix, found)
	}
	return found[0], nil
}

// Files are the blocks that name the file they show (```javascript
// handler.js), by file name.
func (p Page) Files() map[string]string {
	out := map[string]string{}
	for _, b := range p.Blocks() {
		if f := b.File(); f != "" {
			out[f] = b.Body
		}
	}
	return out
}

// shellEscape is a backslash the shell interprets in an unquoted
// here-document: before $, `, \ or the end of a line.
var shellEscape = regexp.MustCompile("\\\\([$`\\\\]|\n)")

var shellVar = regexp.MustCompile(`\$(\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))`)

// Expand does what the shell does to an unquoted here-document: it
// replaces $NAME and ${NAME} by vars[NAME]. A variable vars does not name,
// or any other $, is an error: the tutorial would depend on something the
// reader did not set.
func (h Heredoc) Expand(vars map[string]string) (string, error) {
	if h.Quoted {
		return h.Body, nil
	}
	var missing []string
	out := shellVar.ReplaceAllStringFunc(h.Body, func(s string) string {
		m := shellVar.FindStringSubmatch(s)
		name := m[2] + m[3]
		v, ok := vars[name]
		if !ok {
			missing = append(missing, name)
			return s
		}
		return v
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("here-document at line %d uses variables no step sets: %v", h.Line, missing)
	}
	if strings.Contains(shellVar.ReplaceAllString(h.Body, ""), "$") || strings.Contains(h.Body, "`") || shellEscape.MatchString(h.Body) {
		return "", fmt.Errorf("here-document at line %d holds a $, ` or \\ the shell would interpret", h.Line)
	}
	return out, nil
}

// Applied are the objects the page's `kubectl apply ... <<EOF` commands
// create, in order, with the here-documents expanded with vars.
func (p Page) Applied(vars map[string]string) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, h := range p.Heredocs() {
		if !strings.HasPrefix(strings.TrimSpace(h.Command), "kubectl apply") {
			continue
		}
		body, err := h.Expand(vars)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p.Path, err)
		}
		objs, err := manifest.Decode([]byte(body))
		if err != nil {
			return nil, fmt.Errorf("%s line %d: %w", p.Path, h.Line, err)
		}
		out = append(out, objs...)
	}
	return out, nil
}

// Table is a Markdown table: its header cells and rows of cells.
type Table struct {
	Header []string
	Rows   [][]string
	Line   int
}

// Column is the index of the header cell named name (case-insensitive),
// or -1.
func (t Table) Column(name string) int {
	for i, h := range t.Header {
		if strings.EqualFold(strings.TrimSpace(h), name) {
			return i
		}
	}
	return -1
}

var tableSeparator = regexp.MustCompile(`^\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$`)

// Tables are the tables of the page's prose.
func (p Page) Tables() []Table {
	var out []Table
	lines := strings.Split(p.Prose(), "\n")
	for i := 0; i+1 < len(lines); i++ {
		if !strings.HasPrefix(strings.TrimSpace(lines[i]), "|") || !tableSeparator.MatchString(strings.TrimSpace(lines[i+1])) {
			continue
		}
		t := Table{Header: cells(lines[i]), Line: i + 1}
		for i += 2; i < len(lines) && strings.HasPrefix(strings.TrimSpace(lines[i]), "|"); i++ {
			t.Rows = append(t.Rows, cells(lines[i]))
		}
		out = append(out, t)
	}
	return out
}

// cells splits a table row at the pipes that are not escaped (\|) and not
// inside a code span.
func cells(line string) []string {
	line = strings.TrimSpace(line)
	line = strings.TrimPrefix(line, "|")
	line = strings.TrimSuffix(line, "|")
	var out []string
	var cur strings.Builder
	code := false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == '\\' && i+1 < len(line) && line[i+1] == '|':
			cur.WriteByte('|')
			i++
		case c == '`':
			code = !code
			cur.WriteByte(c)
		case c == '|' && !code:
			out = append(out, strings.TrimSpace(cur.String()))
			cur.Reset()
		default:
			cur.WriteByte(c)
		}
	}
	return append(out, strings.TrimSpace(cur.String()))
}

var codeSpan = regexp.MustCompile("`([^`]+)`")

// CodeSpans are the texts of the code spans in s.
func CodeSpans(s string) []string {
	var out []string
	for _, m := range codeSpan.FindAllStringSubmatch(s, -1) {
		out = append(out, m[1])
	}
	return out
}

// Runbooks are the migration runbooks: pages of TechnicalReference whose
// file name has RunbookMarker. tests/e2e/runbooks_test.go runs each.
const (
	TechnicalReference = "docs/user/technical-reference"
	RunbookMarker      = "-migrate-"
	// RunbookEnd is the heading after which a runbook's blocks are not
	// steps of the migration (going back is not part of it).
	RunbookEnd = "## Go Back"
)

// Step is a shell block of a runbook, with the output the page shows for
// it: the text block that follows it before the next shell block.
type Step struct {
	Block
	// Expected is the output shown, empty when the page shows none.
	Expected string
}

// StepsEnd is the line of the heading RunbookEnd, or one past the last
// line when the page has none.
func (p Page) StepsEnd() int {
	lines := strings.Split(p.Text, "\n")
	for i, line := range lines {
		if strings.TrimSpace(line) == RunbookEnd {
			return i + 1
		}
	}
	return len(lines) + 1
}

// Steps are the shell blocks of the page up to the heading RunbookEnd, in
// order, each with the output the page shows for it.
func (p Page) Steps() []Step {
	end := p.StepsEnd()
	var out []Step
	for _, b := range p.Blocks() {
		if b.Line > end {
			break
		}
		switch {
		case isShell(b.Lang()):
			out = append(out, Step{Block: b})
		case b.Lang() == "text" && len(out) > 0 && out[len(out)-1].Expected == "":
			out[len(out)-1].Expected = b.Body
		}
	}
	return out
}
