// Package testenv starts a real API server (etcd + kube-apiserver from
// bin/assets, built by hack/tools.sh) for integration tests.
package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/kyma-project/serverless-manager/operator/internal/manager/watch"
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
	s, err := watch.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		t.Fatalf("creating a client: %v", err)
	}
	return &Env{Config: cfg, Client: c, env: env}
}

// String describes the environment for logs.
func (e *Env) String() string { return fmt.Sprintf("envtest at %s", e.Config.Host) }
