package cliext_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/ptr"

	"github.com/kyma-project/serverless-manager/tests/support/cliext"
)

const sample = `
metadata:
  name: thing
subCommands:
- metadata:
    name: "make <name> [flags]"
  uses: resource_create
  args: {type: string}
  flags:
  - {type: string, name: kind, shorthand: k, default: "plain"}
  - {type: int, name: count, default: "1"}
  - {type: bool, name: loud}
  - {type: map, name: label, default: ""}
  - {type: path, name: body, default: "one line"}
  with:
    resource:
      name: ${{ .args.value }}
      kind: ${{ .flags.kind.value | upper }}
      count: ${{ .flags.count.value }}
      annotations: ${{ .flags.loud.value | ifNil "{'loud':'${{ .flags.loud.value }}'}" "" }}
      labels: ${{ .flags.label.value | toArray "{'k':'{{.key}}','v':'{{.value}}'}" }}
      env: ${{ .flags.label.value | toEnvs }}
      data: ${{ .flags.label.value | toYaml }}
      body: |
        ${{ .flags.body.value | newLineIndent 8 }}
`

func TestConfigure(t *testing.T) {
	ext, err := cliext.Parse([]byte(sample))
	require.NoError(t, err)
	cmd, err := ext.Command("make")
	require.NoError(t, err)
	body := filepath.Join(t.TempDir(), "body.txt")
	require.NoError(t, os.WriteFile(body, []byte("line 1\n  line 2\nline 3"), 0o600))

	tests := []struct {
		name  string
		flags map[string][]string
		want  map[string]any
	}{
		{"defaults", nil, map[string]any{
			"name": "x", "kind": "PLAIN", "count": 1, "annotations": nil,
			"labels": []any{}, "env": []any{}, "data": map[string]any{}, "body": "one line\n",
		}},
		{"every flag", map[string][]string{"kind": {"fancy"}, "count": {"3"}, "loud": {"false"}, "label": {"b=2", "a=1"}, "body": {body}}, map[string]any{
			"name": "x", "kind": "FANCY", "count": 3, "annotations": map[string]any{"loud": "false"},
			"labels": []any{map[string]any{"k": "a", "v": "1"}, map[string]any{"k": "b", "v": "2"}},
			"env":    []any{map[string]any{"name": "a", "value": "1"}, map[string]any{"name": "b", "value": "2"}},
			"data":   map[string]any{"a": "1", "b": "2"},
			"body":   "line 1\n  line 2\nline 3\n",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := cmd.Configure(ptr.To("x"), tt.flags)
			require.NoError(t, err)
			assert.Equal(t, tt.want, cfg["resource"])
		})
	}
}

func TestConfigureRefuses(t *testing.T) {
	ext, err := cliext.Parse([]byte(sample))
	require.NoError(t, err)
	cmd, err := ext.Command("make")
	require.NoError(t, err)
	tests := []struct {
		name  string
		arg   *string
		flags map[string][]string
		want  string
	}{
		{"no argument", nil, nil, `"make" requires exactly one argument`},
		{"unknown flag", ptr.To("x"), map[string][]string{"colour": {"red"}}, `"make" has no flag --colour`},
		{"not an integer", ptr.To("x"), map[string][]string{"count": {"many"}}, `--count: "many" is not an integer`},
		{"not a pair", ptr.To("x"), map[string][]string{"label": {"a"}}, `--label: "a" is not KEY=VALUE`},
		{"key twice", ptr.To("x"), map[string][]string{"label": {"a=1", "a=2"}}, `--label: key "a" given twice`},
		{"missing file", ptr.To("x"), map[string][]string{"body": {"/nonexistent/file"}}, "--body: reading /nonexistent/file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := cmd.Configure(tt.arg, tt.flags)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestParseRefuses(t *testing.T) {
	tests := []struct{ name, yaml, want string }{
		{"unknown field", "metadata: {name: a}\nuse: resource_get\n", "field use not found"},
		{"no name", "metadata: {description: a}\n", ".metadata.name is empty"},
		{"bad flag type", "metadata: {name: a}\nflags: [{name: f, type: float}]\n", `.flags.f: type "float"`},
		{"flag twice", "metadata: {name: a}\nflags: [{name: f, type: string}, {name: f, type: bool}]\n", ".flags.f: defined twice"},
		{"bad default", "metadata: {name: a}\nflags: [{name: f, type: int, default: x}]\n", `.flags.f: default: "x" is not an integer`},
		{"subcommand twice", "metadata: {name: a}\nsubCommands: [{metadata: {name: b}}, {metadata: {name: b x}}]\n", `"b" defined twice`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := cliext.Parse([]byte(tt.yaml))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestResolve(t *testing.T) {
	ext, err := cliext.Parse([]byte(sample))
	require.NoError(t, err)
	tests := []struct {
		line      string
		wantArg   string
		wantFlags map[string][]string
		wantErr   string
	}{
		{line: `make x`, wantArg: "x", wantFlags: map[string][]string{}},
		{line: `make -k fancy "x" --count=3 --loud --label a=1 --label 'b=$2'`, wantArg: "x",
			wantFlags: map[string][]string{"kind": {"fancy"}, "count": {"3"}, "loud": {"true"}, "label": {"a=1", "b=$2"}}},
		{line: `make --loud=false x -k "$KIND"`, wantArg: "x", wantFlags: map[string][]string{"loud": {"false"}, "kind": {"from env"}}},
		{line: `break x`, wantErr: `"break x" is not a command of "thing"`},
		{line: `make x y`, wantErr: `a second argument "y"`},
		{line: `make x --colour red`, wantErr: "make has no flag --colour"},
		{line: `make x -c 1`, wantErr: "make has no flag -c"},
		{line: `make x --count`, wantErr: "flag --count needs a value"},
		{line: `make x -k "$UNSET"`, wantErr: "$UNSET is not set"},
	}
	for _, tt := range tests {
		t.Run(tt.line, func(t *testing.T) {
			words, err := cliext.Words(tt.line, map[string]string{"KIND": "from env"})
			var inv *cliext.Invocation
			if err == nil {
				inv, err = ext.Resolve(words)
			}
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, []string{"make"}, inv.Path)
			require.NotNil(t, inv.Arg)
			assert.Equal(t, tt.wantArg, *inv.Arg)
			assert.Equal(t, tt.wantFlags, inv.Flags)
		})
	}
}
