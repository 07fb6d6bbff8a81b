package framework

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha1" //nolint:gosec // npm's shasum field is SHA-1 by definition
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"
)

// NPMRegistry is a package registry for npm that a test controls: it
// serves the packages and versions the test publishes, on the real node's
// address, so the npm of build and buildless Pods installs from it over
// plain HTTP (point it there with a package registry Secret's .npmrc). It
// counts the tarballs it serves: how many installs really downloaded.
type NPMRegistry struct {
	// URL is the registry's address for .npmrc ("http://host:port/").
	URL string

	srv       *http.Server
	mu        sync.Mutex
	packages  map[string]map[string]npmVersion // name → version → tarball
	latest    map[string]string
	downloads map[string]int // name@version → tarballs served
}

type npmVersion struct {
	tarball           []byte
	shasum, integrity string
	dependencies      map[string]string
	// npm runs a dependency's install scripts only when the package
	// document says it has some
	hasInstallScript bool
}

// NPMPackage is one version of a package: package.json is made from Name,
// Version, Main, Dependencies and Scripts (npm runs a dependency's install
// scripts when it installs it); Files holds the rest (path → content).
type NPMPackage struct {
	Name, Version, Main   string
	Dependencies, Scripts map[string]string
	Files                 map[string][]byte
}

// StartNPMRegistry serves an empty registry until ctx ends or Close.
func (c *Cluster) StartNPMRegistry(ctx context.Context) (*NPMRegistry, error) {
	host := c.NodeIP()
	if host == "" {
		return nil, errors.New("no real node address (NODE_IP) recorded for the cluster")
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, err
	}
	return serveNPMRegistry(ctx, ln), nil
}

func serveNPMRegistry(ctx context.Context, ln net.Listener) *NPMRegistry {
	r := &NPMRegistry{
		URL:      "http://" + ln.Addr().String() + "/",
		packages: map[string]map[string]npmVersion{}, latest: map[string]string{}, downloads: map[string]int{},
	}
	r.srv = &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = r.srv.Serve(ln) }()
	go func() { <-ctx.Done(); _ = r.Close() }()
	return r
}

// Close stops serving.
func (r *NPMRegistry) Close() error { return r.srv.Close() }

// NPMRC is the .npmrc that makes npm use this registry only.
func (r *NPMRegistry) NPMRC() string { return "registry=" + r.URL + "\n" }

// Publish adds a version; it becomes the latest.
func (r *NPMRegistry) Publish(p NPMPackage) error {
	manifest := map[string]any{"name": p.Name, "version": p.Version}
	if p.Main != "" {
		manifest["main"] = p.Main
	}
	if len(p.Dependencies) > 0 {
		manifest["dependencies"] = p.Dependencies
	}
	if len(p.Scripts) > 0 {
		manifest["scripts"] = p.Scripts
	}
	pj, err := json.MarshalIndent(manifest, "", "  ")
	if err != nil {
		return err
	}
	files := map[string][]byte{"package.json": pj}
	for name, data := range p.Files {
		files[name] = data
	}
	tgz, err := tarball(files)
	if err != nil {
		return err
	}
	sha := sha1.Sum(tgz) //nolint:gosec // see the import
	sum := sha512.Sum512(tgz)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.packages[p.Name] == nil {
		r.packages[p.Name] = map[string]npmVersion{}
	}
	r.packages[p.Name][p.Version] = npmVersion{tarball: tgz, shasum: hex.EncodeToString(sha[:]),
		integrity: "sha512-" + base64.StdEncoding.EncodeToString(sum[:]), dependencies: p.Dependencies,
		hasInstallScript: p.Scripts["preinstall"] != "" || p.Scripts["install"] != "" || p.Scripts["postinstall"] != ""}
	r.latest[p.Name] = p.Version
	return nil
}

// Downloads is how many times the tarball of name@version was served.
func (r *NPMRegistry) Downloads(name, version string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.downloads[name+"@"+version]
}

// ServeHTTP answers npm: GET /<name> is the package document (every
// version with its tarball's address and checksums), GET
// /<name>/-/<file>-<version>.tgz the tarball.
func (r *NPMRegistry) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		http.Error(w, "this registry only serves packages", http.StatusMethodNotAllowed)
		return
	}
	path := strings.TrimPrefix(req.URL.Path, "/")
	r.mu.Lock()
	defer r.mu.Unlock()
	if name, file, ok := strings.Cut(path, "/-/"); ok {
		version := strings.TrimSuffix(strings.TrimPrefix(file, unscoped(name)+"-"), ".tgz")
		v, found := r.packages[name][version]
		if !found {
			http.NotFound(w, req)
			return
		}
		r.downloads[name+"@"+version]++
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = w.Write(v.tarball)
		return
	}
	name := strings.ReplaceAll(path, "%2f", "/")
	name = strings.ReplaceAll(name, "%2F", "/")
	versions, found := r.packages[name]
	if !found {
		http.Error(w, `{"error":"Not found"}`, http.StatusNotFound)
		return
	}
	doc := map[string]any{"name": name, "dist-tags": map[string]string{"latest": r.latest[name]}}
	vs := map[string]any{}
	keys := make([]string, 0, len(versions))
	for v := range versions {
		keys = append(keys, v)
	}
	sort.Strings(keys)
	for _, v := range keys {
		entry := map[string]any{"name": name, "version": v, "hasInstallScript": versions[v].hasInstallScript, "dist": map[string]string{
			"tarball":   strings.TrimSuffix(r.URL, "/") + "/" + name + "/-/" + unscoped(name) + "-" + v + ".tgz",
			"shasum":    versions[v].shasum,
			"integrity": versions[v].integrity,
		}}
		if len(versions[v].dependencies) > 0 {
			entry["dependencies"] = versions[v].dependencies
		}
		vs[v] = entry
	}
	doc["versions"] = vs
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(doc)
}

// unscoped is a package name without its @scope/.
func unscoped(name string) string {
	if i := strings.LastIndex(name, "/"); i >= 0 {
		return name[i+1:]
	}
	return name
}

// tarball packs files below package/, as npm packs them.
func tarball(files map[string][]byte) ([]byte, error) {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		h := &tar.Header{Name: "package/" + n, Mode: 0o644, Size: int64(len(files[n])), ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("%s: %w", n, err)
		}
		if _, err := tw.Write(files[n]); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
