package ociimage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/kyma-project/serverless-manager/operator/pkg/fips"
)

// GoBuildFlags are `make build`'s: no cgo (a static binary that needs no
// libc in the image), reproducible paths, no symbol tables; with Go's FIPS
// 140-3 module (GOFIPS140, set in the environment).
var goBuildFlags = []string{"-trimpath", "-ldflags", "-s -w"}

// GoBuild compiles the main package pkg (relative to the module root dir,
// e.g. "./operator/cmd/manager") for goos/goarch into out, as `make build`
// does. A package that does not exist (yet) is an error that says so.
func GoBuild(ctx context.Context, dir, pkg, goos, goarch, out string) error {
	if st, err := os.Stat(filepath.Join(dir, filepath.FromSlash(pkg))); err != nil || !st.IsDir() {
		return fmt.Errorf("main package %s does not exist in %s: nothing to build", pkg, dir)
	}
	args := append([]string{"build"}, goBuildFlags...)
	args = append(args, "-o", out, pkg)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFIPS140="+fips.Module, "GOOS="+goos, "GOARCH="+goarch)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			return fmt.Errorf("go build %s: %w", pkg, err)
		}
		return fmt.Errorf("go build %s: %w: %s", pkg, err, msg)
	}
	if _, err := os.Stat(out); err != nil {
		return errors.Join(fmt.Errorf("go build %s wrote no binary", pkg), err)
	}
	return nil
}
