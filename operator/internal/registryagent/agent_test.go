package registryagent

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/serverless-manager/operator/pkg/ociimage"
	api "github.com/kyma-project/serverless-manager/operator/pkg/registryagent"
	"github.com/kyma-project/serverless-manager/tests/support/repo"
)

// registryConfig is the chart's registry configuration (charts/serverless/
// templates/registry.yaml) with local storage and address; cache adds the
// blob descriptor cache the chart had before.
const registryConfig = `version: 0.1
log:
  level: warn
  formatter: text
storage:
  delete:
    enabled: true
  filesystem:
    rootdirectory: %s
%shttp:
  addr: %s
`

const blobDescriptorCache = "  cache:\n    blobdescriptor: inmemory\n"

// startRegistry runs the chart's registry software (bin/assets/registry,
// hack/tools.sh) on a loopback port with storage in root.
func startRegistry(t *testing.T, root string, cache bool) string {
	t.Helper()
	bin := filepath.Join(repo.MustRoot(), "bin", "assets", "registry")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("no registry in bin/assets: run `hack/tools.sh registry` first (%v)", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	extra := ""
	if cache {
		extra = blobDescriptorCache
	}
	config := filepath.Join(t.TempDir(), "config.yml")
	require.NoError(t, os.WriteFile(config, fmt.Appendf(nil, registryConfig, root, extra, addr), 0o644))
	cmd := exec.Command(bin, "serve", config)
	logs := &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("registry log:\n%s", logs)
		}
	})
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + addr + "/v2/") //nolint:gosec // test URL
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 30*time.Second, 50*time.Millisecond, "the registry did not answer")
	return addr
}

// startAgent serves the agent for root with the credentials alice/s3cret.
func startAgent(t *testing.T, root string) (*Server, *api.Client) {
	t.Helper()
	creds := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(creds, api.UsernameFile), []byte("alice"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(creds, api.PasswordFile), []byte("s3cret"), 0o600))
	s := &Server{Root: root, CredentialsDir: creds, Log: logr.Discard()}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	return s, &api.Client{URL: srv.URL, Username: "alice", Password: "s3cret"}
}

func layer(t *testing.T) v1.Layer {
	t.Helper()
	l, err := random.Layer(256<<10, types.DockerLayer)
	require.NoError(t, err)
	return l
}

func image(t *testing.T, layers ...v1.Layer) v1.Image {
	t.Helper()
	img, err := mutate.AppendLayers(empty.Image, layers...)
	require.NoError(t, err)
	return img
}

// blobFile is where distribution's filesystem storage keeps a blob.
func blobFile(root string, h v1.Hash) string {
	return filepath.Join(root, blobsDir, h.Algorithm, h.Hex[:2], h.Hex, "data")
}

func digest(t *testing.T, d interface{ Digest() (v1.Hash, error) }) v1.Hash {
	t.Helper()
	h, err := d.Digest()
	require.NoError(t, err)
	return h
}

// pullAll reads the image's manifest and every blob from the registry.
func pullAll(ref name.Reference) error {
	img, err := remote.Image(ref)
	if err != nil {
		return err
	}
	return ociimage.ReadAll(img)
}

// Two images share a layer; one is deleted through the registry API, one
// tag is pushed over. The GC removes exactly the blobs nothing tagged uses,
// the kept image still pulls, and the deleted one can be pushed again —
// which the blob descriptor cache would have broken.
func TestGCReclaimsWhatNoTagUses(t *testing.T) {
	root := t.TempDir()
	addr := startRegistry(t, root, false)
	_, agent := startAgent(t, root)
	ctx := context.Background()
	ref := func(s string) name.Reference {
		r, err := name.ParseReference(addr+"/"+s, name.Insecure)
		require.NoError(t, err)
		return r
	}

	shared, onlyA, onlyB, onlyOld, onlyNew := layer(t), layer(t), layer(t), layer(t), layer(t)
	a, b := image(t, shared, onlyA), image(t, shared, onlyB)
	old, replacement := image(t, shared, onlyOld), image(t, shared, onlyNew)
	require.NoError(t, remote.Write(ref("ns-a:1"), a))
	require.NoError(t, remote.Write(ref("ns-b:1"), b))
	require.NoError(t, remote.Write(ref("ns-c:1"), old))
	require.NoError(t, remote.Write(ref("ns-c:1"), replacement)) // the tag moves on; old is untagged, still stored

	u, err := agent.Usage(ctx)
	require.NoError(t, err)
	assert.Equal(t, 3, u.Repositories)
	assert.Equal(t, 3, u.TaggedImages)
	assert.Equal(t, 4, u.Manifests)
	assert.Equal(t, 1+4+4+4, u.Blobs, "the shared layer, 4 own layers, 4 configs, 4 manifests")
	assert.Positive(t, u.TotalBytes)
	assert.Positive(t, u.AvailableBytes)
	assert.LessOrEqual(t, u.AvailableBytes, u.TotalBytes)

	aDigest := digest(t, a)
	require.NoError(t, remote.Delete(ref("ns-a@"+aDigest.String())))

	res, err := agent.GC(ctx)
	require.NoError(t, err)
	t.Logf("GC: %d blobs and %d manifests deleted, %d → %d bytes, %s",
		res.BlobsDeleted, res.ManifestsDeleted, res.BytesBefore, res.BytesAfter, res.Duration())
	assert.Equal(t, 3, res.BlobsDeleted, "a's own layer, config and manifest")
	assert.Equal(t, 0, res.ManifestsDeleted, "a's revision went with the API delete; untagged old stays")
	assert.Greater(t, res.BytesBefore-res.BytesAfter, int64(256<<10), "a's own layer at least")

	gone := map[string]v1.Hash{"a's own layer": digest(t, onlyA), "a's manifest": aDigest}
	for what, h := range gone {
		assert.NoFileExists(t, blobFile(root, h), what)
	}
	kept := map[string]v1.Hash{"the shared layer": digest(t, shared), "b's own layer": digest(t, onlyB),
		"b's manifest": digest(t, b), "the replacement's own layer": digest(t, onlyNew),
		"old's own layer (untagged, may still run by digest)": digest(t, onlyOld), "old's manifest": digest(t, old)}
	for what, h := range kept {
		assert.FileExists(t, blobFile(root, h), what)
	}
	assert.NoError(t, pullAll(ref("ns-b:1")), "the kept image pulls")
	assert.NoError(t, pullAll(ref("ns-c:1")), "the replacement pulls")
	assert.Error(t, pullAll(ref("ns-a:1")), "the deleted image is gone")

	u, err = agent.Usage(ctx)
	require.NoError(t, err)
	assert.Equal(t, 2, u.Repositories, "ns-a holds no manifest any more")
	assert.Equal(t, 2, u.TaggedImages)
	assert.Equal(t, res.BytesAfter, u.UsedBytes)

	// Builds are deterministic: the same image is pushed again after its
	// blobs were swept, and must be complete.
	require.NoError(t, remote.Write(ref("ns-a:1"), a))
	assert.NoError(t, pullAll(ref("ns-a:1")), "pushed again after the GC")
	assert.FileExists(t, blobFile(root, digest(t, onlyA)))
}

// Why the chart dropped the blob descriptor cache: the running registry
// still believes a swept blob exists, skips its upload on the next push
// and accepts a manifest whose layer is missing.
func TestBlobDescriptorCacheBreaksPushAfterGC(t *testing.T) {
	root := t.TempDir()
	addr := startRegistry(t, root, true)
	r, err := name.ParseReference(addr+"/ns-a:1", name.Insecure)
	require.NoError(t, err)
	own := layer(t)
	img := image(t, own)
	require.NoError(t, remote.Write(r, img))
	require.NoError(t, remote.Delete(r.Context().Digest(digest(t, img).String())))

	_, err = GC(context.Background(), root)
	require.NoError(t, err)
	require.NoFileExists(t, blobFile(root, digest(t, own)))

	require.NoError(t, remote.Write(r, img), "the push succeeds")
	assert.NoFileExists(t, blobFile(root, digest(t, own)), "but the layer was never uploaded again")
	assert.Error(t, pullAll(r), "and the image does not pull")
}

func TestAuthentication(t *testing.T) {
	_, agent := startAgent(t, t.TempDir())
	noCreds := &Server{Root: t.TempDir(), CredentialsDir: filepath.Join(t.TempDir(), "missing"), Log: logr.Discard()}
	broken := httptest.NewServer(noCreds.Handler())
	t.Cleanup(broken.Close)

	tests := []struct {
		name       string
		url        string
		method     string
		user, pass string
		want       int
	}{
		{"usage without credentials", agent.URL + api.PathUsage, http.MethodGet, "", "", http.StatusUnauthorized},
		{"gc without credentials", agent.URL + api.PathGC, http.MethodPost, "", "", http.StatusUnauthorized},
		{"wrong password", agent.URL + api.PathUsage, http.MethodGet, "alice", "wrong", http.StatusUnauthorized},
		{"wrong user", agent.URL + api.PathUsage, http.MethodGet, "bob", "s3cret", http.StatusUnauthorized},
		{"password as a prefix", agent.URL + api.PathUsage, http.MethodGet, "alice", "s3cre", http.StatusUnauthorized},
		{"the registry's credentials", agent.URL + api.PathUsage, http.MethodGet, "alice", "s3cret", http.StatusOK},
		{"wrong method", agent.URL + api.PathGC, http.MethodGet, "alice", "s3cret", http.StatusMethodNotAllowed},
		{"healthz needs none", agent.URL + api.PathHealthz, http.MethodGet, "", "", http.StatusOK},
		{"unreadable credentials refuse everyone", broken.URL + api.PathUsage, http.MethodGet, "alice", "s3cret", http.StatusInternalServerError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(tt.method, tt.url, nil)
			require.NoError(t, err)
			if tt.user != "" {
				req.SetBasicAuth(tt.user, tt.pass)
			}
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			assert.Equal(t, tt.want, resp.StatusCode, string(body))
			assert.NotContains(t, string(body), "s3cret")
		})
	}

	bad := *agent
	bad.Password = "wrong"
	_, err := bad.Usage(context.Background())
	assert.ErrorContains(t, err, "401")
}

func TestSecondGCIsRefused(t *testing.T) {
	s, agent := startAgent(t, t.TempDir())
	s.gc.Lock() // a GC in progress
	_, err := agent.GC(context.Background())
	assert.ErrorIs(t, err, api.ErrBusy)
	assert.ErrorContains(t, err, "409")
	s.gc.Unlock()

	res, err := agent.GC(context.Background())
	require.NoError(t, err, "an empty storage collects nothing")
	assert.Zero(t, res.BlobsDeleted)
}
