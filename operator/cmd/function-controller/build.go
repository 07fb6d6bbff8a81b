package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/kyma-project/serverless-manager/operator/pkg/build"
)

// runBuild is `function-controller build prepare|image`, the build Job's
// steps in this image (see package build): prepare writes the dependency
// key and whether its layer is kept; image pushes the Function's image and
// writes its digest as the termination message, which the controller
// records. A failure says which registry and why, there and on stderr.
func runBuild(ctx context.Context, args []string, lookup func(string) (string, bool), stdout, stderr io.Writer, termLog string) int {
	step := "build"
	if path, ok := lookup(build.EnvTerminationLog); ok && path != "" {
		termLog = path
	}
	if len(args) != 1 || (args[0] != "prepare" && args[0] != "image") {
		return fail(stderr, step, termLog, fmt.Errorf("usage: function-controller build prepare|image (got %q)", args))
	}
	step += " " + args[0]
	o, err := build.OptionsFromEnv(lookup)
	if err != nil {
		return fail(stderr, step, termLog, err)
	}
	if args[0] == "prepare" {
		key, cached, err := build.Prepare(ctx, o)
		if err != nil {
			return fail(stderr, step, termLog, err)
		}
		fmt.Fprintf(stdout, "dependency key %s, kept layer: %t\n", key, cached)
		return 0
	}
	digest, err := build.Image(ctx, o)
	if err != nil {
		return fail(stderr, step, termLog, err)
	}
	fmt.Fprintf(stdout, "pushed %s@%s\n", o.Destination, digest)
	if err := os.WriteFile(termLog, []byte(digest.String()), 0o644); err != nil {
		return fail(stderr, step, os.DevNull, fmt.Errorf("writing the digest to %s: %w", termLog, err))
	}
	return 0
}
