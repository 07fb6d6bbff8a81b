// Package testenv starts a real API server (etcd + kube-apiserver from
// bin/assets, built by hack/tools.sh) for integration tests, runs the
// controller-runtime managers they test against it, and records the
// writes a client sends.
package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/kyma-project/serverless-manager/operator/api/v1alpha1"
	"github.com/kyma-project/serverless-manager/tests/support/repo"
)

// Env is a running API server.
type Env struct {
	Config *rest.Config
	Client client.Client
	env    *envtest.Environment
}

// Start starts etcd and kube-apiserver with the CRDs under crdDirs
// (relative to the repository root) installed, and stops them when the test
// ends. The binaries must have been built (make tools); the test fails with
// that hint otherwise.
func Start(t testing.TB, crdDirs ...string) *Env {
	t.Helper()
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		assets = filepath.Join(repo.MustRoot(), "bin", "assets")
	}
	if _, err := os.Stat(filepath.Join(assets, "kube-apiserver")); err != nil {
		t.Fatalf("no kube-apiserver in %s: run `make tools` first (%v)", assets, err)
	}
	var paths []string
	for _, d := range crdDirs {
		paths = append(paths, filepath.Join(repo.MustRoot(), d))
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     paths,
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("starting the API server: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Logf("stopping the API server: %v", err)
		}
	})
	s, err := scheme()
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		t.Fatalf("creating a client: %v", err)
	}
	return &Env{Config: cfg, Client: c, env: env}
}

// scheme is the manager's (watch.NewScheme), which a package outside
// operator/ cannot import: Kubernetes' built-in kinds, CRDs and the
// Serverless CR.
func scheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, v1alpha1.AddToScheme} {
		if err := add(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// String describes the environment for logs.
func (e *Env) String() string { return fmt.Sprintf("envtest at %s", e.Config.Host) }
