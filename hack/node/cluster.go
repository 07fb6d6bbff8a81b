package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/kyma-project/serverless-manager/operator/pkg/localcluster"
)

// startCluster brings the whole cluster up, unless a completed start runs
// as it should; it says which ("running" or "started"). What an unhealthy
// or killed earlier run left is undone first. A failed start is undone
// too, keeping only the logs for diagnosis; the next start begins afresh.
func (ac *actionContext) startCluster(ctx context.Context) (string, error) {
	if err := ac.healthy(); err == nil {
		ac.log.Printf("already running and healthy (nodes: %d simulated and %s, API: https://%s:%d)", ac.nodes, ac.name, ac.gateway(), ac.apiServerPort)
		ac.warnEnvDiffers()
		return "running", nil
	} else if _, statErr := os.Stat(ac.state); statErr == nil {
		ac.log.Printf("found a stopped or unhealthy cluster in %s (%v), cleaning it up", ac.state, err)
		if err := ac.down(context.Background(), allActions()); err != nil {
			return "", fmt.Errorf("cleaning up the earlier cluster: %w", err)
		}
		if err := os.RemoveAll(ac.state); err != nil {
			return "", err
		}
		// its settings went with it: the caller's count now
		if err := ac.config.complete(ac.getenv); err != nil {
			return "", err
		}
	}
	if err := ac.portsFree(); err != nil {
		return "", err
	}
	if err := ac.writeConfig(); err != nil {
		return "", err
	}
	if err := ac.up(ctx, allActions()); err != nil {
		return "", errors.Join(err, ac.keepOnlyLogs())
	}
	if err := os.WriteFile(ac.readyMarker(), nil, 0o644); err != nil {
		return "", err
	}
	return "started", nil
}

// keepOnlyLogs removes the state directory but for its logs.
func (ac *actionContext) keepOnlyLogs() error {
	entries, err := os.ReadDir(ac.state)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		if e.Name() != "logs" {
			errs = append(errs, os.RemoveAll(filepath.Join(ac.state, e.Name())))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	ac.log.Printf("logs of the failed start are in %s", filepath.Join(ac.state, "logs"))
	return nil
}

// warnEnvDiffers says which settings the caller's environment asks for
// that the running cluster does not have.
func (ac *actionContext) warnEnvDiffers() {
	if !ac.recorded {
		return
	}
	recorded := ac.cluster.Settings()
	for _, name := range localcluster.TunableNames {
		if v := ac.getenv(name); v != "" && v != recorded[name] {
			ac.log.Printf("note: the running cluster has %s=%s (asked for %s); run 'hack/cluster.sh down' first to change it", name, recorded[name], v)
		}
	}
}
