package cleanup

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// Registry is the Function registry as the clean-up uses it. Repository
// names are relative to its address.
type Registry interface {
	// Images lists every tagged image of the repositories (nil: of every
	// repository the registry's catalog has under its address). Named
	// repositories the credentials may not read are left out and named in
	// unreadable: hosted registries answer so for one never pushed to.
	Images(ctx context.Context, repositories []string) (images []Image, unreadable []string, err error)
	// Delete removes the image's manifest (and with it its tags).
	Delete(ctx context.Context, img Image) error
}

// RemoteRegistry talks to a registry through its HTTP API.
type RemoteRegistry struct {
	registry name.Registry
	// prefix is the address's path under the host ("" for none): an
	// external registry's address may name an organisation.
	prefix string
	// puller and pusher keep each repository's transport (its ping and
	// authentication) for the round: one ping per repository, not per
	// request.
	puller *remote.Puller
	pusher *remote.Pusher
}

// NewRemoteRegistry is the registry at address (host[:port][/path]), plain
// HTTP when insecure; tr nil uses the default transport.
func NewRemoteRegistry(address string, auth authn.Authenticator, insecure bool, tr http.RoundTripper) (*RemoteRegistry, error) {
	var nameOpts []name.Option
	if insecure {
		nameOpts = append(nameOpts, name.Insecure)
	}
	host, prefix, _ := strings.Cut(address, "/")
	reg, err := name.NewRegistry(host, nameOpts...)
	if err != nil {
		return nil, fmt.Errorf("registry address %q: %w", address, err)
	}
	opts := []remote.Option{remote.WithAuth(auth)}
	if tr != nil {
		opts = append(opts, remote.WithTransport(tr))
	}
	r := &RemoteRegistry{registry: reg, prefix: strings.Trim(prefix, "/")}
	if r.puller, err = remote.NewPuller(opts...); err != nil {
		return nil, err
	}
	if r.pusher, err = remote.NewPusher(opts...); err != nil {
		return nil, err
	}
	return r, nil
}

// repo is a repository named relative to the address.
func (r *RemoteRegistry) repo(name string) name.Repository {
	if r.prefix == "" {
		return r.registry.Repo(name)
	}
	return r.registry.Repo(r.prefix, name)
}

// Images lists the repositories' tags and each tag's manifest; without
// repositories, those of the catalog under the address.
func (r *RemoteRegistry) Images(ctx context.Context, repositories []string) (out []Image, unreadable []string, err error) {
	named := repositories != nil
	if !named {
		all, err := r.puller.Catalog(ctx, r.registry)
		if err != nil {
			return nil, nil, fmt.Errorf("listing the repositories of %s: %w", r.registry, err)
		}
		for _, name := range all {
			if r.prefix == "" {
				repositories = append(repositories, name)
			} else if rest, ok := strings.CutPrefix(name, r.prefix+"/"); ok {
				repositories = append(repositories, rest)
			}
		}
	}
	for _, name := range repositories {
		repo := r.repo(name)
		tags, err := r.puller.List(ctx, repo)
		switch {
		case notFound(err):
			continue // emptied meanwhile, or never pushed to
		case named && refused(err):
			unreadable = append(unreadable, name)
			continue
		case err != nil:
			return nil, nil, fmt.Errorf("listing the tags of %s: %w", repo, err)
		}
		byDigest := map[string]int{}
		for _, tag := range tags {
			desc, err := r.puller.Get(ctx, repo.Tag(tag))
			if notFound(err) {
				continue
			}
			if err != nil {
				return nil, nil, fmt.Errorf("reading %s:%s: %w", repo, tag, err)
			}
			d := desc.Digest.String()
			if i, ok := byDigest[d]; ok {
				out[i].Tags = append(out[i].Tags, tag)
				continue
			}
			img := Image{Repository: name, Digest: d, Tags: []string{tag}}
			if m, err := v1.ParseManifest(bytes.NewReader(desc.Manifest)); err == nil {
				for _, l := range m.Layers {
					img.Layers = append(img.Layers, l.Digest.String())
				}
			}
			byDigest[d] = len(out)
			out = append(out, img)
		}
	}
	return out, unreadable, nil
}

// Delete removes the manifest by digest.
func (r *RemoteRegistry) Delete(ctx context.Context, img Image) error {
	ref := r.repo(img.Repository).Digest(img.Digest)
	err := r.pusher.Delete(ctx, ref)
	var terr *transport.Error
	switch {
	case err == nil, notFound(err):
		return nil
	case errors.As(err, &terr) && terr.StatusCode == http.StatusMethodNotAllowed:
		return fmt.Errorf("deleting %s: the registry does not allow deletes (storage.delete.enabled): %w", ref, err)
	}
	return fmt.Errorf("deleting %s: %w", ref, err)
}

func notFound(err error) bool {
	var terr *transport.Error
	return errors.As(err, &terr) && terr.StatusCode == http.StatusNotFound
}

// refused: the credentials may not read it (or it does not exist, as
// registries that hide which repositories exist answer).
func refused(err error) bool {
	var terr *transport.Error
	return errors.As(err, &terr) && (terr.StatusCode == http.StatusUnauthorized || terr.StatusCode == http.StatusForbidden)
}
