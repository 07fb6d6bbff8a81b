package build

import (
	"errors"
	"fmt"
	"net"
	"net/http"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// describe says which registry request failed and why in words a user can
// act on: unreachable, credentials refused, image missing. The registry's
// own text follows; credentials are never part of it.
func describe(what string, ref name.Reference, err error) error {
	registry := ref.Context().RegistryStr()
	var te *transport.Error
	switch {
	case errors.As(err, &te) && (te.StatusCode == http.StatusUnauthorized || te.StatusCode == http.StatusForbidden):
		return fmt.Errorf("%s %s: registry %s refused the credentials (HTTP %d): %w", what, ref, registry, te.StatusCode, err)
	case isNotFound(err):
		return fmt.Errorf("%s %s: not found in registry %s: %w", what, ref, registry, err)
	case isUnreachable(err):
		return fmt.Errorf("%s %s: registry %s is unreachable: %w", what, ref, registry, err)
	}
	return fmt.Errorf("%s %s: %w", what, ref, err)
}

func isNotFound(err error) bool {
	var te *transport.Error
	if !errors.As(err, &te) {
		return false
	}
	if te.StatusCode == http.StatusNotFound {
		return true
	}
	for _, d := range te.Errors {
		if d.Code == transport.ManifestUnknownErrorCode || d.Code == transport.NameUnknownErrorCode {
			return true
		}
	}
	return false
}

func isUnreachable(err error) bool {
	var ne net.Error
	var oe *net.OpError
	var de *net.DNSError
	return errors.As(err, &oe) || errors.As(err, &de) || (errors.As(err, &ne) && ne.Timeout())
}
