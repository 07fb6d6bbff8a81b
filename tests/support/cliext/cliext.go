// Package cliext reads a kyma CLI extension (format v1, the ConfigMap data
// key kyma-commands.yaml) and fills a command's `with` configuration from
// an argument and flag values the way the CLI does
// (docs/contributor/kyma-cli-extension.md): the configuration is written
// out as YAML, run through Go text/template with the delimiters ${{ }},
// the Sprig functions and the CLI's own helpers, and read back.
package cliext

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Labels and data key by which the CLI finds extensions in a cluster.
const (
	LabelExtension        = "kyma-cli/extension"
	LabelExtensionValue   = "commands"
	LabelExtensionVersion = "kyma-cli/extension-version"
	Version               = "v1"
	DataKey               = "kyma-commands.yaml"
)

// Flag and argument types of format v1.
const (
	TypeString = "string"
	TypePath   = "path"
	TypeInt    = "int"
	TypeBool   = "bool"
	TypeMap    = "map"
)

var validTypes = []string{TypeString, TypePath, TypeInt, TypeBool, TypeMap}

// Extension is one command with its subcommands.
type Extension struct {
	Metadata    Metadata       `yaml:"metadata"`
	Uses        string         `yaml:"uses"`
	Flags       []Flag         `yaml:"flags"`
	Args        *Args          `yaml:"args"`
	With        map[string]any `yaml:"with"`
	SubCommands []Extension    `yaml:"subCommands"`
}

// Metadata names and describes a command; Name is its usage line, whose
// first word is the command.
type Metadata struct {
	Name            string `yaml:"name"`
	Description     string `yaml:"description"`
	DescriptionLong string `yaml:"descriptionLong"`
}

// Args is a command's single positional argument.
type Args struct {
	Type     string `yaml:"type"`
	Optional bool   `yaml:"optional"`
}

// Flag is one flag; Default nil means the flag's value is nil until given.
type Flag struct {
	Type        string  `yaml:"type"`
	Name        string  `yaml:"name"`
	Description string  `yaml:"description"`
	Shorthand   string  `yaml:"shorthand"`
	Default     *string `yaml:"default"`
	Required    bool    `yaml:"required"`
}

// Parse reads an extension and checks it as the CLI does, and more
// strictly: an unknown field is an error, not ignored.
func Parse(data []byte) (*Extension, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var ext Extension
	if err := dec.Decode(&ext); err != nil {
		return nil, fmt.Errorf("reading the extension: %w", err)
	}
	if err := ext.validate("."); err != nil {
		return nil, err
	}
	return &ext, nil
}

// Word is the command's name: the first word of its usage line.
func (e *Extension) Word() string {
	word, _, _ := strings.Cut(e.Metadata.Name, " ")
	return word
}

func (e *Extension) validate(path string) error {
	var errs []error
	if e.Word() == "" {
		errs = append(errs, fmt.Errorf("%smetadata.name is empty", path))
	}
	if e.Args != nil && !slices.Contains(validTypes, e.Args.Type) {
		errs = append(errs, fmt.Errorf("%sargs.type %q is not one of %v", path, e.Args.Type, validTypes))
	}
	names, shorthands := map[string]bool{}, map[string]bool{}
	for _, f := range e.Flags {
		if f.Name == "" {
			errs = append(errs, fmt.Errorf("%sflags: a flag without a name", path))
		}
		if !slices.Contains(validTypes, f.Type) {
			errs = append(errs, fmt.Errorf("%sflags.%s: type %q is not one of %v", path, f.Name, f.Type, validTypes))
		}
		if names[f.Name] {
			errs = append(errs, fmt.Errorf("%sflags.%s: defined twice", path, f.Name))
		}
		if f.Shorthand != "" && shorthands[f.Shorthand] {
			errs = append(errs, fmt.Errorf("%sflags.%s: shorthand %q used twice", path, f.Name, f.Shorthand))
		}
		names[f.Name], shorthands[f.Shorthand] = true, true
		// The CLI parses a default when it builds the command: a bad one
		// breaks the whole command group.
		if _, err := typedValue(f.Type, f.Default); err != nil {
			errs = append(errs, fmt.Errorf("%sflags.%s: default: %w", path, f.Name, err))
		}
	}
	words := map[string]bool{}
	for i := range e.SubCommands {
		sub := &e.SubCommands[i]
		if words[sub.Word()] {
			errs = append(errs, fmt.Errorf("%ssubCommands: %q defined twice", path, sub.Word()))
		}
		words[sub.Word()] = true
		if err := sub.validate(fmt.Sprintf("%ssubCommands[%d].", path, i)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Command finds a subcommand by its words, e.g. Command("create", "nodejs").
func (e *Extension) Command(words ...string) (*Extension, error) {
	cur := e
	for i, w := range words {
		var next *Extension
		for j := range cur.SubCommands {
			if cur.SubCommands[j].Word() == w {
				next = &cur.SubCommands[j]
			}
		}
		if next == nil {
			return nil, fmt.Errorf("no command %q", strings.Join(words[:i+1], " "))
		}
		cur = next
	}
	return cur, nil
}

// Flag returns the command's flag of that name.
func (e *Extension) Flag(name string) (Flag, bool) {
	for _, f := range e.Flags {
		if f.Name == name {
			return f, true
		}
	}
	return Flag{}, false
}

// Configure fills the command's `with` configuration. arg is the
// positional argument (nil: none given); flags holds what the user typed
// for each flag given, one entry a repetition (`--env A=1 --env B=2`); a
// path flag's value is read from that file, as the CLI does.
func (e *Extension) Configure(arg *string, flags map[string][]string) (map[string]any, error) {
	data, err := e.values(arg, flags)
	if err != nil {
		return nil, err
	}
	raw, err := yaml.Marshal(e.With)
	if err != nil {
		return nil, fmt.Errorf("writing %q's configuration: %w", e.Word(), err)
	}
	out, err := execute(string(raw), data)
	if err != nil {
		return nil, fmt.Errorf("filling %q's configuration: %w", e.Word(), err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal([]byte(out), &cfg); err != nil {
		return nil, fmt.Errorf("reading %q's filled configuration: %w\n%s", e.Word(), err, out)
	}
	return cfg, nil
}

// values is the data the templates see: .args.value and
// .flags.<name without dashes>.value.
func (e *Extension) values(arg *string, given map[string][]string) (map[string]any, error) {
	data := map[string]any{}
	if e.Args != nil {
		if arg == nil && !e.Args.Optional {
			return nil, fmt.Errorf("%q requires exactly one argument", e.Word())
		}
		v, err := typedValue(e.Args.Type, arg)
		if err != nil {
			return nil, fmt.Errorf("argument: %w", err)
		}
		if e.Args.Type == TypePath && arg != nil {
			if v, err = readPath(*arg); err != nil {
				return nil, err
			}
		}
		data["args"] = map[string]any{"type": e.Args.Type, "optional": e.Args.Optional, "value": v}
	}
	flags := map[string]any{}
	for name := range given {
		if _, ok := e.Flag(name); !ok {
			return nil, fmt.Errorf("%q has no flag --%s", e.Word(), name)
		}
	}
	for _, f := range e.Flags {
		v, err := typedValue(f.Type, f.Default)
		if err != nil {
			return nil, fmt.Errorf("--%s default: %w", f.Name, err)
		}
		for _, s := range given[f.Name] {
			if v, err = setValue(f.Type, v, s); err != nil {
				return nil, fmt.Errorf("--%s: %w", f.Name, err)
			}
		}
		if f.Required && len(given[f.Name]) == 0 {
			return nil, fmt.Errorf("--%s is required", f.Name)
		}
		flags[strings.ReplaceAll(f.Name, "-", "")] = map[string]any{
			"type": f.Type, "name": f.Name, "shorthand": f.Shorthand, "description": f.Description, "value": v,
		}
	}
	data["flags"] = flags
	return data, nil
}

// typedValue is a value of a flag's type from its default; nil stays nil
// (a map starts empty).
func typedValue(typ string, s *string) (any, error) {
	if typ == TypeMap {
		m := map[string]any{}
		if s != nil && *s != "" {
			return setValue(typ, m, *s)
		}
		return m, nil
	}
	if s == nil {
		return nil, nil
	}
	switch typ {
	case TypeInt:
		n, err := strconv.ParseInt(*s, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%q is not an integer", *s)
		}
		return n, nil
	case TypeBool:
		b, err := strconv.ParseBool(*s)
		if err != nil {
			return nil, fmt.Errorf("%q is not true or false", *s)
		}
		return b, nil
	default:
		return *s, nil
	}
}

// setValue applies one value the user typed; an empty one changes nothing.
func setValue(typ string, cur any, s string) (any, error) {
	if s == "" {
		return cur, nil
	}
	switch typ {
	case TypePath:
		return readPath(s)
	case TypeMap:
		m, _ := cur.(map[string]any)
		out := make(map[string]any, len(m)+1)
		for k, v := range m {
			out[k] = v
		}
		key, value, ok := strings.Cut(s, "=")
		if !ok || strings.Contains(value, "=") {
			return nil, fmt.Errorf("%q is not KEY=VALUE", s)
		}
		if _, dup := out[key]; dup {
			return nil, fmt.Errorf("key %q given twice", key)
		}
		out[key] = value
		return out, nil
	default:
		return typedValue(typ, &s)
	}
}

func readPath(p string) (string, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", p, err)
	}
	return string(b), nil
}
