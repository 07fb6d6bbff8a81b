package ociimage_test

import (
	"archive/tar"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"debug/buildinfo"
	"encoding/pem"
	"io/fs"
	"math/big"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/serverless-manager/operator/pkg/fips"
	"github.com/kyma-project/serverless-manager/operator/pkg/ociimage"
	"github.com/kyma-project/serverless-manager/tests/support/repo"
)

// testCA is a PEM bundle with one fresh self-signed certificate.
func testCA(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ociimage test CA"},
		NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// hello builds testdata/hello as the images' binaries are built.
func hello(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "hello")
	require.NoError(t, ociimage.GoBuild(t.Context(), repo.MustRoot(), "./operator/pkg/ociimage/testdata/hello", "linux", runtime.GOARCH, out))
	return out
}

func spec(t *testing.T, binaryPath string) ociimage.Spec {
	return ociimage.Spec{
		Title: "hello-world", Binary: "hello", BinaryPath: binaryPath, CACerts: testCA(t),
		Version: "1.2.3", Revision: "0123abcd", Created: time.Unix(1700000000, 0),
		OS: "linux", Arch: runtime.GOARCH,
	}
}

func TestBuildConfig(t *testing.T) {
	s := spec(t, hello(t))
	img, err := ociimage.Build(s)
	require.NoError(t, err)

	mt, err := img.MediaType()
	require.NoError(t, err)
	assert.Equal(t, types.OCIManifestSchema1, mt)
	m, err := img.Manifest()
	require.NoError(t, err)
	assert.Equal(t, types.OCIConfigJSON, m.Config.MediaType)
	require.Len(t, m.Layers, 2, "base layer and binary layer")
	for _, l := range m.Layers {
		assert.Equal(t, types.OCILayer, l.MediaType)
	}

	cf, err := img.ConfigFile()
	require.NoError(t, err)
	assert.Equal(t, "linux", cf.OS)
	assert.Equal(t, runtime.GOARCH, cf.Architecture)
	assert.True(t, cf.Created.Equal(s.Created), "created %v", cf.Created)
	assert.Equal(t, []string{"/hello"}, cf.Config.Entrypoint)
	assert.Empty(t, cf.Config.Cmd)
	assert.Equal(t, "65532:65532", cf.Config.User)
	assert.Equal(t, "/", cf.Config.WorkingDir)
	assert.Equal(t, map[string]string{
		"org.opencontainers.image.title":    "hello-world",
		"org.opencontainers.image.version":  "1.2.3",
		"org.opencontainers.image.source":   "https://github.com/kyma-project/serverless-manager",
		"org.opencontainers.image.revision": "0123abcd",
	}, cf.Config.Labels)

	s.Revision = ""
	img, err = ociimage.Build(s)
	require.NoError(t, err)
	cf, err = img.ConfigFile()
	require.NoError(t, err)
	assert.NotContains(t, cf.Config.Labels, ociimage.LabelRevision, "no revision label without a revision")
}

func TestBuildFiles(t *testing.T) {
	s := spec(t, hello(t))
	binary, err := os.ReadFile(s.BinaryPath)
	require.NoError(t, err)
	img, err := ociimage.Build(s)
	require.NoError(t, err)
	files, err := ociimage.Files(img)
	require.NoError(t, err)

	type want struct {
		typ  byte
		mode int64
		data string
	}
	wants := map[string]want{
		"etc":                               {tar.TypeDir, 0o755, ""},
		"etc/passwd":                        {tar.TypeReg, 0o644, "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/tmp:/sbin/nologin\n"},
		"etc/group":                         {tar.TypeReg, 0o644, "root:x:0:\nnonroot:x:65532:\n"},
		"etc/ssl":                           {tar.TypeDir, 0o755, ""},
		"etc/ssl/certs":                     {tar.TypeDir, 0o755, ""},
		"etc/ssl/certs/ca-certificates.crt": {tar.TypeReg, 0o644, string(s.CACerts)},
		"tmp":                               {tar.TypeDir, 0o1777, ""},
		"hello":                             {tar.TypeReg, 0o755, string(binary)},
	}
	var paths []string
	for p := range files {
		paths = append(paths, p)
	}
	assert.ElementsMatch(t, keys(wants), paths, "nothing else in the image")
	for p, w := range wants {
		t.Run(p, func(t *testing.T) {
			e, ok := files[p]
			require.True(t, ok)
			assert.Equal(t, w.typ, e.Header.Typeflag)
			assert.Equalf(t, w.mode, e.Header.Mode, "mode %o", e.Header.Mode)
			assert.Zero(t, e.Header.Uid, "owned by root: the image's user cannot change it")
			assert.Zero(t, e.Header.Gid)
			assert.True(t, e.Header.ModTime.Equal(s.Created), "mtime %v", e.Header.ModTime)
			assert.Equal(t, w.data, string(e.Data))
		})
	}
}

// The root filesystem may be read-only: the binary is the only executable
// file and /tmp the only place the image's user can write to.
func TestBuildNeedsNoWritableRoot(t *testing.T) {
	img, err := ociimage.Build(spec(t, hello(t)))
	require.NoError(t, err)
	files, err := ociimage.Files(img)
	require.NoError(t, err)
	var executables, writable []string
	for p, e := range files {
		h := e.Header
		if h.Typeflag == tar.TypeReg && h.Mode&0o111 != 0 {
			executables = append(executables, p)
		}
		if writableBy(h, ociimage.NonrootID) {
			writable = append(writable, p)
		}
	}
	assert.Equal(t, []string{"hello"}, executables)
	assert.Equal(t, []string{"tmp"}, writable)
}

func writableBy(h *tar.Header, id int) bool {
	switch {
	case h.Uid == id:
		return h.Mode&0o200 != 0
	case h.Gid == id:
		return h.Mode&0o020 != 0
	default:
		return h.Mode&0o002 != 0
	}
}

// The image's binary runs on this machine from the unpacked image: as root
// the test confines it to the image (chroot) as user 65532, where only /tmp
// is writable and the passwd entry resolves.
func TestUnpackedImageRuns(t *testing.T) {
	s := spec(t, hello(t))
	img, err := ociimage.Build(s)
	require.NoError(t, err)
	root := t.TempDir()
	require.NoError(t, ociimage.Unpack(img, root))
	st, err := os.Stat(filepath.Join(root, "tmp"))
	require.NoError(t, err)
	assert.Equal(t, fs.ModeDir|fs.ModeSticky|0o777, st.Mode())

	out, err := ociimage.Command(root, "hello").CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Equal(t, "hello\n", string(out))

	out, err = ociimage.Command(root, "hello", "--help").CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "Usage of /hello")

	if os.Geteuid() != 0 {
		t.Log("not root: the binary ran outside the image's root, as the current user")
		return
	}
	out, err = ociimage.Command(root, "hello", "-check").CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Equal(t, strings.Join([]string{
		"user: nonroot 65532:65532 home=/tmp",
		"root writable: false",
		"tmp writable: true",
		"ca bytes: " + strconv.Itoa(len(s.CACerts)),
	}, "\n")+"\n", string(out))
}

func TestBuildIsReproducible(t *testing.T) {
	s := spec(t, hello(t))
	a, err := ociimage.Build(s)
	require.NoError(t, err)
	b, err := ociimage.Build(s)
	require.NoError(t, err)
	da, err := a.Digest()
	require.NoError(t, err)
	db, err := b.Digest()
	require.NoError(t, err)
	assert.Equal(t, da, db, "same inputs, same image")

	s.Created = s.Created.Add(time.Second)
	c, err := ociimage.Build(s)
	require.NoError(t, err)
	dc, err := c.Digest()
	require.NoError(t, err)
	assert.NotEqual(t, da, dc, "the timestamp is part of the image")
}

func TestBuildRejects(t *testing.T) {
	binary := filepath.Join(t.TempDir(), "bin")
	require.NoError(t, os.WriteFile(binary, []byte("#!/bin/false\n"), 0o755))
	for _, tc := range []struct {
		name   string
		change func(*ociimage.Spec)
		err    string
	}{
		{"no CA certificates", func(s *ociimage.Spec) { s.CACerts = nil }, "CA bundle holds no PEM certificate"},
		{"CA bundle without certificates", func(s *ociimage.Spec) { s.CACerts = []byte("-----BEGIN NOTHING-----\n") }, "CA bundle holds no PEM certificate"},
		{"binary name with a path", func(s *ociimage.Spec) { s.Binary = "usr/bin/hello" }, `binary name "usr/bin/hello" is not a plain file name`},
		{"no binary name", func(s *ociimage.Spec) { s.Binary = "" }, `binary name "" is not a plain file name`},
		{"no version", func(s *ociimage.Spec) { s.Version = "" }, "version is empty"},
		{"no platform", func(s *ociimage.Spec) { s.Arch = "" }, "platform"},
		{"missing binary", func(s *ociimage.Spec) { s.BinaryPath = filepath.Join(t.TempDir(), "gone") }, "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := spec(t, binary)
			tc.change(&s)
			_, err := ociimage.Build(s)
			require.ErrorContains(t, err, tc.err)
		})
	}
}

func TestReadCACerts(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.crt")
	require.NoError(t, os.WriteFile(good, testCA(t), 0o644))
	empty := filepath.Join(dir, "empty.crt")
	require.NoError(t, os.WriteFile(empty, nil, 0o644))
	for _, tc := range []struct {
		path, err string
	}{
		{good, ""},
		{empty, "holds no PEM certificate"},
		{filepath.Join(dir, "absent.crt"), "install the ca-certificates package"},
	} {
		t.Run(filepath.Base(tc.path), func(t *testing.T) {
			data, err := ociimage.ReadCACerts(tc.path)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.NotEmpty(t, data)
		})
	}
}

// The images' binaries link Go's FIPS 140-3 module and, outside FIPS mode,
// run with fips140=off (go.mod) as before; GODEBUG=fips140=only switches.
func TestGoBuildLinksTheFIPSModule(t *testing.T) {
	info, err := buildinfo.ReadFile(hello(t))
	require.NoError(t, err)
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	assert.True(t, strings.HasPrefix(settings["GOFIPS140"], fips.Module+"-"), "GOFIPS140=%q", settings["GOFIPS140"])
	assert.Contains(t, strings.Split(settings["DefaultGODEBUG"], ","), "fips140=off")
	assert.Equal(t, "0", settings["CGO_ENABLED"])
}

func TestGoBuildMissingPackage(t *testing.T) {
	err := ociimage.GoBuild(t.Context(), repo.MustRoot(), "./operator/cmd/no-such-binary", "linux", runtime.GOARCH, filepath.Join(t.TempDir(), "x"))
	require.ErrorContains(t, err, "main package ./operator/cmd/no-such-binary does not exist")
}

func TestLayoutRoundTrip(t *testing.T) {
	img, err := ociimage.Build(spec(t, hello(t)))
	require.NoError(t, err)
	dir := filepath.Join(t.TempDir(), "layout")
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "stale"), 0o755))
	require.NoError(t, ociimage.WriteLayout(dir, img, "example.test/hello:1.2.3"))
	_, err = os.Stat(filepath.Join(dir, "stale"))
	assert.True(t, os.IsNotExist(err), "the layout replaces what was there")

	got, ref, err := ociimage.ReadLayout(dir)
	require.NoError(t, err)
	assert.Equal(t, "example.test/hello:1.2.3", ref)
	want, err := img.Digest()
	require.NoError(t, err)
	gotDigest, err := got.Digest()
	require.NoError(t, err)
	assert.Equal(t, want, gotDigest)
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
