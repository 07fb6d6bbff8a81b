package cliext

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strings"
	"text/template"

	"github.com/Masterminds/sprig/v3"
)

// execute fills a template as the CLI does: delimiters ${{ }}, a missing
// key is the zero value, Sprig's functions (without env and expandenv)
// and the CLI's helpers.
func execute(text string, data map[string]any) (string, error) {
	funcs := sprig.TxtFuncMap()
	delete(funcs, "env")
	delete(funcs, "expandenv")
	funcs["newLineIndent"] = newLineIndent
	funcs["toEnvs"] = toEnvs
	funcs["toArray"] = toArray
	funcs["toYaml"] = toYAML
	// ifNil fills the chosen value as a template of its own, with the same
	// data and functions.
	funcs["ifNil"] = func(ifSet, ifNil, value any) (any, error) {
		chosen := ifSet
		if value == nil {
			chosen = ifNil
		}
		s, ok := chosen.(string)
		if !ok {
			return chosen, nil
		}
		return run(s, funcs, data)
	}
	return run(text, funcs, data)
}

func run(text string, funcs template.FuncMap, data map[string]any) (string, error) {
	t, err := template.New("config").Option("missingkey=zero").Delims("${{", "}}").Funcs(funcs).Parse(text)
	if err != nil {
		return "", fmt.Errorf("parsing the template: %w", err)
	}
	var out bytes.Buffer
	if err := t.Execute(&out, data); err != nil {
		return "", fmt.Errorf("running the template: %w", err)
	}
	return out.String(), nil
}

// newLineIndent indents every line after the first by n spaces, so that a
// multi-line value stays inside the YAML block it is written into.
func newLineIndent(n int, s string) string {
	return strings.ReplaceAll(s, "\n", "\n"+strings.Repeat(" ", n))
}

// toEnvs writes a map as a flow sequence of {name, value} objects. Keys are
// sorted here (the CLI's order is a map's) so that output is stable.
func toEnvs(m map[string]any) string {
	items := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		items = append(items, fmt.Sprintf(`{"name":"%s","value":"%s"}`, k, m[k]))
	}
	return "[" + strings.Join(items, ",") + "]"
}

// toArray writes a map as a flow sequence, each item the format filled
// with {{.key}} and {{.value}} (default delimiters).
func toArray(format string, m map[string]any) (string, error) {
	t, err := template.New("item").Parse(format)
	if err != nil {
		return "", fmt.Errorf("parsing the item format: %w", err)
	}
	items := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		var b bytes.Buffer
		if err := t.Execute(&b, map[string]any{"key": k, "value": m[k]}); err != nil {
			return "", fmt.Errorf("filling the item format: %w", err)
		}
		items = append(items, b.String())
	}
	return "[" + strings.Join(items, ",") + "]", nil
}

// toYAML writes a map as a flow mapping of strings.
func toYAML(m map[string]any) string {
	items := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		items = append(items, fmt.Sprintf(`"%s":"%s"`, k, m[k]))
	}
	return "{" + strings.Join(items, ",") + "}"
}
