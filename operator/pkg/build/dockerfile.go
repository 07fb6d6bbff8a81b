package build

import (
	"fmt"
	"strings"
)

// baseImageMarker starts the runtime base image declaration in a Dockerfile.
const baseImageMarker = "base_image="

// BaseImageOf is the runtime base image declared in a runtime Dockerfile: the
// text after the first "base_image=" up to the end of that line, kept
// verbatim (trailing blanks or a CR included) because it is an input of the
// image tag and 1.8.4 used it so.
func BaseImageOf(dockerfile string) (string, error) {
	_, rest, found := strings.Cut(dockerfile, baseImageMarker)
	if !found {
		return "", fmt.Errorf("dockerfile declares no %q", baseImageMarker)
	}
	line, _, _ := strings.Cut(rest, "\n")
	if line == "" {
		return "", fmt.Errorf("dockerfile declares an empty %q", baseImageMarker)
	}
	return line, nil
}
