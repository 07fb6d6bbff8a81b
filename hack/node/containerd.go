package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kyma-project/serverless-manager/hack/cluster/localimage"
	"github.com/kyma-project/serverless-manager/hack/cluster/process"
)

// containerdSocket is the CRI endpoint kubelet talks to. Unix socket paths
// are limited to 107 bytes; the state directory of a deep checkout may not
// fit, so the socket lives in /run under the bridge's name (one real node
// per machine).
func (c config) containerdSocket() string {
	return filepath.Join("/run", c.bridge, "containerd.sock")
}

// containerd runs the container runtime with everything it keeps below the
// node's directory: images, snapshots, the runc state, the Pods' network
// namespaces. Images are pulled from the node's registry: its own address
// over plain HTTP, and Kyma's published registry mirrored to it (the
// module's images are built here under their published names).
type containerd struct{}

func (containerd) Name() string { return "containerd" }

func (containerd) daemon(ac *actionContext) daemon {
	config := ac.path("containerd.toml")
	return daemon{name: "containerd", path: "containerd", args: []string{"--config", config}, config: config, grace: 10 * time.Second}
}

func (c containerd) Up(ctx context.Context, ac *actionContext) error {
	if err := ac.writeContainerdConfig(); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(ac.containerdSocket()), 0o700); err != nil {
		return err
	}
	return c.start(ctx, ac)
}

// Down kills the shims, stops containerd, unmounts everything below the
// node's directory (root filesystems, Secret volumes, network namespaces).
func (c containerd) Down(_ context.Context, ac *actionContext) error {
	var errs []error
	// The shims outlive containerd; they hold the containers' stdio.
	errs = append(errs, process.KillMatching(func(cmdline []byte) bool {
		return bytes.Contains(cmdline, []byte("containerd-shim")) && bytes.Contains(cmdline, []byte(ac.containerdSocket()))
	}))
	errs = append(errs, ac.stop(c.daemon(ac)))
	errs = append(errs, unmountBelow(ac.dir()))
	errs = append(errs, os.RemoveAll(filepath.Dir(ac.containerdSocket())))
	errs = append(errs, removeCNICache(cniNetwork))
	return errors.Join(errs...)
}

// start starts containerd and waits for its socket.
func (c containerd) start(ctx context.Context, ac *actionContext) error {
	if err := ac.start(c.daemon(ac)); err != nil {
		return err
	}
	return waitFor(ctx, 30*time.Second, "containerd's socket", func() error {
		if err := ac.checkAlive("containerd"); err != nil {
			return process.StopWaiting{Err: err}
		}
		conn, err := net.Dial("unix", ac.containerdSocket())
		if err != nil {
			return err
		}
		return conn.Close()
	})
}

// cniNetwork names the Pods' network in the CNI configuration.
const cniNetwork = "serverless-local"

func (c config) writeContainerdConfig() error {
	files := map[string]string{
		"containerd.toml": `version = 2
root = "` + c.path("containerd", "root") + `"
state = "` + c.path("containerd", "state") + `"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs", "io.containerd.internal.v1.tracing", "io.containerd.tracing.processor.v1.otlp"]

[grpc]
  address = "` + c.containerdSocket() + `"

[ttrpc]
  address = "` + c.containerdSocket() + `.ttrpc"

[plugins."io.containerd.internal.v1.opt"]
  path = "` + c.path("containerd", "opt") + `"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "` + localimage.Ref(c.registry(), localimage.Pause) + `"
  # This machine's bounding set lacks CAP_SYS_RESOURCE: runc cannot give a
  # sandbox the negative oom_score_adj kubelet asks for.
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  disable_apparmor = true
  enable_selinux = false

  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"

    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"

      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "` + c.path("runc") + `"

  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "` + cniBinDir + `"
    conf_dir = "` + c.path("cni") + `"

  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "` + c.path("certs.d") + `"
`,
		filepath.Join("cni", "10-"+cniNetwork+".conflist"): `{
  "cniVersion": "0.4.0",
  "name": "` + cniNetwork + `",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "` + c.bridge + `",
      "isGateway": true,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "` + c.podCIDR.String() + `", "gateway": "` + c.gateway().String() + `"}]],
        "routes": [{"dst": "0.0.0.0/0"}],
        "dataDir": "` + c.path("cni-ipam") + `"
      }
    }
  ]
}
`,
	}
	// plain HTTP to the node's registry, under its own address and as the
	// mirror of the published one
	files[hostsFile(c.registry())] = plainHTTP(c.registry())
	files[hostsFile(localimage.PublishedRegistry)] = plainHTTP(c.registry())
	for name, content := range files {
		path := c.path(name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// hostsFile is where containerd reads how to reach the registry host
// (re-read at every pull: no restart).
func hostsFile(host string) string { return filepath.Join("certs.d", host, "hosts.toml") }

// plainHTTP is a hosts.toml that pulls from server over plain HTTP.
func plainHTTP(server string) string {
	return `server = "http://` + server + `"

[host."http://` + server + `"]
  capabilities = ["pull", "resolve"]
`
}

// trustRegistry lets the node pull from the registry at addr over plain
// HTTP, as a node is configured for an external registry without TLS.
func (c config) trustRegistry(addr string) error {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return fmt.Errorf("registry address %q is not host:port: %w", addr, err)
	}
	path := c.path(hostsFile(addr))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(plainHTTP(addr)), 0o644)
}

// unmountBelow lazily unmounts every mount point below dir, deepest first
// (overlay root filesystems, Secret tmpfs, network namespaces).
func unmountBelow(dir string) error {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	var points []string
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 5 {
			continue
		}
		p := unescapeMountPath(fields[4])
		if p == dir || strings.HasPrefix(p, dir+"/") {
			points = append(points, p)
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(points)))
	var errs []error
	for _, p := range points {
		if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("unmounting %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

// unescapeMountPath undoes mountinfo's octal escapes (\040 for a blank).
func unescapeMountPath(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// removeCNICache removes what libcni cached of our network's attachments
// in its fixed directory.
func removeCNICache(network string) error {
	files, _ := filepath.Glob(filepath.Join("/var/lib/cni/results", network+"-*"))
	var errs []error
	for _, f := range files {
		errs = append(errs, os.Remove(f))
	}
	return errors.Join(errs...)
}
