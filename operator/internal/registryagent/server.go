package registryagent

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/distribution/distribution/v3/registry/storage"
	"github.com/distribution/distribution/v3/registry/storage/driver/filesystem"
	"github.com/go-logr/logr"

	api "github.com/kyma-project/serverless-manager/operator/pkg/registryagent"
)

// Server serves the agent's endpoints for one storage root.
type Server struct {
	// Root is distribution's filesystem rootdirectory.
	Root string
	// CredentialsDir holds api.UsernameFile and api.PasswordFile.
	CredentialsDir string
	Log            logr.Logger

	// gc is held while a GC runs: a second one is refused, not queued.
	gc sync.Mutex
}

// Handler serves GET /usage and POST /gc behind basic auth, and GET
// /healthz.
func (s *Server) Handler() http.Handler {
	authed := http.NewServeMux()
	authed.HandleFunc("GET "+api.PathUsage, s.usage)
	authed.HandleFunc("POST "+api.PathGC, s.collect)
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+api.PathHealthz, func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.Handle("/", s.authenticated(authed))
	return mux
}

func (s *Server) usage(w http.ResponseWriter, _ *http.Request) {
	u, err := Measure(s.Root)
	if err != nil {
		s.fail(w, http.StatusInternalServerError, err)
		return
	}
	writeJSON(w, http.StatusOK, u)
}

func (s *Server) collect(w http.ResponseWriter, r *http.Request) {
	if !s.gc.TryLock() {
		writeJSON(w, http.StatusConflict, api.ErrorAnswer{Error: api.ErrBusy.Error()})
		return
	}
	defer s.gc.Unlock()
	res, err := GC(r.Context(), s.Root)
	if err != nil {
		s.fail(w, http.StatusInternalServerError, err)
		return
	}
	s.Log.Info("garbage collected", "blobsDeleted", res.BlobsDeleted, "manifestsDeleted", res.ManifestsDeleted,
		"bytesBefore", res.BytesBefore, "bytesAfter", res.BytesAfter, "duration", res.Duration().String())
	writeJSON(w, http.StatusOK, res)
}

// GC runs distribution's mark-and-sweep on the storage root, deleting the
// blobs no remaining manifest references, and counts what it removed. No
// push may run meanwhile (package doc). Untagged manifests stay: a rebuild
// that moves a tag to a new digest leaves the old digest untagged while a
// ReplicaSet may still run it by tag@digest; the Function controller
// deletes manifests by digest when nothing refers to them.
func GC(ctx context.Context, root string) (api.GCResult, error) {
	start := time.Now()
	before, err := walk(root)
	if err != nil {
		return api.GCResult{}, err
	}
	// distribution's mark fails on a registry that never stored an image.
	if _, err := os.Stat(filepath.Join(root, reposDir)); errors.Is(err, fs.ErrNotExist) {
		return api.GCResult{BytesBefore: before.UsedBytes, BytesAfter: before.UsedBytes, DurationMillis: time.Since(start).Milliseconds()}, nil
	}
	driver, err := filesystem.FromParameters(map[string]any{"rootdirectory": root})
	if err != nil {
		return api.GCResult{}, fmt.Errorf("filesystem storage at %s: %w", root, err)
	}
	reg, err := storage.NewRegistry(ctx, driver)
	if err != nil {
		return api.GCResult{}, fmt.Errorf("opening the registry storage at %s: %w", root, err)
	}
	// Quiet: otherwise it prints every blob it marks on stdout.
	if err := storage.MarkAndSweep(ctx, driver, reg, storage.GCOpts{RemoveUntagged: false, Quiet: true}); err != nil {
		return api.GCResult{}, fmt.Errorf("garbage collecting %s: %w", root, err)
	}
	after, err := walk(root)
	if err != nil {
		return api.GCResult{}, err
	}
	return api.GCResult{
		BlobsDeleted:     before.Blobs - after.Blobs,
		ManifestsDeleted: before.Manifests - after.Manifests,
		BytesBefore:      before.UsedBytes,
		BytesAfter:       after.UsedBytes,
		DurationMillis:   time.Since(start).Milliseconds(),
	}, nil
}

// authenticated lets through requests with the registry's credentials.
func (s *Server) authenticated(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		wantUser, wantPassword, err := s.credentials()
		if err != nil {
			s.fail(w, http.StatusInternalServerError, err)
			return
		}
		user, password, ok := r.BasicAuth()
		if !ok || !(equal(user, wantUser) && equal(password, wantPassword)) {
			w.Header().Set("WWW-Authenticate", `Basic realm="registry-agent"`)
			writeJSON(w, http.StatusUnauthorized, api.ErrorAnswer{Error: "the registry's credentials are required"})
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Server) credentials() (user, password string, err error) {
	read := func(name string) (string, error) {
		data, err := os.ReadFile(filepath.Join(s.CredentialsDir, name))
		if err != nil {
			return "", fmt.Errorf("reading the registry credentials: %w", err)
		}
		return string(data), nil
	}
	if user, err = read(api.UsernameFile); err != nil {
		return "", "", err
	}
	if password, err = read(api.PasswordFile); err != nil {
		return "", "", err
	}
	if user == "" || password == "" {
		return "", "", fmt.Errorf("the registry credentials in %s are empty", s.CredentialsDir)
	}
	return user, password, nil
}

// equal compares in constant time, lengths included (hashes are equal-sized).
func equal(got, want string) bool {
	g, w := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(want))
	return subtle.ConstantTimeCompare(g[:], w[:]) == 1
}

func (s *Server) fail(w http.ResponseWriter, status int, err error) {
	s.Log.Error(err, "request failed")
	writeJSON(w, status, api.ErrorAnswer{Error: err.Error()})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
