package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/kyma-project/serverless-manager/operator/internal/logging"
	"github.com/kyma-project/serverless-manager/operator/pkg/registryagent"
)

// runRegistryAgent is `function-controller registry-agent`, the sidecar of
// the internal registry's Pod (see package registryagent): it serves until
// ctx ends, then lets a running request finish for up to 10 s.
func runRegistryAgent(ctx context.Context, lookup func(string) (string, bool), stderr io.Writer) int {
	get := func(n, def string) string {
		if v, ok := lookup(n); ok && v != "" {
			return v
		}
		return def
	}
	log, _, err := logging.New("info", "json")
	if err != nil {
		fmt.Fprintln(stderr, "function-controller registry-agent:", err)
		return 1
	}
	addr := get(registryagent.EnvAddress, registryagent.DefaultAddress)
	agent := &registryagent.Server{
		Root:           get(registryagent.EnvStorageRoot, registryagent.DefaultStorageRoot),
		CredentialsDir: get(registryagent.EnvCredentialsDir, registryagent.DefaultCredentialsDir),
		Log:            log,
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(stderr, "function-controller registry-agent:", err)
		return 1
	}
	srv := &http.Server{Handler: agent.Handler(), ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	log.Info("serving", "address", l.Addr().String(), "storageRoot", agent.Root)
	if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintln(stderr, "function-controller registry-agent:", err)
		return 1
	}
	<-done
	return 0
}
