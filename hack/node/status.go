package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/kyma-project/serverless-manager/hack/cluster/process"
)

// readyMarker is written once a start has completed (start, cluster.go).
func (c config) readyMarker() string { return filepath.Join(c.state, "ready") }

func (ac *actionContext) apiServerReady() error {
	out, err := ac.kubectl("get", "--raw=/readyz")
	if err != nil {
		return err
	}
	if s := strings.TrimSpace(string(out)); s != "ok" {
		return fmt.Errorf("/readyz says %q", s)
	}
	return nil
}

func (ac *actionContext) realNodeReady() error {
	out, err := ac.kubectl("get", "node", ac.name, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
	if err != nil {
		return err
	}
	if s := strings.TrimSpace(string(out)); s != "True" {
		return fmt.Errorf("node %s is not Ready (Ready=%q)", ac.name, s)
	}
	return nil
}

// waitRealNodeReady waits until the real node is Ready, failing at once
// when kubelet has exited.
func (ac *actionContext) waitRealNodeReady(ctx context.Context) error {
	return waitFor(ctx, 60*time.Second, "node "+ac.name+" Ready", func() error {
		if err := ac.checkAlive("kubelet"); err != nil {
			return process.StopWaiting{Err: err}
		}
		return ac.realNodeReady()
	})
}

// status writes every daemon's state, the API server's readiness and the
// nodes to w; the error says what is unhealthy.
func (ac *actionContext) status(w io.Writer) error {
	var errs []error
	for _, d := range ac.allDaemons() {
		if pid, ok := ac.daemonPID(d.name); ok {
			fmt.Fprintf(w, "%-24s running (pid %d)\n", d.name, pid)
		} else {
			fmt.Fprintf(w, "%-24s NOT running\n", d.name)
			errs = append(errs, fmt.Errorf("%s is not running", d.name))
		}
	}
	if err := ac.apiServerReady(); err != nil {
		fmt.Fprintln(w, "kube-apiserver /readyz   NOT ok")
		return errors.Join(append(errs, err)...)
	}
	fmt.Fprintf(w, "kube-apiserver /readyz   ok (https://%s:%d)\n", ac.gateway(), ac.apiServerPort)
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	cmd := ac.kubectlCommand("get", "nodes", "-o", "wide")
	cmd.Stdout, cmd.Stderr = w, os.Stderr
	if err := cmd.Run(); err != nil {
		errs = append(errs, fmt.Errorf("kubectl get nodes: %w", err))
	}
	if err := ac.simulatedNodesReady(); err != nil {
		fmt.Fprintf(w, "fewer than %d simulated nodes are Ready\n", ac.nodes)
		errs = append(errs, err)
	}
	if err := ac.realNodeReady(); err != nil {
		fmt.Fprintf(w, "node %s is not Ready\n", ac.name)
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// healthy says whether a completed start runs as it should: no output.
func (ac *actionContext) healthy() error {
	if _, err := os.Stat(ac.readyMarker()); err != nil {
		return fmt.Errorf("no completed start: %w", err)
	}
	return ac.status(io.Discard)
}
