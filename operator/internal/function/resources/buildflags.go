package resources

import (
	"strconv"
	"strings"
)

// BuildFlags are what functionBuildExecutorArgs (kaniko's flags, kept in
// the Serverless CR) mean for our builder.
type BuildFlags struct {
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

// ParseExecutorArgs maps kaniko's flags to our builder's options; a flag
// without a meaning here is listed in Ignored, never dropped silently.
func ParseExecutorArgs(args []string) BuildFlags {
	f := BuildFlags{Cache: true}
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
