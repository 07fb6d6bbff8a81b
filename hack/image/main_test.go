package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"debug/elf"
	"encoding/pem"
	"maps"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/kyma-project/serverless-manager/operator/pkg/fips"
	"github.com/kyma-project/serverless-manager/operator/pkg/manifest"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
	"github.com/kyma-project/serverless-manager/operator/pkg/ociimage"
	"github.com/kyma-project/serverless-manager/tests/support/repo"
)

// caFile writes a PEM bundle with one self-signed certificate, so the test
// does not depend on the machine's CA bundle.
func caFile(t *testing.T) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "image test CA"},
		NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "ca.crt")
	require.NoError(t, os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644))
	return path
}

// What `make image` builds: one OCI layout per binary of the module, each
// image running its binary as 65532 from a read-only root, labelled with
// the version and the commit, and the binary inside runs here.
func TestImagesOfEveryBinary(t *testing.T) {
	root := repo.MustRoot()
	version, err := os.ReadFile(filepath.Join(root, "VERSION"))
	require.NoError(t, err)
	labels := map[string]string{
		ociimage.LabelVersion: strings.TrimSpace(string(version)),
		ociimage.LabelSource:  "https://github.com/kyma-project/serverless-manager",
	}
	// outside a git checkout the images carry no revision
	if head, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output(); err == nil {
		labels[ociimage.LabelRevision] = strings.TrimSpace(string(head))
	}
	out := t.TempDir()

	results, err := run(t.Context(), options{
		root: root, out: out, repository: "example.test/prod", arch: runtime.GOARCH,
		caCerts: caFile(t), created: time.Unix(0, 0).UTC(), binaries: binaryNames(),
	})
	require.NoError(t, err)
	require.Len(t, results, len(module.Binaries()))

	for _, id := range module.Binaries() {
		t.Run(id.Binary, func(t *testing.T) {
			img, ref, err := ociimage.ReadLayout(filepath.Join(out, id.Binary))
			require.NoError(t, err)
			assert.Equal(t, "example.test/prod/"+imageName(id)+":"+strings.TrimSpace(string(version)), ref)

			cf, err := img.ConfigFile()
			require.NoError(t, err)
			assert.Equal(t, []string{"/" + id.Binary}, cf.Config.Entrypoint)
			assert.Equal(t, "65532:65532", cf.Config.User)
			want := maps.Clone(labels)
			want[ociimage.LabelTitle] = imageName(id)
			assert.Equal(t, want, cf.Config.Labels)
			assert.Equal(t, "linux", cf.OS)

			files, err := ociimage.Files(img)
			require.NoError(t, err)
			require.Contains(t, files, id.Binary)
			assertStatic(t, files[id.Binary].Data)
			require.Contains(t, files, "etc/passwd")
			assert.Contains(t, string(files["etc/passwd"].Data), "\nnonroot:x:65532:65532:")
			require.Contains(t, files, "tmp")
			assert.Equal(t, int64(0o1777), files["tmp"].Header.Mode)

			unpacked := t.TempDir()
			require.NoError(t, ociimage.Unpack(img, unpacked))
			help, err := ociimage.Command(unpacked, id.Binary, "--help").CombinedOutput()
			require.NoError(t, err, "%s --help in the image: %s", id.Binary, help)
			assert.Contains(t, strings.ToLower(string(help)), "usage")
		})
	}
}

// assertStatic: no interpreter and no dynamic section, so the binary needs
// nothing from the image but itself.
func assertStatic(t *testing.T, binary []byte) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "binary")
	require.NoError(t, os.WriteFile(path, binary, 0o644))
	f, err := elf.Open(path)
	require.NoError(t, err)
	defer func() { _ = f.Close() }()
	for _, p := range f.Progs {
		assert.NotEqual(t, elf.PT_INTERP, p.Type, "dynamically linked")
		assert.NotEqual(t, elf.PT_DYNAMIC, p.Type, "dynamically linked")
	}
	assert.Nil(t, f.Section(".symtab"), "symbols stripped (-s)")
}

func TestUnknownBinaryIsRejected(t *testing.T) {
	_, err := selectBinaries([]string{"no-such-binary"})
	require.ErrorContains(t, err, `no binary "no-such-binary"; the module's binaries are manager, function-controller, registry-agent`)
}

func TestSourceDateEpoch(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Time
		err  string
	}{
		{"", time.Unix(0, 0).UTC(), ""},
		{"1700000000", time.Unix(1700000000, 0).UTC(), ""},
		{"yesterday", time.Time{}, `SOURCE_DATE_EPOCH "yesterday"`},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := sourceDateEpoch(tc.in)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.True(t, tc.want.Equal(got), "got %v", got)
		})
	}
}

// `make build` builds operator/cmd/*, `make image` module.Binaries(): the
// same binaries, each from operator/cmd/<binary>.
func TestEveryMainPackageIsAModuleBinary(t *testing.T) {
	entries, err := os.ReadDir(filepath.Join(repo.MustRoot(), "operator", "cmd"))
	require.NoError(t, err)
	var dirs []string
	for _, e := range entries {
		if e.IsDir() {
			dirs = append(dirs, e.Name())
		}
	}
	var binaries []string
	for _, id := range module.Binaries() {
		binaries = append(binaries, id.Binary)
		assert.Equal(t, "./operator/cmd/"+id.Binary, id.Package)
	}
	assert.ElementsMatch(t, binaries, dirs)
}

// The Dockerfile builds the same images for those with a container engine:
// a stage per binary with its entrypoint and title, the same passwd and
// group, user 65532 and the same labels.
func TestDockerfileBuildsTheSameImages(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repo.MustRoot(), "Dockerfile"))
	require.NoError(t, err)
	dockerfile := string(data)
	for _, id := range module.Binaries() {
		assert.Contains(t, dockerfile, "FROM image AS "+id.Binary+"\n"+
			"LABEL "+ociimage.LabelTitle+"="+imageName(id)+"\n"+
			`ENTRYPOINT ["/`+id.Binary+`"]`+"\n", id.Binary)
	}
	for _, want := range []string{
		"ARG BINARY=" + module.Manager().Binary + "\n",
		"FROM scratch AS image\n",
		"FROM ${BINARY}\n",
		"USER 65532:65532\n",
		"WORKDIR /\n",
		`go build -trimpath -ldflags "-s -w" -o /rootfs/${BINARY} ./operator/cmd/${BINARY}`,
		"GOFIPS140=" + fips.Module,
		"chmod 1777 /rootfs/tmp",
		ociimage.LabelVersion + "=${VERSION}",
		ociimage.LabelRevision + "=${REVISION}",
		ociimage.LabelSource + "=" + ociimage.Source,
		"/rootfs" + ociimage.CACertsPath,
	} {
		assert.Contains(t, dockerfile, want)
	}

	ca := caFile(t)
	certs, err := os.ReadFile(ca)
	require.NoError(t, err)
	img, err := ociimage.Build(ociimage.Spec{
		Binary: "x", BinaryPath: ca, CACerts: certs,
		Version: "1", OS: "linux", Arch: runtime.GOARCH,
	})
	require.NoError(t, err)
	files, err := ociimage.Files(img)
	require.NoError(t, err)
	for _, f := range []string{"etc/passwd", "etc/group"} {
		printf := "printf '" + strings.ReplaceAll(string(files[f].Data), "\n", `\n`) + "' >/rootfs/" + f
		assert.Contains(t, dockerfile, printf, "the Dockerfile writes the %s of hack/image", f)
	}
}

// The images are named as the module deploys them: the manager's
// Deployment in config/manager and the chart's Function controller and
// registry agent images, all at the module's VERSION.
func TestImageNamesAreTheDeployedOnes(t *testing.T) {
	root := repo.MustRoot()
	data, err := os.ReadFile(filepath.Join(root, "VERSION"))
	require.NoError(t, err)
	version := strings.TrimSpace(string(data))
	ref := func(id module.Identity) string { return defaultRepository + "/" + imageName(id) + ":" + version }

	objs, err := manifest.ReadFile(filepath.Join(root, "config", "manager", "manager.yaml"))
	require.NoError(t, err)
	var images []string
	for _, o := range objs {
		if o.GetKind() != "Deployment" {
			continue
		}
		containers, _, err := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		require.NoError(t, err)
		for _, c := range containers {
			images = append(images, c.(map[string]any)["image"].(string))
		}
	}
	assert.Equal(t, []string{ref(module.Manager())}, images, "config/manager")

	data, err = os.ReadFile(filepath.Join(root, "charts", "serverless", "values.yaml"))
	require.NoError(t, err)
	var values struct {
		Global struct {
			ImageRegistry string `json:"imageRegistry"`
			Images        map[string]struct {
				Repository string `json:"repository"`
				Tag        string `json:"tag"`
			} `json:"images"`
		} `json:"global"`
	}
	require.NoError(t, yaml.Unmarshal(data, &values))
	for key, id := range map[string]module.Identity{
		"function_controller": module.FunctionController(),
		"registry_agent":      module.RegistryAgent(),
		"activator":           module.Activator(),
	} {
		img := values.Global.Images[key]
		assert.Equal(t, ref(id), values.Global.ImageRegistry+"/"+img.Repository+":"+img.Tag, "the chart's %s image", key)
	}
}
