// Command registry-init stands in, on the local cluster, for the init
// container of the chart's internal registry (its image is not reachable
// here): it writes the registry's htpasswd file from the mounted
// credentials and gives the registry's volume to the registry's user, so a
// volume written by an older registry (as root) stays usable.
package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/crypto/bcrypt"
)

// Paths the chart mounts into the init container.
const (
	credentialsDir = "/regcred"
	htpasswdDir    = "/data"
	storageDir     = "/var/lib/registry"
	registryUser   = 1000
)

// htpasswdCost is the bcrypt cost of the hash, Apache htpasswd's default
// for -B (bcrypt is what distribution's htpasswd accepts). The registry
// checks the hash on every request: at Go's default cost (10) that is 60 ms
// of CPU per request here, and the registry's 400m limit made builds and
// pulls queue behind it. The password is 20 random alphanumerics (~119
// bits), so a costlier hash would add no protection.
const htpasswdCost = 5

func main() {
	if err := run(credentialsDir, htpasswdDir, storageDir); err != nil {
		fmt.Fprintln(os.Stderr, "registry-init:", err)
		os.Exit(1)
	}
}

func run(credentials, htpasswd, storage string) error {
	user, err := os.ReadFile(filepath.Join(credentials, "username.txt"))
	if err != nil {
		return err
	}
	password, err := os.ReadFile(filepath.Join(credentials, "password.txt"))
	if err != nil {
		return err
	}
	name := strings.TrimSpace(string(user))
	if name == "" || strings.Contains(name, ":") {
		return errors.New("the registry user name is empty or holds a colon")
	}
	hash, err := bcrypt.GenerateFromPassword(password, htpasswdCost)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(htpasswd, "htpasswd"), []byte(name+":"+string(hash)+"\n"), 0o644); err != nil {
		return err
	}
	return filepath.WalkDir(storage, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, registryUser, registryUser)
	})
}
