// Command registry-agent is the internal registry's sidecar (see package
// operator/internal/registryagent): it shares the registry Pod's volume and
// serves GET /usage and POST /gc behind the registry's credentials. It is
// its own binary and image so that distribution's storage code, which it
// links, stays out of the Function controller and the manager. It does not
// talk to the API server. Configured by APP_REGISTRY_AGENT_* (see
// operator/pkg/registryagent).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/kyma-project/serverless-manager/operator/internal/logging"
	agent "github.com/kyma-project/serverless-manager/operator/internal/registryagent"
	"github.com/kyma-project/serverless-manager/operator/pkg/fips"
	"github.com/kyma-project/serverless-manager/operator/pkg/module"
	"github.com/kyma-project/serverless-manager/operator/pkg/registryagent"
)

func main() {
	fips.RefuseUnlessEnforced(module.RegistryAgent().Binary)
	name := module.RegistryAgent().Binary
	flags := flag.NewFlagSet(name, flag.ExitOnError)
	flags.Usage = func() {
		out := flags.Output()
		fmt.Fprintf(out, "Usage: %s\n\n", name)
		fmt.Fprintln(out, "The internal registry's sidecar: GET /usage, POST /gc (behind the registry's credentials),")
		fmt.Fprintln(out, "GET /healthz. Configured by environment variables (empty = default):")
		for _, e := range [][2]string{
			{registryagent.EnvAddress, registryagent.DefaultAddress},
			{registryagent.EnvStorageRoot, registryagent.DefaultStorageRoot},
			{registryagent.EnvCredentialsDir, registryagent.DefaultCredentialsDir},
		} {
			fmt.Fprintf(out, "  %s (default %s)\n", e[0], e[1])
		}
	}
	// No flags: the configuration is the environment; --help prints it.
	_ = flags.Parse(os.Args[1:])
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	code := run(ctx, os.LookupEnv, os.Stderr)
	stop()
	os.Exit(code)
}

// run serves until ctx ends, then lets a running request finish for up to
// 10 s.
func run(ctx context.Context, lookup func(string) (string, bool), stderr io.Writer) int {
	name := module.RegistryAgent().Binary
	get := func(n, def string) string {
		if v, ok := lookup(n); ok && v != "" {
			return v
		}
		return def
	}
	log, _, err := logging.New("info", "json")
	if err != nil {
		fmt.Fprintln(stderr, name+":", err)
		return 1
	}
	addr := get(registryagent.EnvAddress, registryagent.DefaultAddress)
	server := &agent.Server{
		Root:           get(registryagent.EnvStorageRoot, registryagent.DefaultStorageRoot),
		CredentialsDir: get(registryagent.EnvCredentialsDir, registryagent.DefaultCredentialsDir),
		Log:            log,
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(stderr, name+":", err)
		return 1
	}
	srv := &http.Server{Handler: server.Handler(), ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	log.Info("serving", "address", l.Addr().String(), "storageRoot", server.Root)
	if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintln(stderr, name+":", err)
		return 1
	}
	<-done
	return 0
}
