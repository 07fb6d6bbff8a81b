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

	"github.com/kyma-project/serverless-manager/operator/pkg/localimage"
	"github.com/kyma-project/serverless-manager/operator/pkg/process"
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
func (n *node) containerd() action {
	return action{
		name: "containerd",
		up: func(ctx context.Context) error {
			if err := n.writeContainerdConfig(); err != nil {
				return err
			}
			if err := os.MkdirAll(filepath.Dir(n.containerdSocket()), 0o700); err != nil {
				return err
			}
			return n.startContainerd(ctx)
		},
		down: func(context.Context) error {
			var errs []error
			// The shims outlive containerd; they hold the containers' stdio.
			errs = append(errs, process.KillMatching(func(cmdline []byte) bool {
				return bytes.Contains(cmdline, []byte("containerd-shim")) && bytes.Contains(cmdline, []byte(n.containerdSocket()))
			}))
			errs = append(errs, n.stop(n.containerdDaemon()))
			errs = append(errs, unmountBelow(n.dir()))
			errs = append(errs, os.RemoveAll(filepath.Dir(n.containerdSocket())))
			errs = append(errs, removeCNICache(cniNetwork))
			return errors.Join(errs...)
		},
	}
}

func (n *node) containerdDaemon() daemon {
	config := n.path("containerd.toml")
	return daemon{name: "containerd", path: "containerd", args: []string{"--config", config}, config: config, grace: 10 * time.Second}
}

// startContainerd starts containerd and waits for its socket.
func (n *node) startContainerd(ctx context.Context) error {
	if err := n.start(n.containerdDaemon()); err != nil {
		return err
	}
	return waitFor(ctx, 30*time.Second, "containerd's socket", func() error {
		if err := n.checkAlive("containerd"); err != nil {
			return process.StopWaiting{Err: err}
		}
		conn, err := net.Dial("unix", n.containerdSocket())
		if err != nil {
			return err
		}
		return conn.Close()
	})
}

// cniNetwork names the Pods' network in the CNI configuration.
const cniNetwork = "serverless-local"

func (n *node) writeContainerdConfig() error {
	files := map[string]string{
		"containerd.toml": `version = 2
root = "` + n.path("containerd", "root") + `"
state = "` + n.path("containerd", "state") + `"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs", "io.containerd.internal.v1.tracing", "io.containerd.tracing.processor.v1.otlp"]

[grpc]
  address = "` + n.containerdSocket() + `"

[ttrpc]
  address = "` + n.containerdSocket() + `.ttrpc"

[plugins."io.containerd.internal.v1.opt"]
  path = "` + n.path("containerd", "opt") + `"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "` + localimage.Ref(n.registry(), localimage.Pause) + `"
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
        Root = "` + n.path("runc") + `"

  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "` + cniBinDir + `"
    conf_dir = "` + n.path("cni") + `"

  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "` + n.path("certs.d") + `"
`,
		filepath.Join("cni", "10-"+cniNetwork+".conflist"): `{
  "cniVersion": "0.4.0",
  "name": "` + cniNetwork + `",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "` + n.bridge + `",
      "isGateway": true,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "` + n.podCIDR.String() + `", "gateway": "` + n.gateway().String() + `"}]],
        "routes": [{"dst": "0.0.0.0/0"}],
        "dataDir": "` + n.path("cni-ipam") + `"
      }
    }
  ]
}
`,
	}
	// plain HTTP to the node's registry, under its own address and as the
	// mirror of the published one
	files[hostsFile(n.registry())] = plainHTTP(n.registry())
	files[hostsFile(localimage.PublishedRegistry)] = plainHTTP(n.registry())
	for name, content := range files {
		path := n.path(name)
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
func (n *node) trustRegistry(addr string) error {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return fmt.Errorf("registry address %q is not host:port: %w", addr, err)
	}
	path := n.path(hostsFile(addr))
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
