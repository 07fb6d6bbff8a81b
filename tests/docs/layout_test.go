package docs

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/serverless-manager/tests/support/repo"
)

// The repository's layout (docs/contributor/architecture.md#repository-layout):
// operator/ holds what the module's binaries ship and nothing else; test
// helpers live in tests/support, the local cluster's tooling in hack/cluster,
// and no binary links either.

const (
	architecture = "docs/contributor/architecture.md"
	// binaries are the module's mains.
	binaries = "./operator/cmd/..."
)

// shippedBesideOperator are the module's folders outside operator/ whose
// packages a binary may link: the chart, which the manager embeds. The
// Dockerfile copies these and operator/, nothing else.
var shippedBesideOperator = []string{"charts"}

// testOnly are packages that only tests link: a binary that links one has
// linked a test helper.
var testOnly = []string{"testing", "github.com/stretchr/testify", "sigs.k8s.io/controller-runtime/pkg/envtest"}

// goList runs go list with args at the repository's root and returns its
// lines.
func goList(t *testing.T, args ...string) []string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Dir = repo.MustRoot()
	out, err := cmd.Output()
	var stderr string
	if ee, ok := err.(*exec.ExitError); ok {
		stderr = string(ee.Stderr)
	}
	require.NoError(t, err, "go list %s: %s", strings.Join(args, " "), stderr)
	return strings.Fields(string(out))
}

// inModule is p relative to the module's root, and whether p is one of the
// module's packages.
func inModule(p string) (string, bool) {
	return strings.CutPrefix(p, repo.ModulePath+"/")
}

// under reports whether rel is dir or lies below it.
func under(rel, dir string) bool {
	return rel == dir || strings.HasPrefix(rel, dir+"/")
}

// linked are the packages the module's binaries link.
func linked(t *testing.T) map[string]bool {
	t.Helper()
	deps := map[string]bool{}
	for _, p := range goList(t, "-deps", binaries) {
		deps[p] = true
	}
	require.True(t, deps[repo.ModulePath+"/operator/cmd/manager"], "go list -deps %s lists the manager's main", binaries)
	return deps
}

// A binary links the module's packages under operator/ (and the embedded
// chart) only, and no package that only tests use.
func TestBinariesLinkOnlyShippedCode(t *testing.T) {
	for p := range linked(t) {
		if rel, ok := inModule(p); ok {
			if !under(rel, "operator") && !slices.ContainsFunc(shippedBesideOperator, func(d string) bool { return under(rel, d) }) {
				t.Errorf("a binary links %s, outside operator/: binaries ship only operator/ and %v (a test helper belongs in tests/support, local-cluster tooling in hack/cluster, and neither is linked)", rel, shippedBesideOperator)
			}
			continue
		}
		for _, test := range testOnly {
			if under(p, test) {
				t.Errorf("a binary links %s, which only tests use: a test helper reached a binary", p)
			}
		}
	}
}

// Every package under operator/ is linked by a binary: what no binary
// links is a test helper (tests/support) or tooling (hack/), not shipped
// code.
func TestOperatorHoldsOnlyShippedCode(t *testing.T) {
	deps := linked(t)
	// Packages with no non-test file are left out: nothing imports them.
	pkgs := goList(t, "-f", "{{if .GoFiles}}{{.ImportPath}}{{end}}", "./operator/...")
	require.NotEmpty(t, pkgs)
	for _, p := range pkgs {
		if !deps[p] {
			rel, _ := inModule(p)
			t.Errorf("%s is linked by no binary: operator/ holds only what the binaries ship (a test helper belongs in tests/support, local-cluster tooling in hack/cluster)", rel)
		}
	}
}

// layoutFolders are the folders the layout's tables (header "Folder") name
// in their first column; a trailing /* stands for every folder below.
func layoutFolders(t *testing.T) []string {
	t.Helper()
	p, err := Read(architecture)
	require.NoError(t, err)
	var out []string
	for _, tb := range p.Tables() {
		if len(tb.Header) == 0 || tb.Header[0] != "Folder" {
			continue
		}
		for _, row := range tb.Rows {
			out = append(out, CodeSpans(row[0])...)
		}
	}
	require.NotEmpty(t, out, "%s has tables with a Folder column", architecture)
	return out
}

// The layout names every Go package of this module in operator/, tests/
// and hack/ (or a folder it lies in, other than those three), and every
// folder it names exists.
func TestLayoutNamesEveryPackage(t *testing.T) {
	root := repo.MustRoot()
	areas := []string{"operator", "tests", "hack"}
	named := layoutFolders(t)
	for _, f := range named {
		dir := strings.TrimSuffix(f, "/*")
		if strings.ContainsAny(dir, "*") {
			t.Errorf("%s names %s: only a trailing /* may stand for the folders below", architecture, f)
			continue
		}
		if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(dir))); err != nil {
			t.Errorf("%s names %s, which does not exist", architecture, f)
		}
	}
	covered := func(pkg string) bool {
		for _, f := range named {
			dir := strings.TrimSuffix(f, "/*")
			if slices.Contains(areas, dir) {
				continue
			}
			if pkg == dir || strings.HasPrefix(pkg, dir+"/") {
				return true
			}
		}
		return false
	}
	pkgs := map[string]bool{}
	for _, area := range areas {
		err := filepath.WalkDir(filepath.Join(root, area), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if name := d.Name(); name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
					return filepath.SkipDir
				}
				if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
					return filepath.SkipDir // a module of its own (hack/tools/*)
				}
				return nil
			}
			if strings.HasSuffix(p, ".go") {
				rel, _ := filepath.Rel(root, filepath.Dir(p))
				pkgs[filepath.ToSlash(rel)] = true
			}
			return nil
		})
		require.NoError(t, err)
	}
	assert.NotEmpty(t, pkgs)
	for pkg := range pkgs {
		if !covered(pkg) {
			t.Errorf("%s: the package %s is in no row of its Repository Layout", architecture, pkg)
		}
	}
}
