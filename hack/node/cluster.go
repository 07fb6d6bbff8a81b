package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// startCluster brings the whole cluster up, unless a completed start runs
// as it should; it says which ("running" or "started"). What an unhealthy
// or killed earlier run left is undone first. A failed start is undone
// too, keeping only the logs for diagnosis; the next start begins afresh.
func (n *node) startCluster(ctx context.Context, getenv func(string) string) (string, error) {
	if err := n.healthy(); err == nil {
		n.log.Printf("already running and healthy (nodes: %d simulated and %s, API: https://%s:%d)", n.nodes, n.name, n.gateway(), n.apiServerPort)
		n.warnEnvDiffers(getenv)
		return "running", nil
	} else if _, statErr := os.Stat(n.state); statErr == nil {
		n.log.Printf("found a stopped or unhealthy cluster in %s (%v), cleaning it up", n.state, err)
		if err := n.down(context.Background(), n.allActions()); err != nil {
			return "", fmt.Errorf("cleaning up the earlier cluster: %w", err)
		}
		if err := os.RemoveAll(n.state); err != nil {
			return "", err
		}
		// its settings went with it: the caller's count now
		if err := n.config.complete(getenv); err != nil {
			return "", err
		}
	}
	if err := n.portsFree(); err != nil {
		return "", err
	}
	if err := n.writeConfig(); err != nil {
		return "", err
	}
	if err := n.up(ctx, n.allActions()); err != nil {
		return "", errors.Join(err, n.keepOnlyLogs())
	}
	if err := os.WriteFile(n.readyMarker(), nil, 0o644); err != nil {
		return "", err
	}
	return "started", nil
}

// keepOnlyLogs removes the state directory but for its logs.
func (n *node) keepOnlyLogs() error {
	entries, err := os.ReadDir(n.state)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		if e.Name() != "logs" {
			errs = append(errs, os.RemoveAll(filepath.Join(n.state, e.Name())))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	n.log.Printf("logs of the failed start are in %s", filepath.Join(n.state, "logs"))
	return nil
}
