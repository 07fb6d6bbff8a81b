package fips

import (
	"bytes"
	"crypto/fips140"
	"crypto/sha1" //nolint:gosec // the test shows that fips140=only refuses it
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/serverless-manager/operator/pkg/module"
	"github.com/kyma-project/serverless-manager/tests/support/repo"
)

// helperEnv makes the test binary act as a main that calls
// RefuseUnlessEnforced (TestMain), so that the check runs in a process
// started with GODEBUG set, which cannot change once a program runs.
const helperEnv = "FIPS_TEST_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "1" {
		RefuseUnlessEnforced("fips-test")
		// What a started binary would do with SHA-1: refused under fips140=only.
		_, err := sha1.New().Write([]byte("x"))
		os.Stdout.WriteString("started, enforced=" + boolString(fips140.Enforced()) + ", sha1 refused=" + boolString(err != nil) + "\n")
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func boolString(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

func lookup(env map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	}
}

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name     string
		env      map[string]string
		enforced bool
		wantErr  string
	}{
		{name: "unset: not FIPS mode", env: map[string]string{}},
		{name: "empty: not FIPS mode", env: map[string]string{EnvMode: ""}},
		{name: "false", env: map[string]string{EnvMode: "false"}},
		{name: "false, enforced anyway", env: map[string]string{EnvMode: "false"}, enforced: true},
		{name: "true and enforced", env: map[string]string{EnvMode: "true", EnvGODEBUG: GODEBUG}, enforced: true},
		{name: "TRUE with spaces and enforced", env: map[string]string{EnvMode: " TRUE "}, enforced: true},
		{name: "true, not enforced, no GODEBUG", env: map[string]string{EnvMode: "true"},
			wantErr: `FIPS mode: KYMA_FIPS_MODE_ENABLED=true, but Go does not enforce FIPS 140-3: GODEBUG=fips140=only is missing (GODEBUG=""); refusing to start`},
		{name: "true, only fips140=on", env: map[string]string{EnvMode: "1", EnvGODEBUG: "fips140=on"},
			wantErr: `GODEBUG=fips140=only is missing (GODEBUG="fips140=on")`},
		{name: "not a boolean", env: map[string]string{EnvMode: "yes"}, enforced: true,
			wantErr: `FIPS mode: KYMA_FIPS_MODE_ENABLED="yes": want true or false`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Check(lookup(tc.env), func() bool { return tc.enforced })
			if tc.wantErr == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.wantErr)
		})
	}
}

func TestRefuseWritesOneLine(t *testing.T) {
	var out bytes.Buffer
	code := refuse("activator", lookup(map[string]string{EnvMode: "true"}), func() bool { return false }, &out)
	assert.Equal(t, 1, code)
	assert.Equal(t, 1, strings.Count(out.String(), "\n"), out.String())
	assert.True(t, strings.HasPrefix(out.String(), "activator: FIPS mode: "), out.String())
	out.Reset()
	assert.Zero(t, refuse("activator", lookup(map[string]string{}), func() bool { return false }, &out))
	assert.Empty(t, out.String())
}

// The check in a real process: GODEBUG is read once at start, so each case
// runs the test binary again with its environment.
func TestRefuseUnlessEnforcedInAProcess(t *testing.T) {
	for _, tc := range []struct {
		name     string
		env      []string
		wantCode int
		wantOut  string
	}{
		{name: "not FIPS mode", env: nil, wantOut: "started, enforced=false, sha1 refused=false"},
		{name: "FIPS mode without GODEBUG", env: []string{EnvMode + "=true"}, wantCode: 1,
			wantOut: "fips-test: FIPS mode: KYMA_FIPS_MODE_ENABLED=true, but Go does not enforce FIPS 140-3: GODEBUG=fips140=only is missing"},
		{name: "FIPS mode with fips140=on only", env: []string{EnvMode + "=true", "GODEBUG=fips140=on"}, wantCode: 1,
			wantOut: `GODEBUG=fips140=only is missing (GODEBUG="fips140=on")`},
		{name: "FIPS mode with fips140=only", env: []string{EnvMode + "=true", "GODEBUG=" + GODEBUG},
			wantOut: "started, enforced=true, sha1 refused=true"},
		{name: "FIPS mode with 1.13's value", env: []string{EnvMode + "=true", "GODEBUG=" + UpstreamGODEBUG},
			wantOut: "started, enforced=true, sha1 refused=true"},
		{name: "fips140=only without FIPS mode starts too", env: []string{"GODEBUG=" + GODEBUG},
			wantOut: "started, enforced=true, sha1 refused=true"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(withoutFIPS(os.Environ()), append([]string{helperEnv + "=1"}, tc.env...)...)
			out, err := cmd.CombinedOutput()
			code := 0
			if err != nil {
				var exit *exec.ExitError
				require.ErrorAs(t, err, &exit, string(out))
				code = exit.ExitCode()
			}
			assert.Equal(t, tc.wantCode, code, string(out))
			assert.Contains(t, string(out), tc.wantOut)
			assert.Equal(t, 1, strings.Count(string(out), "\n"), "one line: %s", out)
		})
	}
}

// withoutFIPS drops what the test's own environment might set.
func withoutFIPS(env []string) []string {
	return slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		return k == EnvMode || k == EnvGODEBUG || k == helperEnv
	})
}

// Every main of the module checks first, before flags, configuration or
// subcommands (the Function controller's build steps are subcommands).
func TestEveryMainRefusesFirst(t *testing.T) {
	root := repo.MustRoot()
	for _, id := range module.Binaries() {
		t.Run(id.Binary, func(t *testing.T) {
			path := filepath.Join(root, filepath.FromSlash(id.Package), "main.go")
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
			require.NoError(t, err)
			var main *ast.FuncDecl
			for _, d := range f.Decls {
				if fn, ok := d.(*ast.FuncDecl); ok && fn.Name.Name == "main" && fn.Recv == nil {
					main = fn
				}
			}
			require.NotNil(t, main, "func main in %s", path)
			require.NotEmpty(t, main.Body.List)
			call, ok := main.Body.List[0].(*ast.ExprStmt)
			require.True(t, ok, "the first statement of main is fips.RefuseUnlessEnforced(...)")
			sel, ok := call.X.(*ast.CallExpr).Fun.(*ast.SelectorExpr)
			require.True(t, ok)
			assert.Equal(t, "fips", sel.X.(*ast.Ident).Name)
			assert.Equal(t, "RefuseUnlessEnforced", sel.Sel.Name)
		})
	}
}
