// Command registry-init stands in, on the local cluster, for the init
// container of the chart's internal registry (its image is not reachable
// here): it writes the registry's htpasswd file from the mounted
// credentials and gives the registry's volume to the registry's user, so a
// volume written by an older registry (as root) stays usable.
package main

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/kyma-project/serverless-manager/hack/cluster/htpasswd"
)

// Paths the chart mounts into the init container.
const (
	credentialsDir = "/regcred"
	htpasswdDir    = "/data"
	storageDir     = "/var/lib/registry"
	registryUser   = 1000
)

func main() {
	if err := run(credentialsDir, htpasswdDir, storageDir); err != nil {
		fmt.Fprintln(os.Stderr, "registry-init:", err)
		os.Exit(1)
	}
}

func run(credentials, dir, storage string) error {
	user, err := os.ReadFile(filepath.Join(credentials, "username.txt"))
	if err != nil {
		return err
	}
	password, err := os.ReadFile(filepath.Join(credentials, "password.txt"))
	if err != nil {
		return err
	}
	line, err := htpasswd.Line(strings.TrimSpace(string(user)), string(password))
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "htpasswd"), line, 0o644); err != nil {
		return err
	}
	return filepath.WalkDir(storage, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, registryUser, registryUser)
	})
}
