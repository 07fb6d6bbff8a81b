// Package htpasswd writes the entry of distribution's htpasswd
// authentication: the local stand-in of the internal registry's init
// container and the e2e tests' external registry share it.
package htpasswd

import (
	"errors"
	"strings"

	"golang.org/x/crypto/bcrypt"
)

// Cost is the bcrypt cost, Apache `htpasswd -B`'s default (bcrypt is what
// distribution accepts). The registry checks the hash on every request: at
// Go's default cost (10) that is 60 ms of CPU per request on a 2-core
// machine, and under the internal registry's 400m limit builds and pulls
// queued behind it. The module's passwords are long random strings, so a
// costlier hash would add no protection.
const Cost = 5

// Line is the htpasswd line "name:bcrypt-hash\n" of the credentials.
func Line(name, password string) ([]byte, error) {
	if strings.TrimSpace(name) == "" || strings.Contains(name, ":") {
		return nil, errors.New("the registry user name is empty or holds a colon")
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(password), Cost)
	if err != nil {
		return nil, err
	}
	return []byte(name + ":" + string(hash) + "\n"), nil
}
