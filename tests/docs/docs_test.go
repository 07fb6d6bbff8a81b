package docs

// Checks that keep the documentation true to the code: every condition
// reason the code defines has a troubleshooting guide and every reason a
// guide names is defined; the messages the guides quote are the code's;
// every relative link resolves; the resource pages name every field of the
// APIs, the allow-listed build flags and the presets of the chart; the
// tutorials' YAML decodes and each tutorial is applied by the e2e test;
// package registries are named, never their hosts; every list of the
// runtimes, in the pages and in the dashboard's and CLI's extensions, has
// all the runtimes the CRD accepts.

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/kyma-project/serverless-manager/operator/api/function/v1alpha2"
	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/tests/support/repo"
)

const (
	troubleshooting = "docs/user/troubleshooting"
	serverlessCR    = "docs/user/resources/06-20-serverless-cr.md"
	functionCR      = "docs/user/resources/06-10-function-cr.md"
	sidebar         = "docs/user/_sidebar.md"
	// sitePrefix is where the Kyma documentation site serves docs/ (the
	// module template's documentation link and the sidebar's links).
	sitePrefix = "/serverless-manager/"
	// tutorialsTest applies every tutorial.
	tutorialsTest = "tests/e2e/tutorials_test.go"
	// runbooksTest runs every migration runbook.
	runbooksTest = "tests/e2e/runbooks_test.go"
)

// reasonSources are the packages whose Reason* constants a guide must
// cover: the two APIs (the reasons of the Function and Serverless
// conditions) and the rest of the operator (event reasons of its own).
var reasonSources = []string{"operator"}

// reasonConstants are the string values of every constant named Reason*,
// or declared with a type named *Reason (activator.FailureReason: the
// reasons of the activator's 503s and of its events on Functions), in the
// non-test Go files under dirs, with where each is defined.
func reasonConstants(t *testing.T, dirs ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, dir := range dirs {
		eachGoFile(t, dir, func(rel string, f *ast.File) {
			for _, decl := range f.Decls {
				gd, ok := decl.(*ast.GenDecl)
				if !ok || gd.Tok != token.CONST {
					continue
				}
				for _, spec := range gd.Specs {
					vs := spec.(*ast.ValueSpec)
					typed := false
					if id, ok := vs.Type.(*ast.Ident); ok {
						typed = strings.HasSuffix(id.Name, "Reason")
					}
					for i, name := range vs.Names {
						if !typed && !strings.HasPrefix(name.Name, "Reason") || i >= len(vs.Values) {
							continue
						}
						lit, ok := vs.Values[i].(*ast.BasicLit)
						if !ok || lit.Kind != token.STRING {
							continue
						}
						v, err := strconv.Unquote(lit.Value)
						require.NoError(t, err)
						out[v] = rel + ": " + name.Name
					}
				}
			}
		})
	}
	return out
}

// eachGoFile parses every non-test Go file under dir (relative to the root).
func eachGoFile(t *testing.T, dir string, fn func(rel string, f *ast.File)) {
	t.Helper()
	root := repo.MustRoot()
	fset := token.NewFileSet()
	err := filepath.WalkDir(filepath.Join(root, dir), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		fn(filepath.ToSlash(rel), f)
		return nil
	})
	require.NoError(t, err)
}

// stringLiterals is every string the non-test Go code under operator/
// spells out (literals, and sums of literals and string constants, as in
// "…: " + fixedText) and every chart template: the texts the module can
// write. A format's %% is its %.
func stringLiterals(t *testing.T) string {
	t.Helper()
	consts := map[string]string{}
	var files []*ast.File
	eachGoFile(t, "operator", func(_ string, f *ast.File) {
		files = append(files, f)
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if i < len(vs.Values) {
						if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
							consts[name.Name], _ = strconv.Unquote(lit.Value)
						}
					}
				}
			}
		}
	})
	var eval func(e ast.Expr) (string, bool)
	eval = func(e ast.Expr) (string, bool) {
		switch x := e.(type) {
		case *ast.BasicLit:
			if x.Kind != token.STRING {
				return "", false
			}
			v, err := strconv.Unquote(x.Value)
			return v, err == nil
		case *ast.Ident:
			v, ok := consts[x.Name]
			return v, ok
		case *ast.SelectorExpr: // another package's constant
			v, ok := consts[x.Sel.Name]
			return v, ok
		case *ast.ParenExpr:
			return eval(x.X)
		case *ast.BinaryExpr:
			if x.Op != token.ADD {
				return "", false
			}
			l, ok1 := eval(x.X)
			r, ok2 := eval(x.Y)
			return l + r, ok1 && ok2
		}
		return "", false
	}
	var b strings.Builder
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.BasicLit:
				if v, ok := eval(x); ok {
					b.WriteString(v)
					b.WriteByte('\n')
				}
			case *ast.BinaryExpr:
				if v, ok := eval(x); ok {
					b.WriteString(v)
					b.WriteByte('\n')
				}
			}
			return true
		})
	}
	templates, err := filepath.Glob(filepath.Join(repo.MustRoot(), "charts", "serverless", "templates", "*.yaml"))
	require.NoError(t, err)
	for _, p := range templates {
		data, err := os.ReadFile(p)
		require.NoError(t, err)
		b.Write(data)
	}
	return strings.ReplaceAll(b.String(), "%%", "%")
}

// pages are the Markdown files under dir (relative to the root), sorted.
func pages(t *testing.T, dir string) []Page {
	t.Helper()
	root := repo.MustRoot()
	var out []Page
	err := filepath.WalkDir(filepath.Join(root, dir), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".md") {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		page, err := Read(filepath.ToSlash(rel))
		out = append(out, page)
		return err
	})
	require.NoError(t, err)
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// allPages are README.md and every page under docs/.
func allPages(t *testing.T) []Page {
	t.Helper()
	readme, err := Read("README.md")
	require.NoError(t, err)
	return append([]Page{readme}, pages(t, "docs")...)
}

// Every reason the code defines is named by a troubleshooting guide, in
// the Reason or Cause column of a table, and every reason such a column
// names is one the code defines. Each guide has such a table.
func TestEveryReasonHasAGuide(t *testing.T) {
	defined := reasonConstants(t, reasonSources...)
	// The two APIs' reasons must be among them (the walk found their files).
	for _, v := range []string{v1alpha2.ReasonJobFailed, v1alpha2.ReasonSourceUpdateFailed, v1alpha1.ReasonFunctionsExist, v1alpha1.ReasonInstallationErr} {
		require.Contains(t, defined, v, "the reasons of the APIs are read from their sources")
	}
	named := map[string][]string{}
	for _, p := range pages(t, troubleshooting) {
		if path.Base(p.Path) == "_sidebar.md" {
			continue
		}
		guideNames := 0
		for _, tbl := range p.Tables() {
			for _, col := range []string{"Reason", "Cause"} {
				i := tbl.Column(col)
				if i < 0 {
					continue
				}
				for _, row := range tbl.Rows {
					if i >= len(row) {
						continue
					}
					for _, r := range CodeSpans(row[i]) {
						guideNames++
						named[r] = append(named[r], p.Path)
						if _, ok := defined[r]; !ok {
							t.Errorf("%s (table at line %d) names the reason %q, which the code does not define", p.Path, tbl.Line, r)
						}
					}
				}
			}
		}
		assert.NotZero(t, guideNames, "%s: a guide names the reasons it is about in a table with a Reason column", p.Path)
	}
	var missing []string
	for r, where := range defined {
		if len(named[r]) == 0 {
			missing = append(missing, r+" ("+where+")")
		}
	}
	sort.Strings(missing)
	assert.Empty(t, missing, "reasons without a troubleshooting guide under %s", troubleshooting)
	t.Logf("%d reasons defined, each named by a guide", len(defined))
}

// placeholder is what a quoted message leaves open: <name> (quoted or
// not, as the code's %q quotes it) and ….
var placeholder = regexp.MustCompile(`"?<[^<>]*>"?|…`)

// clause splits the fixed text of a message where the code may join
// strings of its own: at punctuation.
var clause = regexp.MustCompile(`[(),;:]`)

// messageParts are the phrases of a quoted message that the code must
// spell out: the text between placeholders, split at punctuation, each
// phrase of 4 characters or more.
func messageParts(msg string) []string {
	var out []string
	for _, fixed := range placeholder.Split(msg, -1) {
		for _, part := range clause.Split(fixed, -1) {
			if part = strings.TrimSpace(part); len(part) >= 4 {
				out = append(out, part)
			}
		}
	}
	return out
}

// The messages the guides quote (the Message and Warning columns) are the
// code's: each fixed part between placeholders (<name>, …) is in a string
// the operator spells out or in a chart template. A message may start with
// its cause ("ApplyFailed: …"), which the manager puts in front.
func TestGuidesQuoteTheCodesMessages(t *testing.T) {
	literals := stringLiterals(t)
	defined := reasonConstants(t, reasonSources...)
	quoted := 0
	for _, p := range pages(t, troubleshooting) {
		for _, tbl := range p.Tables() {
			for _, col := range []string{"Message", "Warning"} {
				i := tbl.Column(col)
				if i < 0 {
					continue
				}
				for _, row := range tbl.Rows {
					if i >= len(row) {
						continue
					}
					for _, msg := range CodeSpans(row[i]) {
						quoted++
						text := msg
						if cause, rest, ok := strings.Cut(text, ": "); ok {
							if _, isReason := defined[cause]; isReason {
								text = rest
							}
						}
						for _, part := range messageParts(text) {
							assert.True(t, strings.Contains(literals, part), "%s (table at line %d): the message %q is not one the module writes: no string of the code holds %q", p.Path, tbl.Line, msg, part)
						}
					}
				}
			}
		}
	}
	assert.NotZero(t, quoted)
}

var (
	inlineLink = regexp.MustCompile(`!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	refLink    = regexp.MustCompile(`(?m)^\s*\[[^\]]+\]:\s*(\S+)`)
	heading    = regexp.MustCompile(`(?m)^#{1,6}\s+(.+?)\s*#*\s*$`)
	htmlAnchor = regexp.MustCompile(`<a\s+(?:name|id)="([^"]+)"`)
)

// anchors are the GitHub-style anchors of a page's headings.
func anchors(p Page) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, m := range heading.FindAllStringSubmatch(p.Prose(), -1) {
		a := slug(m[1])
		if n := seen[a]; n > 0 {
			out[a+"-"+strconv.Itoa(n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	for _, m := range htmlAnchor.FindAllStringSubmatch(p.Text, -1) {
		out[m[1]] = true
	}
	return out
}

// slug is GitHub's heading anchor: lower case, punctuation dropped,
// spaces to hyphens.
func slug(h string) string {
	h = regexp.MustCompile("`|\\*|_(?:_)?|\\[|\\]\\([^)]*\\)").ReplaceAllString(h, "")
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Every relative link of README.md and docs/ resolves to a file, and a
// link to a heading of a Markdown page to one of its headings. Links of
// the sidebar are the documentation site's (/serverless-manager/… is docs/).
func TestRelativeLinksResolve(t *testing.T) {
	root := repo.MustRoot()
	byPath := map[string]Page{}
	for _, p := range allPages(t) {
		byPath[p.Path] = p
	}
	checked := 0
	for _, p := range allPages(t) {
		prose := p.Prose()
		var targets []string
		for _, m := range inlineLink.FindAllStringSubmatch(prose, -1) {
			targets = append(targets, m[1])
		}
		for _, m := range refLink.FindAllStringSubmatch(prose, -1) {
			targets = append(targets, m[1])
		}
		for _, target := range targets {
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			var rel string
			switch {
			case file == "":
				rel = p.Path
			case file == "/" && path.Base(p.Path) == "_sidebar.md":
				continue // the site's home
			case strings.HasPrefix(file, sitePrefix):
				rel = path.Join("docs", strings.TrimPrefix(file, sitePrefix))
			case strings.HasPrefix(file, "/"):
				t.Errorf("%s: link %q is absolute; only the sidebar's %s… links are", p.Path, target, sitePrefix)
				continue
			default:
				rel = path.Join(path.Dir(p.Path), file)
			}
			checked++
			info, err := os.Stat(filepath.Join(root, filepath.FromSlash(rel)))
			if err != nil {
				t.Errorf("%s: link %q: %s does not exist", p.Path, target, rel)
				continue
			}
			if anchor == "" || info.IsDir() || !strings.HasSuffix(rel, ".md") {
				continue
			}
			dest, ok := byPath[rel]
			if !ok {
				d, err := Read(rel)
				require.NoError(t, err)
				dest = d
			}
			if !anchors(dest)[anchor] {
				t.Errorf("%s: link %q: %s has no heading with the anchor #%s", p.Path, target, rel, anchor)
			}
		}
	}
	assert.NotZero(t, checked)
}

// Every page of docs/user is in the sidebar of the documentation site.
func TestSidebarListsEveryUserPage(t *testing.T) {
	side, err := Read(sidebar)
	require.NoError(t, err)
	for _, p := range pages(t, "docs/user") {
		if path.Base(p.Path) == "_sidebar.md" {
			continue
		}
		link := sitePrefix + strings.TrimPrefix(p.Path, "docs/")
		assert.Contains(t, side.Text, "("+link+")", "%s links %s", sidebar, p.Path)
	}
}

// Package registries are named, not addressed: "the npm registry", "the
// Python package index".
func TestNoPackageRegistryHosts(t *testing.T) {
	hosts := regexp.MustCompile(`(?i)registry\.npmjs\.org|pypi\.org|files\.pythonhosted\.org`)
	for _, p := range allPages(t) {
		for i, line := range strings.Split(p.Text, "\n") {
			if m := hosts.FindString(line); m != "" {
				t.Errorf("%s:%d names the package registry by its host %q: write \"the npm registry\" or \"the Python package index\"", p.Path, i+1, m)
			}
		}
	}
}

// The README stays an entry point.
func TestReadmeIsShort(t *testing.T) {
	readme, err := Read("README.md")
	require.NoError(t, err)
	lines := strings.Count(readme.Text, "\n")
	assert.LessOrEqual(t, lines, 200, "README.md has %d lines; the rest belongs under docs/", lines)
}

// Every tutorial's YAML decodes into named objects (with its NAMESPACE
// set, as its first step says), and every tutorial is applied by the e2e
// test of the tutorials, which checks what it says the Function answers.
func TestTutorialsAreAppliedByATest(t *testing.T) {
	e2e, err := os.ReadFile(filepath.Join(repo.MustRoot(), tutorialsTest))
	require.NoError(t, err)
	var named []string
	for _, p := range pages(t, Tutorials) {
		if base := path.Base(p.Path); base == "README.md" || base == "_sidebar.md" {
			continue
		}
		named = append(named, path.Base(p.Path))
		assert.Contains(t, string(e2e), strconv.Quote(path.Base(p.Path)), "%s applies %s", tutorialsTest, p.Path)
		objs, err := p.Applied(map[string]string{"NAMESPACE": "tutorial"})
		if !assert.NoError(t, err) {
			continue
		}
		assert.NotEmpty(t, objs, "%s applies YAML", p.Path)
		for _, o := range objs {
			assert.NotEmpty(t, o.GetAPIVersion(), "%s: an object without apiVersion", p.Path)
			assert.NotEmpty(t, o.GetKind(), "%s: an object without kind", p.Path)
			assert.NotEmpty(t, o.GetName(), "%s: a %s without a name", p.Path, o.GetKind())
		}
		cmds := p.Commands()
		require.NotEmpty(t, cmds, p.Path)
		assert.Equal(t, "export NAMESPACE=default", cmds[0], "%s: the first step sets NAMESPACE", p.Path)
	}
	assert.NotEmpty(t, named)
}

// runbooks are the migration runbooks (see RunbookMarker).
func runbooks(t *testing.T) []Page {
	t.Helper()
	var out []Page
	for _, p := range pages(t, TechnicalReference) {
		if strings.Contains(path.Base(p.Path), RunbookMarker) {
			out = append(out, p)
		}
	}
	return out
}

// Every migration runbook is run by the e2e test of the runbooks, has
// steps, ends its steps with a check whose output it shows, and shows
// outputs only for shell blocks (an output before any shell block, or two
// for one block, would be a check the test never makes).
func TestRunbooksAreRunByATest(t *testing.T) {
	e2e, err := os.ReadFile(filepath.Join(repo.MustRoot(), runbooksTest))
	require.NoError(t, err)
	books := runbooks(t)
	require.Len(t, books, 3, "the runbooks for 1.8.4, 1.13 and a cluster managed by Kyma's lifecycle manager")
	for _, p := range books {
		assert.Contains(t, string(e2e), strconv.Quote(path.Base(p.Path)), "%s runs %s", runbooksTest, p.Path)
		steps := p.Steps()
		if !assert.NotEmpty(t, steps, "%s has shell blocks before %q", p.Path, RunbookEnd) {
			continue
		}
		last := steps[len(steps)-1]
		assert.NotEmpty(t, strings.TrimSpace(last.Expected), "%s: the last step (line %d) is a check with the output it shows", p.Path, last.Line)
		shown := 0
		for _, s := range steps {
			if s.Expected != "" {
				shown++
			}
		}
		var texts int
		for _, b := range p.Blocks() {
			if b.Lang() == "text" && b.Line < p.StepsEnd() {
				texts++
			}
		}
		assert.Equal(t, texts, shown, "%s: every output block follows its own shell block", p.Path)
		assert.Contains(t, p.Text, "\n"+RunbookEnd+"\n", "%s says how to go back, under %q", p.Path, RunbookEnd)
	}
}

// jsonFields are the JSON field paths (below prefix) of the struct type
// name declared in the Go files of dir, following the package's own struct
// types; fields of other packages' types (Kubernetes') end the path.
func jsonFields(t *testing.T, dir, name, prefix string) []string {
	t.Helper()
	types := map[string]*ast.StructType{}
	eachGoFile(t, dir, func(_ string, f *ast.File) {
		ast.Inspect(f, func(n ast.Node) bool {
			if ts, ok := n.(*ast.TypeSpec); ok {
				if st, ok := ts.Type.(*ast.StructType); ok {
					types[ts.Name.Name] = st
				}
			}
			return true
		})
	})
	var out []string
	var walk func(st *ast.StructType, prefix string)
	walk = func(st *ast.StructType, prefix string) {
		for _, f := range st.Fields.List {
			tag := ""
			if f.Tag != nil {
				tag = reflect.StructTag(strings.Trim(f.Tag.Value, "`")).Get("json")
			}
			jsonName, opts, _ := strings.Cut(tag, ",")
			typ := f.Type
			for {
				switch tt := typ.(type) {
				case *ast.StarExpr:
					typ = tt.X
					continue
				case *ast.ArrayType:
					typ = tt.Elt
					continue
				}
				break
			}
			local := ""
			if id, ok := typ.(*ast.Ident); ok && types[id.Name] != nil {
				local = id.Name
			}
			if strings.Contains(","+opts, ",inline") || (jsonName == "" && len(f.Names) == 0) {
				if local != "" {
					walk(types[local], prefix)
				}
				continue
			}
			if jsonName == "-" || jsonName == "" {
				continue
			}
			p := prefix + jsonName
			out = append(out, p)
			if local != "" {
				walk(types[local], p+".")
			}
		}
	}
	st := types[name]
	require.NotNil(t, st, "type %s in %s", name, dir)
	walk(st, prefix)
	return out
}

// The resource pages name every field of the Serverless CR and of the
// Function CR, spec and status, as `spec.…`/`status.…`.
func TestResourcePagesNameEveryField(t *testing.T) {
	for _, c := range []struct {
		page, dir, spec, status string
	}{
		{serverlessCR, "operator/api/v1alpha1", "ServerlessSpec", "ServerlessStatus"},
		{functionCR, "operator/api/function/v1alpha2", "FunctionSpec", "FunctionStatus"},
	} {
		p, err := Read(c.page)
		require.NoError(t, err)
		spans := map[string]bool{}
		for _, s := range CodeSpans(p.Prose()) {
			spans[s] = true
		}
		fields := append(jsonFields(t, c.dir, c.spec, "spec."), jsonFields(t, c.dir, c.status, "status.")...)
		for _, f := range fields {
			assert.True(t, spans[f], "%s describes `%s`", c.page, f)
		}
	}
}

// The Serverless CR page lists exactly the build flags the CRD allows, and
// the four it refuses.
func TestExecutorArgsAllowListIsDocumented(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repo.MustRoot(), "operator", "api", "v1alpha1", "spec_types.go"))
	require.NoError(t, err)
	m := regexp.MustCompile(`matches\('\^\(, \*--\(' \+ '([a-z|-]+)'`).FindSubmatch(data)
	require.NotNil(t, m, "the allow-list rule in spec_types.go")
	p, err := Read(serverlessCR)
	require.NoError(t, err)
	var documented []string
	for _, tbl := range p.Tables() {
		if tbl.Column("Allowed flag") < 0 {
			continue
		}
		for _, row := range tbl.Rows {
			for _, s := range CodeSpans(row[tbl.Column("Allowed flag")]) {
				documented = append(documented, strings.TrimPrefix(s, "--"))
			}
		}
	}
	allowed := strings.Split(string(m[1]), "|")
	slices.Sort(allowed)
	slices.Sort(documented)
	assert.Equal(t, allowed, documented, "%s: the table with the column \"Allowed flag\" lists the CRD's allow-list", serverlessCR)
	for _, f := range []string{"--destination", "--context", "--dockerfile", "--no-push"} {
		assert.Contains(t, p.Text, "`"+f+"`", "%s names the refused %s", serverlessCR, f)
	}
}

// The preset tables of the Function CR page are the chart's presets.
func TestPresetTablesAreTheCharts(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repo.MustRoot(), "charts", "serverless", "values.yaml"))
	require.NoError(t, err)
	type preset struct {
		RequestCPU    string `json:"requestCpu"`
		RequestMemory string `json:"requestMemory"`
		LimitCPU      string `json:"limitCpu"`
		LimitMemory   string `json:"limitMemory"`
	}
	var values struct {
		Controller struct {
			ResourcesConfiguration struct {
				Function struct {
					Resources struct {
						Presets map[string]preset `json:"presets"`
					} `json:"resources"`
				} `json:"function"`
				BuildJob struct {
					Resources struct {
						Presets map[string]preset `json:"presets"`
					} `json:"resources"`
				} `json:"buildJob"`
			} `json:"resourcesConfiguration"`
			BuildlessFunctionPresets map[string]preset `json:"buildlessFunctionPresets"`
		} `json:"controller"`
	}
	require.NoError(t, yaml.Unmarshal(data, &values))
	want := map[string]map[string]preset{
		"Function preset":             values.Controller.ResourcesConfiguration.Function.Resources.Presets,
		"Function preset (buildless)": values.Controller.BuildlessFunctionPresets,
		"Build preset":                values.Controller.ResourcesConfiguration.BuildJob.Resources.Presets,
	}
	p, err := Read(functionCR)
	require.NoError(t, err)
	found := map[string]bool{}
	for _, tbl := range p.Tables() {
		presets, ok := want[tbl.Header[0]]
		if !ok {
			continue
		}
		found[tbl.Header[0]] = true
		got := map[string]preset{}
		for _, row := range tbl.Rows {
			require.Len(t, row, 5, "%s: table %q", functionCR, tbl.Header[0])
			got[strings.Trim(row[0], "`")] = preset{strings.Trim(row[1], "`"), strings.Trim(row[2], "`"), strings.Trim(row[3], "`"), strings.Trim(row[4], "`")}
		}
		assert.Equal(t, presets, got, "%s: table %q is charts/serverless/values.yaml's", functionCR, tbl.Header[0])
	}
	for name := range want {
		assert.True(t, found[name], "%s has the table %q", functionCR, name)
	}
}

// The Function CR page names every runtime the CRD accepts.
func TestRuntimesAreDocumented(t *testing.T) {
	p, err := Read(functionCR)
	require.NoError(t, err)
	for _, rt := range v1alpha2.Runtimes() {
		assert.Contains(t, p.Text, "`"+string(rt)+"`", "%s names runtime %s", functionCR, rt)
	}
}

// runtimeName is a runtime as the documentation and the module's
// extensions name it: its identifier (`nodejs22`, also inside an image
// name such as function-runtime-nodejs22) or its language and version
// (Node.js 22, Python 3.12).
var runtimeName = regexp.MustCompile(`\b(nodejs\d+|python\d+)\b|Node\.js (\d+)|Python 3\.(\d+)`)

// runtimesNamed are the runtimes text names, as identifiers.
func runtimesNamed(text string) map[string]bool {
	out := map[string]bool{}
	for _, m := range runtimeName.FindAllStringSubmatch(text, -1) {
		switch {
		case m[1] != "":
			out[m[1]] = true
		case m[2] != "":
			out["nodejs"+m[2]] = true
		default:
			out["python3"+m[3]] = true
		}
	}
	return out
}

// listsRuntimes: text names a Node.js and a Python runtime, so it lists
// the runtimes rather than using one in an example.
func listsRuntimes(named map[string]bool) bool {
	var node, python bool
	for rt := range named {
		node = node || strings.HasPrefix(rt, "nodejs")
		python = python || strings.HasPrefix(rt, "python")
	}
	return node && python
}

// runtimeListFiles are the module's extensions of Kyma dashboard and Kyma
// CLI, which list the runtimes in their forms and flags.
var runtimeListFiles = []string{
	"charts/serverless/templates/busola-functions.yaml",
	"charts/serverless/files/cli/kyma-commands.yaml",
	"config/ui-extensions/serverless.yaml",
}

// Wherever the documentation or the module's extensions list the runtimes
// (a paragraph, list item or table of a page, a line of an extension that
// names a Node.js and a Python runtime), they list every runtime the CRD
// accepts: a new runtime cannot be left out of one list.
func TestRuntimeListsAreComplete(t *testing.T) {
	want := v1alpha2.Runtimes()
	lists := 0
	check := func(where, text string) {
		named := runtimesNamed(text)
		if !listsRuntimes(named) {
			return
		}
		lists++
		for _, rt := range want {
			assert.True(t, named[string(rt)], "%s lists runtimes but not %s: %q", where, rt, strings.TrimSpace(text))
		}
	}
	for _, p := range allPages(t) {
		for _, unit := range strings.Split(p.Prose(), "\n\n") {
			check(p.Path, unit)
		}
	}
	root := repo.MustRoot()
	for _, f := range runtimeListFiles {
		data, err := os.ReadFile(filepath.Join(root, f))
		require.NoError(t, err)
		for i, l := range strings.Split(string(data), "\n") {
			check(f+":"+strconv.Itoa(i+1), l)
		}
	}
	// The lists this test must find: the Function CR page, the runtimes
	// page, the dashboard form's and the CLI's flags.
	assert.GreaterOrEqual(t, lists, 4, "lists of runtimes found")
}
