// Package repo finds the repository's root directory, for tests and hack
// tools that read files of the repository (charts, config, bin/).
package repo

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
)

// ModulePath is the Go module of this repository.
const ModulePath = "github.com/kyma-project/serverless-manager"

// Root is the nearest directory above the working directory whose go.mod
// declares ModulePath. go test runs in the package's directory and go run
// where it is called, so both find it.
func Root() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.Contains(data, []byte("module "+ModulePath+"\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod of %s above the working directory", ModulePath)
		}
		dir = parent
	}
}

// MustRoot is Root for tests, where a missing root is a broken checkout.
func MustRoot() string {
	root, err := Root()
	if err != nil {
		panic(err)
	}
	return root
}
