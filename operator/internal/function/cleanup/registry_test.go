package cleanup

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An external registry's address may name an organisation: repositories
// are named under it, and only those asked for are read and deleted from.
func TestRemoteRegistryUnderAPath(t *testing.T) {
	srv := httptest.NewServer(registry.New())
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	push := func(repo, tag string) string {
		img, err := random.Image(64, 1)
		require.NoError(t, err)
		require.NoError(t, remote.Write(mustTag(t, host+"/"+repo+":"+tag), img))
		d, err := img.Digest()
		require.NoError(t, err)
		return d.String()
	}
	fnDigest := push("team/ns-fn", "t1")
	push("team/ns-fn/cache", "k")
	push("team/app", "1")
	push("ns-fn", "t1") // another organisation's repository of the same name

	r, err := NewRemoteRegistry(host+"/team", authn.Anonymous, true, nil)
	require.NoError(t, err)
	ctx := context.Background()
	imgs, unreadable, err := r.Images(ctx, []string{"ns-fn", "ns-fn/cache", "ns-never-pushed"})
	require.NoError(t, err)
	assert.Empty(t, unreadable)
	var repos []string
	for _, img := range imgs {
		repos = append(repos, img.Repository)
	}
	assert.Equal(t, []string{"ns-fn", "ns-fn/cache"}, repos, "a repository never pushed to is no error")
	assert.Equal(t, fnDigest, imgs[0].Digest)
	assert.Len(t, imgs[0].Layers, 1)

	require.NoError(t, r.Delete(ctx, imgs[0]))
	gone, err := name.NewDigest(host+"/team/ns-fn@"+fnDigest, name.Insecure)
	require.NoError(t, err)
	_, err = remote.Head(gone)
	assert.Error(t, err, "deleted under the address's path")
	for _, kept := range []string{host + "/ns-fn:t1", host + "/team/app:1", host + "/team/ns-fn/cache:k"} {
		_, err = remote.Head(mustTag(t, kept))
		assert.NoError(t, err, "%s stays", kept)
	}

	all, _, err := r.Images(ctx, nil)
	require.NoError(t, err)
	repos = nil
	for _, img := range all {
		repos = append(repos, img.Repository)
	}
	// (This in-memory registry keeps a tag whose manifest went.)
	assert.ElementsMatch(t, []string{"app", "ns-fn", "ns-fn/cache"}, repos, "the catalog under the address only")
}

func mustTag(t *testing.T, ref string) name.Tag {
	t.Helper()
	tag, err := name.NewTag(ref, name.Insecure)
	require.NoError(t, err)
	return tag
}

// A hosted registry may refuse to list a repository the module never
// pushed to (as it hides which exist): a named repository it refuses is
// left out and named, not a failed round.
func TestRemoteRegistryRefusedRepository(t *testing.T) {
	inner := registry.New()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/v2/team/ns-hidden/") {
			http.Error(w, `{"errors":[{"code":"DENIED"}]}`, http.StatusForbidden)
			return
		}
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	img, err := random.Image(64, 1)
	require.NoError(t, err)
	require.NoError(t, remote.Write(mustTag(t, host+"/team/ns-fn:t1"), img))

	r, err := NewRemoteRegistry(host+"/team", authn.Anonymous, true, nil)
	require.NoError(t, err)
	imgs, unreadable, err := r.Images(context.Background(), []string{"ns-hidden", "ns-fn"})
	require.NoError(t, err)
	assert.Equal(t, []string{"ns-hidden"}, unreadable)
	require.Len(t, imgs, 1)
	assert.Equal(t, "ns-fn", imgs[0].Repository)
}
