// Package buildflags says what functionBuildExecutorArgs (kaniko's flags,
// kept in the Serverless CR and the Function controller's configuration
// for compatibility) mean for our builder. The manager reports the flags
// without effect; the Function controller applies the others.
package buildflags

import (
	"strconv"
	"strings"
)

// Default is the chart's functionBuildExecutorArgs: the flags with a
// meaning for our builder, as the 1.8.4 default set them (its kaniko-only
// flags are gone with kaniko).
const Default = "--insecure,--skip-tls-verify,--cache=true"

// Flags are what functionBuildExecutorArgs mean for our builder.
type Flags struct {
	// Insecure: plain HTTP to the registries (--insecure).
	Insecure bool
	// SkipTLSVerify: registry certificates are not verified (--skip-tls-verify).
	SkipTLSVerify bool
	// Cache: dependency layers are kept and reused (--cache, on unless
	// --cache=false).
	Cache bool
	// Ignored are the flags that have no meaning for our builder.
	Ignored []string
}

// Split is the list of flags of a comma-separated functionBuildExecutorArgs.
func Split(args string) []string {
	var out []string
	for _, a := range strings.Split(args, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// Parse maps kaniko's flags to our builder's options; a flag without a
// meaning here is listed in Ignored, never dropped silently.
func Parse(args []string) Flags {
	f := Flags{Cache: true}
	for _, arg := range args {
		name, value, hasValue := strings.Cut(strings.TrimSpace(arg), "=")
		on := true
		if hasValue {
			b, err := strconv.ParseBool(value)
			if err != nil {
				f.Ignored = append(f.Ignored, arg)
				continue
			}
			on = b
		}
		switch name {
		case "--insecure", "--insecure-pull":
			f.Insecure = f.Insecure || on
		case "--skip-tls-verify", "--skip-tls-verify-pull":
			f.SkipTLSVerify = f.SkipTLSVerify || on
		case "--cache":
			f.Cache = on
		case "":
		default:
			f.Ignored = append(f.Ignored, arg)
		}
	}
	return f
}
