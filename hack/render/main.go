// Command render builds config/default with the kustomize API and prints one
// install YAML: `make render | kubectl apply --server-side -f -`. It holds no
// Namespace: kyma-system must exist first, and deleting the YAML leaves it.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/kyma-project/serverless-manager/hack/render/manifests"
)

func main() {
	dir := flag.String("dir", filepath.Join("config", "default"), "kustomization to build")
	image := flag.String("image", os.Getenv("IMG"), "manager image reference (default: the one in config/manager)")
	var env envFlag
	flag.Var(&env, "env", "NAME=VALUE added to the manager's environment (repeatable)")
	flag.Parse()
	out, err := manifests.Build(*dir, *image, env...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "render:", err)
		os.Exit(1)
	}
	_, _ = os.Stdout.Write(out)
}

// envFlag collects repeated -env flags.
type envFlag []string

func (e *envFlag) String() string { return strings.Join(*e, ",") }

func (e *envFlag) Set(v string) error {
	*e = append(*e, v)
	return nil
}
