package framework

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/kyma-project/serverless-manager/hack/cluster/htpasswd"
)

// Registry is the chart's registry software (distribution, built by
// hack/tools.sh) running as a process on this machine, outside the
// cluster as an external registry is, with htpasswd authentication and
// filesystem storage as the chart configures it. It listens on the real
// node's address, so build Pods push to it and the node pulls from it
// (over plain HTTP: Cluster.TrustRegistry).
type Registry struct {
	*Process
	// Address is host:port (plain HTTP).
	Address string
	// Username and Password are the credentials htpasswd holds.
	Username, Password string
	// Root is the storage directory (its bytes are what the registry uses).
	Root string
}

// RegistrySpec says how to run a Registry.
type RegistrySpec struct {
	// Name names its log file.
	Name string
	// Dir holds its configuration and htpasswd file.
	Dir string
	// Storage is its root directory; default Dir/storage. A directory the
	// chart's registry mounts as /var/lib/registry (e.g. a claim's volume)
	// is laid out as that registry's.
	Storage string
	// Username and Password are the only credentials it accepts.
	Username, Password string
}

// registryConfig is the chart's config.yml (charts/serverless/templates/
// registry.yaml) with the listen address and storage made local.
const registryConfig = `version: 0.1
log:
  level: info
  formatter: text
storage:
  delete:
    enabled: true
  filesystem:
    rootdirectory: %s
http:
  addr: %s
  headers:
    X-Content-Type-Options: [nosniff]
health:
  storagedriver:
    enabled: true
    interval: 10s
    threshold: 3
`

// StartRegistry starts a registry on a free port of the real node's
// address, lets the node pull from it over plain HTTP and waits until it
// answers (it refuses anonymous requests).
func (c *Cluster) StartRegistry(ctx context.Context, spec RegistrySpec) (*Registry, error) {
	host := c.NodeIP()
	if host == "" {
		return nil, errors.New("the cluster records no NODE_IP: no real node to serve")
	}
	port, err := freePort(host)
	if err != nil {
		return nil, err
	}
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	root := spec.Storage
	if root == "" {
		root = filepath.Join(spec.Dir, "storage")
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, err
	}
	line, err := htpasswd.Line(spec.Username, spec.Password)
	if err != nil {
		return nil, err
	}
	htpasswdFile := filepath.Join(spec.Dir, "htpasswd")
	if err := os.WriteFile(htpasswdFile, line, 0o600); err != nil {
		return nil, err
	}
	config := filepath.Join(spec.Dir, "config.yml")
	if err := os.WriteFile(config, fmt.Appendf(nil, registryConfig, root, addr), 0o644); err != nil {
		return nil, err
	}
	if err := c.TrustRegistry(ctx, addr); err != nil {
		return nil, fmt.Errorf("letting the node pull from %s: %w", addr, err)
	}
	proc, err := StartProcess(ProcessSpec{
		Name: spec.Name,
		Path: filepath.Join(c.root, "bin", "assets", "registry"),
		Args: []string{"serve", config},
		Env: []string{
			"REGISTRY_AUTH=htpasswd", "REGISTRY_AUTH_HTPASSWD_REALM=Registry Realm", "REGISTRY_AUTH_HTPASSWD_PATH=" + htpasswdFile,
			"REGISTRY_HTTP_SECRET=" + spec.Name,
		},
		OnlyEnv: true,
	})
	if err != nil {
		return nil, err
	}
	r := &Registry{Process: proc, Address: addr, Username: spec.Username, Password: spec.Password, Root: root}
	deadline := time.Now().Add(30 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		if exited, err := proc.Exited(); exited {
			return nil, fmt.Errorf("registry %s exited: %v\n%s", spec.Name, err, proc.Tail(20))
		}
		status, err := r.status(ctx)
		if status == http.StatusUnauthorized {
			return r, nil
		}
		last = fmt.Sprintf("status %d, error %v", status, err)
		time.Sleep(100 * time.Millisecond)
	}
	return nil, errors.Join(fmt.Errorf("registry %s at %s did not answer within 30s (last: %s)\n%s", spec.Name, addr, last, proc.Tail(20)), proc.Stop())
}

// freePort is a TCP port of host nothing listens on now.
func freePort(host string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (r *Registry) status(ctx context.Context) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+r.Address+"/v2/", nil)
	if err != nil {
		return 0, err
	}
	resp, err := (&http.Client{Transport: &http.Transport{Proxy: nil}}).Do(req)
	if err != nil {
		return 0, err
	}
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}

// DiskBytes is the size of the registry's storage on disk.
func (r *Registry) DiskBytes() (int64, error) { return dirBytes(r.Root) }

// BlobBytes is the size of the stored blobs (layers, configs, manifests),
// without distribution's link files that index them.
func (r *Registry) BlobBytes() (int64, error) {
	return dirBytes(filepath.Join(r.Root, "docker", "registry", "v2", "blobs"))
}

func dirBytes(root string) (int64, error) {
	var total int64
	err := filepath.WalkDir(root, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err == nil {
			total += info.Size()
		}
		return err
	})
	return total, err
}

// Auth is the remote option that authenticates to the registry.
func (r *Registry) Auth() remote.Option {
	return remote.WithAuth(&authn.Basic{Username: r.Username, Password: r.Password})
}

// Reference parses ref (plain HTTP, as the registry serves).
func (r *Registry) Reference(ref string) (name.Reference, error) {
	return name.ParseReference(ref, name.Insecure)
}

// Context is a repository of the registry.
func (r *Registry) Context(repository string) name.Repository {
	repo, _ := name.NewRepository(r.Address+"/"+repository, name.Insecure)
	return repo
}
