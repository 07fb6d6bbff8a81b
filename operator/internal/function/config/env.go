package config

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
)

// envReader reads variables one by one and collects the errors, so that
// Load reports every bad variable at once.
type envReader struct {
	lookup func(string) (string, bool)
	errs   []error
}

// value is the variable's trimmed text; false when absent, empty or blank
// (envconfig treats present-but-empty as absent; blanks are never meant).
func (r *envReader) value(name string) (string, bool) {
	v, ok := r.lookup(name)
	v = strings.TrimSpace(v)
	return v, ok && v != ""
}

func (r *envReader) fail(name, value string, err error) {
	r.errs = append(r.errs, fmt.Errorf("%s=%q: %w", name, value, err))
}

// parsed is the variable read by parse, or def when it is absent or parse
// refuses it (the refusal is collected).
func parsed[T any](r *envReader, name string, def T, parse func(string) (T, error)) T {
	v, ok := r.value(name)
	if !ok {
		return def
	}
	out, err := parse(v)
	if err != nil {
		r.fail(name, v, err)
		return def
	}
	return out
}

func (r *envReader) str(name, def string) string {
	if v, ok := r.value(name); ok {
		return v
	}
	return def
}

// mode is build (the default) or buildless.
func (r *envReader) mode(name string) Mode {
	return parsed(r, name, ModeBuild, func(v string) (Mode, error) {
		if m := Mode(v); m == ModeBuild || m == ModeBuildless {
			return m, nil
		}
		return "", fmt.Errorf("must be %q or %q", ModeBuild, ModeBuildless)
	})
}

// oneOf is one of allowed, "" when absent.
func (r *envReader) oneOf(name string, allowed ...string) string {
	return parsed(r, name, "", func(v string) (string, error) {
		if slices.Contains(allowed, v) {
			return v, nil
		}
		return "", fmt.Errorf("must be one of %q or empty", allowed)
	})
}

// image is an image reference ("" when absent); one with blanks inside
// can only be a mistake.
func (r *envReader) image(name string) string {
	return parsed(r, name, "", func(v string) (string, error) {
		if strings.ContainsAny(v, " \t\n") {
			return "", fmt.Errorf("an image reference contains no blanks")
		}
		return v, nil
	})
}

// nameRule validates a Kubernetes object name; it returns the problems.
type nameRule func(string) []string

func label(s string) []string     { return validation.IsDNS1123Label(s) }
func subdomain(s string) []string { return validation.IsDNS1123Subdomain(s) }

// name is an object name; a name the API server would reject fails now
// rather than at the first copy or Pod.
func (r *envReader) name(name, def string, rule nameRule) string {
	v, ok := r.value(name)
	if !ok {
		return def
	}
	if problems := rule(v); len(problems) > 0 {
		r.fail(name, v, fmt.Errorf("invalid name: %s", strings.Join(problems, "; ")))
	}
	return v
}

// list splits on commas as envconfig does; items are trimmed and empty items
// dropped (an empty kaniko argument or namespace name is never meant).
func (r *envReader) list(name string, def []string) []string {
	v, ok := r.value(name)
	if !ok {
		return def
	}
	var out []string
	for _, item := range strings.Split(v, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

func (r *envReader) names(name string, def []string, rule nameRule) []string {
	out := r.list(name, def)
	for _, n := range out {
		if problems := rule(n); len(problems) > 0 {
			r.fail(name, n, fmt.Errorf("invalid name: %s", strings.Join(problems, "; ")))
		}
	}
	return out
}

// duration must be positive: every duration here is a timeout or a requeue
// delay, where zero would mean a busy loop or an instant failure.
func (r *envReader) duration(name string, def time.Duration) time.Duration {
	return parsed(r, name, def, func(v string) (time.Duration, error) {
		d, err := time.ParseDuration(v)
		if err == nil && d <= 0 {
			err = fmt.Errorf("must be positive")
		}
		return d, err
	})
}

func (r *envReader) boolean(name string, def bool) bool {
	return parsed(r, name, def, strconv.ParseBool)
}

// quantity is a resource quantity such as "1" or "500m", not negative.
func (r *envReader) quantity(name string, def resource.Quantity) resource.Quantity {
	return parsed(r, name, def, func(v string) (resource.Quantity, error) {
		q, err := resource.ParseQuantity(v)
		if err == nil && q.Sign() < 0 {
			err = fmt.Errorf("must not be negative")
		}
		return q, err
	})
}

// int32 must be at least 1: a CPU target or a build cap of 0 (or less)
// would stop scaling or building altogether.
func (r *envReader) int32(name string, def int32) int32 {
	return parsed(r, name, def, func(v string) (int32, error) {
		i, err := strconv.ParseInt(v, 10, 32)
		if err == nil && i < 1 {
			err = fmt.Errorf("must be at least 1")
		}
		return int32(i), err
	})
}

// resources parses the preset document; absent means no presets (the code
// default), so Functions without custom resources get no requests/limits.
func (r *envReader) resources(name string) ResourceConfig {
	if _, ok := r.value(name); !ok {
		return ResourceConfig{}
	}
	// Untrimmed: trimming the first line's indentation alone would break a
	// uniformly indented document.
	v, _ := r.lookup(name)
	rc, err := ParseResourceConfig([]byte(v))
	if err != nil {
		// The document may be long; the error says where it is wrong.
		r.errs = append(r.errs, fmt.Errorf("%s: %w", name, err))
		return ResourceConfig{}
	}
	return rc
}
