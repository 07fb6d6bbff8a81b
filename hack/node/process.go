package main

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/kyma-project/serverless-manager/operator/pkg/process"
)

// daemon is a long-running process of the cluster.
type daemon struct {
	// name is its component name (log and PID file).
	name, path string
	args       []string
	// config is its configuration file: one of args, below the state
	// directory, which tells its process from any other.
	config string
	// grace is how long it may take to stop after SIGTERM.
	grace time.Duration
}

// The cluster's daemons run on the one process runner of the local cluster
// and the tests (operator/pkg/process): detached, output appended to
// .cluster/logs/<name>.log, PID in .cluster/pids/<name>.pid, recognised by
// the state directory on their command line.
func (n *node) daemons() process.Daemons {
	return process.Daemons{PIDDir: filepath.Join(n.state, "pids"), Mark: n.state + "/"}
}

func (n *node) proc(d daemon) process.Daemon {
	return process.Daemon{Spec: process.Spec{Name: d.name, Path: d.path, Args: d.args, LogDir: filepath.Join(n.state, "logs"), Grace: d.grace}, Identity: d.config}
}

func (n *node) start(d daemon) error { return n.daemons().Start(n.proc(d)) }

func (n *node) stop(d daemon) error { return n.daemons().Stop(n.proc(d)) }

// daemonPID is the recorded PID of component while that process is ours.
func (n *node) daemonPID(component string) (int, bool) { return n.daemons().PID(component) }

// checkAlive fails with the end of its log when component has exited.
func (n *node) checkAlive(component string) error {
	return n.daemons().CheckAlive(n.proc(daemon{name: component}))
}

func waitFor(ctx context.Context, timeout time.Duration, what string, check func() error) error {
	return process.WaitFor(ctx, timeout, what, check)
}

// run runs a command and returns its error with its output.
func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// output runs a command and returns its standard output.
func output(name string, args ...string) ([]byte, error) {
	cmd := exec.Command(name, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(stderr.Bytes()))
	}
	return out, nil
}

// restart stops a daemon of the node gracefully and starts it again, as a
// service manager restarts it: the Pods' containers and their shims run on.
func (n *node) restart(ctx context.Context, name string) error {
	switch name {
	case "kube-apiserver":
		if err := n.restartAPIServer(ctx); err != nil {
			return err
		}
		return n.waitRealNodeReady(ctx)
	case "kubelet":
		if err := n.daemons().Restart(n.proc(n.kubeletDaemon())); err != nil {
			return err
		}
		return n.waitRealNodeReady(ctx)
	case "containerd":
		if err := n.stop(n.containerdDaemon()); err != nil {
			return err
		}
		if err := n.startContainerd(ctx); err != nil {
			return err
		}
		return n.waitRealNodeReady(ctx)
	case "kube-proxy":
		return redo(ctx, n.kubeProxy())
	case "coredns":
		return redo(ctx, n.coreDNS())
	case "metrics-server":
		return redo(ctx, n.metricsServer())
	}
	return fmt.Errorf("restart: %q is none of kube-apiserver, kubelet, containerd, kube-proxy, coredns, metrics-server", name)
}

// redo runs an action's down and then its up: for kube-proxy and CoreDNS,
// down stops the daemon only (kube-proxy's rules stay), up writes the
// configuration and starts it again.
func redo(ctx context.Context, a action) error {
	if err := a.down(ctx); err != nil {
		return err
	}
	return a.up(ctx)
}
