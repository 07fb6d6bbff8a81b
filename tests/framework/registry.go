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
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"golang.org/x/crypto/bcrypt"

	"github.com/kyma-project/serverless-manager/operator/pkg/ociimage"

	"github.com/kyma-project/serverless-manager/tests/framework/podrun"
)

// Registry is the chart's registry software (distribution, built by
// hack/tools.sh) running as a process on a loopback port, with htpasswd
// authentication and filesystem storage as the chart configures it.
type Registry struct {
	*Process
	// Address is host:port (plain HTTP).
	Address string
	// Username and Password are the credentials htpasswd holds.
	Username, Password string
	// Root is the storage directory (its bytes are what the registry uses).
	Root string
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

// HtpasswdLine is the htpasswd entry of the credentials, bcrypt at cost 5:
// what `htpasswd -B` writes by default. distribution checks it on every
// request, so the cost shows in every push.
func HtpasswdLine(username, password string) ([]byte, error) {
	hash, err := bcrypt.GenerateFromPassword([]byte(password), 5)
	if err != nil {
		return nil, err
	}
	return []byte(username + ":" + string(hash) + "\n"), nil
}

// StartRegistry starts a registry under dir with the given credentials and
// waits until it answers (it refuses anonymous requests).
func StartRegistry(ctx context.Context, name, binDir, dir, username, password string) (*Registry, error) {
	port, err := podrun.FreeLoopbackPort()
	if err != nil {
		return nil, err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	root := filepath.Join(dir, "storage")
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, err
	}
	line, err := HtpasswdLine(username, password)
	if err != nil {
		return nil, err
	}
	htpasswd := filepath.Join(dir, "htpasswd")
	if err := os.WriteFile(htpasswd, line, 0o600); err != nil {
		return nil, err
	}
	config := filepath.Join(dir, "config.yml")
	if err := os.WriteFile(config, fmt.Appendf(nil, registryConfig, root, addr), 0o644); err != nil {
		return nil, err
	}
	proc, err := StartProcess(ProcessSpec{
		Name: name,
		Path: filepath.Join(binDir, "registry"),
		Args: []string{"serve", config},
		Env: []string{
			"REGISTRY_AUTH=htpasswd", "REGISTRY_AUTH_HTPASSWD_REALM=Registry Realm", "REGISTRY_AUTH_HTPASSWD_PATH=" + htpasswd,
			"REGISTRY_HTTP_SECRET=" + name,
		},
		OnlyEnv: true,
	})
	if err != nil {
		return nil, err
	}
	r := &Registry{Process: proc, Address: addr, Username: username, Password: password, Root: root}
	deadline := time.Now().Add(30 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		if exited, err := proc.Exited(); exited {
			return nil, fmt.Errorf("registry %s exited: %v\n%s", name, err, proc.Tail(20))
		}
		status, err := r.status(ctx)
		if status == http.StatusUnauthorized {
			return r, nil
		}
		last = fmt.Sprintf("status %d, error %v", status, err)
		time.Sleep(100 * time.Millisecond)
	}
	return nil, errors.Join(fmt.Errorf("registry %s at %s did not answer within 30s (last: %s)\n%s", name, addr, last, proc.Tail(20)), proc.Stop())
}

func (r *Registry) status(ctx context.Context) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+r.Address+"/v2/", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
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

// StandIn is a stand-in for a runtime image, which cannot be pulled on
// these machines: one layer with a marker file naming it under
// /usr/local/share/runtime, and the PATH and user a runtime image sets.
func StandIn(name string) (v1.Image, error) {
	dir, err := os.MkdirTemp("", "stand-in-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	if err := os.WriteFile(filepath.Join(dir, "runtime"), []byte(name+" stand-in\n"), 0o644); err != nil {
		return nil, err
	}
	layer, err := ociimage.DirLayer(dir, "/usr/local/share/runtime", time.Time{})
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return nil, err
	}
	return mutate.Config(img, v1.Config{Env: []string{"PATH=/usr/local/bin:/usr/bin:/bin"}, User: "1000"})
}

// PushStandIn pushes a StandIn as repo:test and returns its reference.
func (r *Registry) PushStandIn(repo string) (string, error) {
	img, err := StandIn(repo)
	if err != nil {
		return "", err
	}
	ref := r.Address + "/" + repo + ":test"
	tag, err := r.Reference(ref)
	if err != nil {
		return "", err
	}
	if err := remote.Write(tag, img, r.Auth()); err != nil {
		return "", fmt.Errorf("pushing %s: %w", ref, err)
	}
	return ref, nil
}
