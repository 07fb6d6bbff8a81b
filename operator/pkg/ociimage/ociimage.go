// Package ociimage assembles the module's container images without a
// container engine and without a base image (none can be pulled where the
// module is built): a static binary, CA certificates, a passwd and group
// entry for the non-root user and an empty /tmp as the one writable mount
// point, so the images run with a read-only root filesystem.
package ociimage

import (
	"bytes"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// NonrootID is the uid and gid the images run as (distroless' "nonroot").
const NonrootID = 65532

// CACertsPath is where the images carry the CA bundle; Go's crypto/x509
// looks there first.
const CACertsPath = "/etc/ssl/certs/ca-certificates.crt"

// Source is the repository the images are built from.
const Source = "https://github.com/kyma-project/serverless-manager"

// OCI label keys set on every image.
const (
	LabelTitle    = "org.opencontainers.image.title"
	LabelVersion  = "org.opencontainers.image.version"
	LabelSource   = "org.opencontainers.image.source"
	LabelRevision = "org.opencontainers.image.revision"
)

// Spec is one image: the binary that goes in and how the image is labelled.
type Spec struct {
	// Title names the image (the binary's identity).
	Title string
	// Binary is the file name in the image root and the entrypoint /Binary.
	Binary string
	// BinaryPath is the static binary on the build machine.
	BinaryPath string
	// CACerts is a PEM bundle with at least one certificate.
	CACerts []byte
	// Version and Revision (a git commit, may be empty) label the image.
	Version, Revision string
	// Created is every timestamp in the image (files, config, history), so
	// the same inputs give the same digest; zero means the Unix epoch.
	Created time.Time
	// OS and Arch are the platform the binary was built for.
	OS, Arch string
}

func (s Spec) validate() error {
	var errs []error
	if s.Binary == "" || strings.ContainsAny(s.Binary, "/\\") || s.Binary == "." || s.Binary == ".." {
		errs = append(errs, fmt.Errorf("binary name %q is not a plain file name", s.Binary))
	}
	if s.Version == "" {
		errs = append(errs, errors.New("version is empty"))
	}
	if s.OS == "" || s.Arch == "" {
		errs = append(errs, fmt.Errorf("platform %q/%q is incomplete", s.OS, s.Arch))
	}
	if !x509.NewCertPool().AppendCertsFromPEM(s.CACerts) {
		errs = append(errs, errors.New("CA bundle holds no PEM certificate"))
	}
	return errors.Join(errs...)
}

// ReadCACerts reads the build machine's CA bundle for the images.
func ReadCACerts(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("CA certificates for the image (install the ca-certificates package): %w", err)
	}
	if !x509.NewCertPool().AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("CA certificates for the image: %s holds no PEM certificate", path)
	}
	return data, nil
}

// Build assembles the image of s: a base layer (CA certificates, passwd,
// group, /tmp; the same for every binary) and a layer with the binary.
func Build(s Spec) (v1.Image, error) {
	if err := s.validate(); err != nil {
		return nil, fmt.Errorf("image of %s: %w", s.Binary, err)
	}
	created := s.Created
	if created.IsZero() {
		created = time.Unix(0, 0)
	}
	created = created.UTC()
	binary, err := os.ReadFile(s.BinaryPath)
	if err != nil {
		return nil, fmt.Errorf("image of %s: %w", s.Binary, err)
	}

	base, err := layer(baseFiles(s.CACerts), created)
	if err != nil {
		return nil, fmt.Errorf("image of %s: base layer: %w", s.Binary, err)
	}
	app, err := layer([]File{{Path: s.Binary, Mode: 0o755, Data: binary}}, created)
	if err != nil {
		return nil, fmt.Errorf("image of %s: binary layer: %w", s.Binary, err)
	}

	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err = mutate.Append(img,
		mutate.Addendum{Layer: base, History: v1.History{Created: v1.Time{Time: created}, CreatedBy: "ociimage: CA certificates, passwd, group, /tmp", Comment: "base"}},
		mutate.Addendum{Layer: app, History: v1.History{Created: v1.Time{Time: created}, CreatedBy: "ociimage: /" + s.Binary, Comment: s.Binary}},
	)
	if err != nil {
		return nil, fmt.Errorf("image of %s: %w", s.Binary, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("image of %s: %w", s.Binary, err)
	}
	cf = cf.DeepCopy()
	cf.Created = v1.Time{Time: created}
	cf.OS, cf.Architecture = s.OS, s.Arch
	user := strconv.Itoa(NonrootID)
	cf.Config = v1.Config{
		User:       user + ":" + user,
		Entrypoint: []string{"/" + s.Binary},
		WorkingDir: "/",
		Labels:     s.Labels(),
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("image of %s: %w", s.Binary, err)
	}
	return img, nil
}

// Labels are the OCI labels of the image; the revision only when known.
func (s Spec) Labels() map[string]string {
	l := map[string]string{
		LabelTitle:   s.Title,
		LabelVersion: s.Version,
		LabelSource:  Source,
	}
	if s.Revision != "" {
		l[LabelRevision] = s.Revision
	}
	return l
}

// layerMediaType is the OCI media type of the gzip-compressed layers.
const layerMediaType = types.OCILayer

// Layer is a gzip-compressed layer of files, in the given order, every
// timestamp set to created: the same files always give the same digest.
func Layer(files []File, created time.Time) (v1.Layer, error) {
	return layer(files, created.UTC())
}

func layer(files []File, created time.Time) (v1.Layer, error) {
	var buf bytes.Buffer
	if err := writeTar(&buf, files, created); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(layerMediaType), tarball.WithCompressedCaching)
}
