package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/kyma-project/serverless-manager/hack/cluster/localcluster"
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
		if err := ac.down(context.Background(), ac.all); err != nil {
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
	if err := ac.up(ctx, ac.all); err != nil {
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

// Who uses the cluster: a test process registers itself in users/ (up
// -user PID) and leaves with release; owned-by-tests marks a cluster that
// tests started, which the last of them stops.
func (c config) usersDir() string     { return filepath.Join(c.state, "users") }
func (c config) ownedByTests() string { return filepath.Join(c.state, "owned-by-tests") }

// upCommand starts the cluster unless it runs healthy, records who asked
// for it, and prints how to reach it. A cluster a person asked for is
// never torn down by tests.
func (ac *actionContext) upCommand(ctx context.Context, user int) error {
	result, err := ac.startCluster(ctx)
	if err != nil {
		return fmt.Errorf("the cluster did not start: %w", err)
	}
	if user > 0 {
		if result == "started" {
			if err := os.WriteFile(ac.ownedByTests(), nil, 0o644); err != nil {
				return err
			}
		}
		if err := os.MkdirAll(ac.usersDir(), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(ac.usersDir(), strconv.Itoa(user)), nil, 0o644); err != nil {
			return err
		}
	} else if err := removeIfExists(ac.ownedByTests()); err != nil {
		return err
	}
	kubeconfig := filepath.Join(ac.state, "kubeconfig")
	ac.log.Printf("cluster is up: kubeconfig %s, logs in %s/", kubeconfig, filepath.Join(ac.state, "logs"))
	return ac.println("KUBECONFIG="+kubeconfig, "export KUBECONFIG="+kubeconfig)
}

// downCommand stops every process, undoes what the node did to this
// machine (also what a killed run left) and removes the state directory.
func (ac *actionContext) downCommand() error {
	if _, err := os.Stat(ac.state); errors.Is(err, os.ErrNotExist) {
		ac.log.Printf("no cluster state in %s, nothing to do", ac.state)
		return nil
	}
	if err := ac.teardown(); err != nil {
		return err
	}
	ac.log.Printf("stopped; removed %s", ac.state)
	return nil
}

// teardown runs every action's down and removes the state directory. An
// action whose down failed is reported, not fatal: the others have done
// their part, and the next up's cleanup tries again.
func (ac *actionContext) teardown() error {
	ac.log.Printf("stopping the cluster")
	if err := ac.down(context.Background(), ac.all); err != nil {
		ac.log.Printf("down reported errors (above); the next 'up' tries again")
	}
	return os.RemoveAll(ac.state)
}

// release unregisters the test process pid; the last live test process
// to release a cluster that tests started stops it, unless
// E2E_KEEP_CLUSTER=1.
func (ac *actionContext) release(pid string) error {
	if _, err := strconv.Atoi(pid); err != nil {
		return fmt.Errorf("release: %q is no process ID", pid)
	}
	if _, err := os.Stat(ac.state); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err := removeIfExists(filepath.Join(ac.usersDir(), pid)); err != nil {
		return err
	}
	live, err := liveUsers(ac.usersDir())
	if err != nil {
		return err
	}
	switch {
	case ac.getenv("E2E_KEEP_CLUSTER") == "1":
		ac.log.Printf("E2E_KEEP_CLUSTER=1: keeping the cluster; export KUBECONFIG=%s", filepath.Join(ac.state, "kubeconfig"))
	case len(live) > 0:
		ac.log.Printf("keeping the cluster: still used by test processes %s", strings.Join(live, " "))
	default:
		if _, err := os.Stat(ac.ownedByTests()); err != nil {
			ac.log.Printf("keeping the cluster: it was started by make cluster-up")
			return nil
		}
		if err := ac.teardown(); err != nil {
			return err
		}
		ac.log.Printf("stopped the cluster the tests started; removed %s", ac.state)
	}
	return nil
}

// liveUsers are the registered test processes that still run; the files
// of those that are gone are removed.
func liveUsers(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	var live []string
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil && pid > 0 && syscall.Kill(pid, 0) == nil {
			live = append(live, e.Name())
			continue
		}
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
			return nil, err
		}
	}
	return live, nil
}

// statusCommand prints the status and where the kubeconfig and the logs
// are; it fails when there is no cluster or it is unhealthy.
func (ac *actionContext) statusCommand() error {
	if err := ac.requireCluster(); err != nil {
		return err
	}
	err := ac.status(ac.out)
	return errors.Join(err, ac.println(fmt.Sprintf("kubeconfig: %s   logs: %s/", filepath.Join(ac.state, "kubeconfig"), filepath.Join(ac.state, "logs"))))
}

// requireCluster fails unless there is a cluster's state directory.
func (c config) requireCluster() error {
	if _, err := os.Stat(c.state); err != nil {
		return fmt.Errorf("no cluster in %s (run: make cluster-up): %w", c.state, err)
	}
	return nil
}

func (ac *actionContext) kubeconfigSACommand(ns, sa string) error {
	if err := ac.requireCluster(); err != nil {
		return err
	}
	file, err := ac.kubeconfigSA(ns, sa)
	if err != nil {
		return err
	}
	return ac.println(file)
}

// restartCommand restarts a daemon for fault tests (restart says how).
func (ac *actionContext) restartCommand(ctx context.Context, component string) error {
	if err := ac.requireCluster(); err != nil {
		return err
	}
	if err := ac.restart(ctx, component); err != nil {
		return err
	}
	ac.log.Printf("restarted %s", component)
	return nil
}

func (ac *actionContext) loadCommand(ctx context.Context) error {
	if err := ac.healthy(); err != nil {
		return fmt.Errorf("the cluster is not running (make cluster-up): %w", err)
	}
	return ac.load(ctx)
}
