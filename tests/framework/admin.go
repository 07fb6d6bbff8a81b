package framework

import (
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// AdminClient is a client of the local cluster as its admin, for the hack
// tools that act as its node: $KUBECONFIG, else the cluster's own
// kubeconfig under root (the repository).
func AdminClient(root string) (client.Client, error) {
	path := os.Getenv("KUBECONFIG")
	if path == "" {
		path = filepath.Join(root, ".cluster", "kubeconfig")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	return client.New(cfg, client.Options{})
}
