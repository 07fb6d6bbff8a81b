package cliext

import (
	"fmt"
	"strings"
)

// Invocation is a command line resolved against an extension: the command
// it runs, its argument (nil: none) and the flags given, by long name.
type Invocation struct {
	Command *Extension
	Path    []string
	Arg     *string
	Flags   map[string][]string
}

// Resolve reads the words after the extension's own name (`kyma function`)
// as the CLI's flag parser does: subcommand words first, then flags and at
// most one argument in any order; --name value, --name=value, -s value; a
// bool flag alone means true.
func (e *Extension) Resolve(words []string) (*Invocation, error) {
	inv := &Invocation{Command: e, Flags: map[string][]string{}}
	i := 0
	for ; i < len(words); i++ {
		sub, err := inv.Command.Command(words[i])
		if err != nil {
			break
		}
		inv.Command = sub
		inv.Path = append(inv.Path, words[i])
	}
	if len(inv.Path) == 0 {
		return nil, fmt.Errorf("%q is not a command of %q", strings.Join(words, " "), e.Word())
	}
	cmd := inv.Command
	for ; i < len(words); i++ {
		w := words[i]
		if !strings.HasPrefix(w, "-") || w == "-" {
			if inv.Arg != nil {
				return nil, fmt.Errorf("%s: a second argument %q", strings.Join(inv.Path, " "), w)
			}
			if cmd.Args == nil {
				return nil, fmt.Errorf("%s takes no argument, got %q", strings.Join(inv.Path, " "), w)
			}
			inv.Arg = &w
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(w, "-"), "=")
		var flag Flag
		found := false
		for _, f := range cmd.Flags {
			if (strings.HasPrefix(w, "--") && f.Name == name) || (!strings.HasPrefix(w, "--") && f.Shorthand != "" && f.Shorthand == name) {
				flag, found = f, true
			}
		}
		if !found {
			return nil, fmt.Errorf("%s has no flag %s", strings.Join(inv.Path, " "), w)
		}
		if !hasValue {
			if flag.Type == TypeBool {
				value = "true"
			} else {
				if i+1 >= len(words) {
					return nil, fmt.Errorf("%s: flag %s needs a value", strings.Join(inv.Path, " "), w)
				}
				i++
				value = words[i]
			}
		}
		inv.Flags[flag.Name] = append(inv.Flags[flag.Name], value)
	}
	return inv, nil
}

// Words splits a shell command line into words: single and double quotes,
// backslash escapes, and $NAME or ${NAME} (not in single quotes) replaced
// from vars; a variable vars does not name is an error.
func Words(line string, vars map[string]string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	quote := byte(0)
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case quote == '\'':
			if c == '\'' {
				quote = 0
			} else {
				cur.WriteByte(c)
			}
		case c == '\\' && i+1 < len(line):
			i++
			cur.WriteByte(line[i])
			inWord = true
		case c == '$':
			name, n := varName(line[i+1:])
			if name == "" {
				cur.WriteByte(c)
			} else {
				v, ok := vars[name]
				if !ok {
					return nil, fmt.Errorf("$%s is not set", name)
				}
				cur.WriteString(v)
				i += n
			}
			inWord = true
		case quote == '"':
			if c == '"' {
				quote = 0
			} else {
				cur.WriteByte(c)
			}
		case c == '\'' || c == '"':
			quote, inWord = c, true
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unclosed %c in %s", quote, line)
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

// varName is the variable name at the start of s ($ already read) and how
// many bytes it takes.
func varName(s string) (string, int) {
	if strings.HasPrefix(s, "{") {
		if end := strings.IndexByte(s, '}'); end > 1 {
			return s[1:end], end + 1
		}
		return "", 0
	}
	n := 0
	for n < len(s) && (s[n] == '_' || s[n] >= 'A' && s[n] <= 'Z' || s[n] >= 'a' && s[n] <= 'z' || n > 0 && s[n] >= '0' && s[n] <= '9') {
		n++
	}
	return s[:n], n
}
