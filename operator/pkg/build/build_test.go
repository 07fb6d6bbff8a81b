package build_test

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/serverless-manager/operator/pkg/build"
	"github.com/kyma-project/serverless-manager/operator/pkg/ociimage"
)

const (
	user     = "builder"
	password = "pushes-only-S3CRET"
)

// testRegistry is an in-process registry that asks for basic auth, counts
// the bytes of blob uploads and, as distribution does, knows a blob only in
// the repositories it was uploaded or mounted into (go-containerregistry's
// in-process registry knows every blob everywhere, which would hide an
// upload that a mount should have saved).
type testRegistry struct {
	host     string
	uploaded atomic.Int64
	mu       sync.Mutex
	blobs    map[string]bool // repository + "@" + digest
}

func (r *testRegistry) has(repo, digest string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.blobs[repo+"@"+digest]
}

func (r *testRegistry) add(repo, digest string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.blobs[repo+"@"+digest] = true
}

// statusRecorder keeps the status an inner handler wrote.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) { s.status = code; s.ResponseWriter.WriteHeader(code) }

// perRepository answers blob reads of repositories that never received
// the blob with 404, serves mounts only from a repository holding the blob,
// and records completed uploads.
func (r *testRegistry) perRepository(inner http.Handler, w http.ResponseWriter, req *http.Request) {
	path := strings.TrimPrefix(req.URL.Path, "/v2/")
	if repo, rest, ok := strings.Cut(path, "/blobs/"); ok {
		switch {
		case strings.HasPrefix(rest, "uploads"):
			q := req.URL.Query()
			if d, from := q.Get("mount"), q.Get("from"); d != "" {
				if r.has(from, d) {
					r.add(repo, d)
					w.Header().Set("Location", "/v2/"+repo+"/blobs/"+d)
					w.WriteHeader(http.StatusCreated)
					return
				}
				q.Del("mount")
				q.Del("from")
				req.URL.RawQuery = q.Encode()
			}
			rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
			inner.ServeHTTP(rec, req)
			if d := q.Get("digest"); d != "" && rec.status == http.StatusCreated {
				r.add(repo, d)
			}
			return
		case req.Method == http.MethodGet || req.Method == http.MethodHead:
			if !r.has(repo, rest) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusNotFound)
				_, _ = io.WriteString(w, `{"errors":[{"code":"BLOB_UNKNOWN","message":"blob unknown to registry"}]}`)
				return
			}
		}
	}
	inner.ServeHTTP(w, req)
}

type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (c countingBody) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	c.n.Add(int64(n))
	return n, err
}

func newRegistry(t *testing.T) *testRegistry {
	r := &testRegistry{blobs: map[string]bool{}}
	inner := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if u, p, ok := req.BasicAuth(); !ok || u != user || p != password {
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`)
			return
		}
		if strings.Contains(req.URL.Path, "/blobs/uploads/") {
			req.Body = countingBody{req.Body, &r.uploaded}
		}
		r.perRepository(inner, w, req)
	}))
	t.Cleanup(srv.Close)
	r.host = strings.TrimPrefix(srv.URL, "http://")
	return r
}

// keychain answers every registry with one login.
type keychain struct{ user, password string }

func (k keychain) Resolve(authn.Resource) (authn.Authenticator, error) {
	return &authn.Basic{Username: k.user, Password: k.password}, nil
}

func writeFiles(t *testing.T, dir string, files map[string]string) string {
	t.Helper()
	for p, data := range files {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, p), []byte(data), 0o644))
	}
	return dir
}

// pushBase pushes a stand-in of a runtime image: its server and config.
func (r *testRegistry) pushBase(t *testing.T, repo string, cfg v1.Config) string {
	t.Helper()
	layer, err := ociimage.DirLayer(writeFiles(t, t.TempDir(), map[string]string{"server.js": "// runtime server\n"}), "/usr/src/app", time.Time{})
	require.NoError(t, err)
	img, err := mutate.Append(empty.Image, mutate.Addendum{Layer: layer})
	require.NoError(t, err)
	cf, err := img.ConfigFile()
	require.NoError(t, err)
	cf = cf.DeepCopy()
	cf.Config = cfg
	img, err = mutate.ConfigFile(img, cf)
	require.NoError(t, err)
	ref := r.host + "/" + repo
	parsed, err := name.ParseReference(ref, name.Insecure)
	require.NoError(t, err)
	require.NoError(t, remote.Write(parsed, img, remote.WithAuth(&authn.Basic{Username: user, Password: password})))
	return ref
}

// fn is one Function's build directories.
type fn struct {
	src, deps, state string
}

func newFunction(t *testing.T, sources map[string]string) fn {
	return fn{src: writeFiles(t, t.TempDir(), sources), deps: t.TempDir(), state: t.TempDir()}
}

func (r *testRegistry) options(f fn, runtime, base, dest string) build.Options {
	return build.Options{
		Runtime: runtime, BaseImage: base, Destination: r.host + "/" + dest, CacheRepository: r.host + "/dependencies",
		SourceDir: f.src, DependenciesDir: f.deps, StateDir: f.state, PackageConfigDigest: "sha256:config-1",
		Insecure: true, Cache: true, Keychain: keychain{user, password},
	}
}

// files reads every file of the image's layers (later layers win).
func files(t *testing.T, img v1.Image) map[string]*tar.Header {
	t.Helper()
	out := map[string]*tar.Header{}
	layers, err := img.Layers()
	require.NoError(t, err)
	for _, l := range layers {
		rc, err := l.Uncompressed()
		require.NoError(t, err)
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			require.NoError(t, err)
			out[strings.TrimSuffix(h.Name, "/")] = h
		}
		require.NoError(t, rc.Close())
	}
	return out
}

func pull(t *testing.T, ref string) v1.Image {
	t.Helper()
	parsed, err := name.ParseReference(ref, name.Insecure)
	require.NoError(t, err)
	img, err := remote.Image(parsed, remote.WithAuth(&authn.Basic{Username: user, Password: password}))
	require.NoError(t, err)
	return img
}

func incompressible(t *testing.T, n int) string {
	b := make([]byte, n)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return string(b)
}

// buildBoth runs both of our steps, as the build Job does.
func buildBoth(t *testing.T, o build.Options) {
	t.Helper()
	_, _, err := build.Prepare(context.Background(), o)
	require.NoError(t, err)
	_, err = build.Image(context.Background(), o)
	require.NoError(t, err)
}

func TestNodeFunctionImage(t *testing.T) {
	ctx := context.Background()
	r := newRegistry(t)
	base := r.pushBase(t, "runtime/nodejs22:1", v1.Config{User: "node", WorkingDir: "/usr/src/app", Entrypoint: []string{"node", "server.js"}, Env: []string{"NODE_ENV=production"}})
	pkg := `{"name":"hello","dependencies":{"left-pad":"1.3.0"}}`
	first := newFunction(t, map[string]string{"handler.js": "module.exports = { main: () => 'v1' }\n", "package.json": pkg})
	// What the dependency step would have installed: a package with
	// 1 MiB of incompressible data and npm's .bin symlink.
	writeFiles(t, first.deps, map[string]string{"node_modules/left-pad/index.js": "module.exports = 1\n", "node_modules/left-pad/blob": incompressible(t, 1<<20)})
	require.NoError(t, os.MkdirAll(filepath.Join(first.deps, "node_modules/.bin"), 0o755))
	require.NoError(t, os.Symlink("../left-pad/index.js", filepath.Join(first.deps, "node_modules/.bin/left-pad")))

	o := r.options(first, "nodejs22", base, "fn/hello:1")
	key, cached, err := build.Prepare(ctx, o)
	require.NoError(t, err)
	assert.False(t, cached, "nothing kept yet")
	stored, err := os.ReadFile(filepath.Join(first.state, build.StateKey))
	require.NoError(t, err)
	assert.Equal(t, key, string(stored))
	assert.NoFileExists(t, filepath.Join(first.state, build.StateCached))

	digest, err := build.Image(ctx, o)
	require.NoError(t, err)
	assert.Greater(t, r.uploaded.Load(), int64(1<<20), "the first build uploads its dependency layer")
	img := pull(t, o.Destination)
	got, err := img.Digest()
	require.NoError(t, err)
	assert.Equal(t, digest, got, "the reported digest is the pushed image")

	cf, err := img.ConfigFile()
	require.NoError(t, err)
	assert.Equal(t, "1000", cf.Config.User)
	assert.Equal(t, "/usr/src/app", cf.Config.WorkingDir, "npm start runs the runtime server's package.json")
	assert.Equal(t, []string{"node", "server.js"}, cf.Config.Entrypoint, "the runtime server starts as in the base image")
	assert.Equal(t, []string{"NODE_ENV=production", "HANDLER_PATH=./function/handler.js"}, cf.Config.Env, "release 1.13's servers find the handler")
	fs := files(t, img)
	for _, p := range []string{"usr/src/app/server.js", "usr/src/app/function/handler.js", "usr/src/app/function/package.json", "usr/src/app/function/node_modules/left-pad/index.js"} {
		assert.Contains(t, fs, p)
	}
	if assert.Contains(t, fs, "usr/src/app/function/node_modules/.bin/left-pad") {
		assert.Equal(t, byte(tar.TypeSymlink), fs["usr/src/app/function/node_modules/.bin/left-pad"].Typeflag)
	}
	layers, err := img.Layers()
	require.NoError(t, err)
	require.Len(t, layers, 3, "base, dependencies, sources")
	depsLayer, err := layers[1].Digest()
	require.NoError(t, err)

	// A second Function with the same dependencies: prepare finds the
	// kept layer, nothing is installed, its bytes are not uploaded again.
	second := newFunction(t, map[string]string{"handler.js": "module.exports = { main: () => 'other' }\n", "package.json": pkg})
	o2 := r.options(second, "nodejs22", base, "fn/other:1")
	key2, cached, err := build.Prepare(ctx, o2)
	require.NoError(t, err)
	assert.Equal(t, key, key2, "same base, dependencies and package config")
	assert.True(t, cached)
	assert.FileExists(t, filepath.Join(second.state, build.StateCached))
	before := r.uploaded.Load()
	_, err = build.Image(ctx, o2)
	require.NoError(t, err)
	assert.Less(t, r.uploaded.Load()-before, int64(64<<10), "only the source layer and config are uploaded, not the 1 MiB dependency layer")
	layers2, err := pull(t, o2.Destination).Layers()
	require.NoError(t, err)
	d2, err := layers2[1].Digest()
	require.NoError(t, err)
	assert.Equal(t, depsLayer, d2, "one stored dependency layer for both")

	// A source-only change of the first Function keeps its dependency key.
	writeFiles(t, first.src, map[string]string{"handler.js": "module.exports = { main: () => 'v2' }\n"})
	key3, cached, err := build.Prepare(ctx, o)
	require.NoError(t, err)
	assert.Equal(t, key, key3)
	assert.True(t, cached, "a source change installs nothing")

	// Another package config or dependency list is another key.
	o.PackageConfigDigest = "sha256:config-2"
	key4, cached, err := build.Prepare(ctx, o)
	require.NoError(t, err)
	assert.NotEqual(t, key, key4)
	assert.False(t, cached)
}

// A Function without dependencies: npm wrote no node_modules (the build
// step, whose dependencies volume is read-only, adds an empty layer).
func TestNoDependencies(t *testing.T) {
	r := newRegistry(t)
	base := r.pushBase(t, "runtime/nodejs22:1", v1.Config{})
	f := newFunction(t, map[string]string{"handler.js": "module.exports = { main: () => 1 }\n", "package.json": `{"name":"x"}`})
	o := r.options(f, "nodejs22", base, "fn/nodeps:1")
	buildBoth(t, o)
	fs := files(t, pull(t, o.Destination))
	assert.Contains(t, fs, "usr/src/app/function/handler.js")
	assert.NotContains(t, fs, "usr/src/app/function/node_modules")
	entries, err := os.ReadDir(f.deps)
	require.NoError(t, err)
	assert.Empty(t, entries, "nothing written into the dependencies volume")
}

func TestPythonFunctionImage(t *testing.T) {
	r := newRegistry(t)
	base := r.pushBase(t, "runtime/python312:1", v1.Config{User: "1000", WorkingDir: "/kubeless", Entrypoint: []string{"python", "kubeless.py"}})
	f := newFunction(t, map[string]string{"handler.py": "def main(event, context):\n    return 1\n", "requirements.txt": "tiny==1.0\n"})
	writeFiles(t, f.deps, map[string]string{"tiny/__init__.py": "X = 1\n"})
	o := r.options(f, "python312", base, "fn/py:1")
	buildBoth(t, o)
	img := pull(t, o.Destination)
	cf, err := img.ConfigFile()
	require.NoError(t, err)
	assert.Equal(t, "/kubeless", cf.Config.WorkingDir, "the base image's")
	assert.Contains(t, cf.Config.Env, "KUBELESS_INSTALL_VOLUME=/kubeless")
	assert.Contains(t, cf.Config.Env, "FUNCTION_PATH=/kubeless", "release 1.13's server.py finds the handler")
	fs := files(t, img)
	assert.Contains(t, fs, "kubeless/handler.py")
	assert.Contains(t, fs, "kubeless/requirements.txt")
	assert.Contains(t, fs, "usr/local/lib/python3.12/site-packages/tiny/__init__.py")
}

// The package registry configuration and the registry credentials reach
// no byte of the image: every layer (compressed and not), the config with
// its history and the manifest are searched. The dependency step runs as
// in its container (this machine's npm, the runtime's install command,
// the config mounted beside, not in, its working directory).
func TestNoSecretInTheImage(t *testing.T) {
	npmToken := "npm_T0KEN_that_must_not_leak"
	ctx := context.Background()
	r := newRegistry(t)
	base := r.pushBase(t, "runtime/nodejs22:1", v1.Config{User: "node", Entrypoint: []string{"node", "server.js"}})
	f := newFunction(t, map[string]string{"handler.js": "module.exports = { main: () => 1 }\n", "package.json": `{"name":"s","dependencies":{}}`})
	configDir := writeFiles(t, t.TempDir(), map[string]string{".npmrc": "//npm.example.invalid/:_authToken=" + npmToken + "\n"})
	if npm, err := exec.LookPath("npm"); err == nil {
		rt, err := build.RuntimeOf("nodejs22")
		require.NoError(t, err)
		cmd := exec.CommandContext(ctx, "/bin/sh", "-c", rt.Install)
		cmd.Dir = f.deps
		cmd.Env = append(os.Environ(), "SOURCES="+f.src, "HOME="+t.TempDir(), "NPM_CONFIG_USERCONFIG="+filepath.Join(configDir, ".npmrc"), "npm_config_cache="+t.TempDir())
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s: %s", npm, out)
	} else {
		t.Log("npm is not installed: the dependency step's output is an empty directory")
	}
	o := r.options(f, "nodejs22", base, "fn/secret:1")
	buildBoth(t, o)

	img := pull(t, o.Destination)
	var blobs [][]byte
	raw, err := img.RawManifest()
	require.NoError(t, err)
	cfg, err := img.RawConfigFile()
	require.NoError(t, err)
	blobs = append(blobs, raw, cfg)
	layers, err := img.Layers()
	require.NoError(t, err)
	for _, l := range layers {
		for _, open := range []func() (io.ReadCloser, error){l.Compressed, l.Uncompressed} {
			rc, err := open()
			require.NoError(t, err)
			data, err := io.ReadAll(rc)
			require.NoError(t, err)
			blobs = append(blobs, data)
		}
	}
	for i, b := range blobs {
		for _, secret := range []string{npmToken, password} {
			assert.False(t, bytes.Contains(b, []byte(secret)), "blob %d holds a secret", i)
		}
	}
}

func TestFailuresSayWhich(t *testing.T) {
	ctx := context.Background()
	r := newRegistry(t)
	base := r.pushBase(t, "runtime/nodejs22:1", v1.Config{})
	f := newFunction(t, map[string]string{"handler.js": "x", "package.json": "{}"})

	o := r.options(f, "nodejs22", base, "fn/a:1")
	o.Keychain = keychain{user, "wrong"}
	_, _, err := build.Prepare(ctx, o)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "registry "+r.host+" refused the credentials (HTTP 401)")
	assert.NotContains(t, err.Error(), "wrong", "no credential in the message")

	o = r.options(f, "nodejs22", r.host+"/runtime/missing:1", "fn/a:1")
	_, _, err = build.Prepare(ctx, o)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "base image "+r.host+"/runtime/missing:1: not found in registry "+r.host)

	closed := httptest.NewServer(http.NotFoundHandler())
	host := strings.TrimPrefix(closed.URL, "http://")
	closed.Close()
	o = r.options(f, "nodejs22", host+"/runtime/nodejs22:1", "fn/a:1")
	_, _, err = build.Prepare(ctx, o)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "registry "+host+" is unreachable")

	o = r.options(f, "nodejs22", base, "fn/a:1")
	o.Runtime = "ruby"
	_, _, err = build.Prepare(ctx, o)
	assert.ErrorContains(t, err, `unknown runtime "ruby"`)
}

// A base image in another registry (the published runtime images are not
// in the module's registry) crosses into the destination registry once:
// the first build keeps a copy next to the dependency layers, and the next
// Function's repository mounts the base's layers from there.
func TestBaseImageCrossesOnce(t *testing.T) {
	ctx := context.Background()
	published, r := newRegistry(t), newRegistry(t)
	base := published.pushBase(t, "runtime/nodejs22:1", v1.Config{Entrypoint: []string{"node", "server.js"}})
	// a base of 1 MiB more, incompressible, as a runtime's layers are large
	baseImg := pull(t, base)
	big, err := ociimage.DirLayer(writeFiles(t, t.TempDir(), map[string]string{"node": incompressible(t, 1<<20)}), "/usr/local/bin", time.Time{})
	require.NoError(t, err)
	baseImg, err = mutate.Append(baseImg, mutate.Addendum{Layer: big})
	require.NoError(t, err)
	ref, err := name.ParseReference(base, name.Insecure)
	require.NoError(t, err)
	require.NoError(t, remote.Write(ref, baseImg, remote.WithAuth(&authn.Basic{Username: user, Password: password})))

	var digests []v1.Hash
	for i, dest := range []string{"fn/one:1", "fn/two:1"} {
		f := newFunction(t, map[string]string{"handler.js": "module.exports = { main: () => 'hi' }\n", "package.json": `{"name":"hi"}`})
		o := r.options(f, "nodejs22", base, dest)
		_, _, err := build.Prepare(ctx, o)
		require.NoError(t, err)
		before := r.uploaded.Load()
		_, err = build.Image(ctx, o)
		require.NoError(t, err)
		if i == 0 {
			assert.Greater(t, r.uploaded.Load()-before, int64(1<<20), "the first build brings the base over")
		} else {
			assert.Less(t, r.uploaded.Load()-before, int64(64<<10), "the second mounts the base's layers: only sources and config are uploaded")
		}
		layers, err := pull(t, o.Destination).Layers()
		require.NoError(t, err)
		d, err := layers[1].Digest()
		require.NoError(t, err)
		digests = append(digests, d)
	}
	assert.Equal(t, digests[0], digests[1], "the same base layer in both images")
	wantBase, err := baseImg.Digest()
	require.NoError(t, err)
	kept := pull(t, r.host+"/dependencies:"+build.BaseTagPrefix+wantBase.Hex)
	got, err := kept.Digest()
	require.NoError(t, err)
	assert.Equal(t, wantBase, got, "the kept copy is the base, byte for byte")
}
