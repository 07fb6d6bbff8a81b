package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/kyma-project/serverless-manager/hack/cluster/process"
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
// and the tests (hack/cluster/process): detached, output appended to
// .cluster/logs/<name>.log, PID in .cluster/pids/<name>.pid, recognised by
// the state directory on their command line.
func (c config) daemons() process.Daemons {
	return process.Daemons{PIDDir: filepath.Join(c.state, "pids"), Mark: c.state + "/"}
}

func (c config) proc(d daemon) process.Daemon {
	return process.Daemon{Spec: process.Spec{Name: d.name, Path: d.path, Args: d.args, LogDir: filepath.Join(c.state, "logs"), Grace: d.grace}, Identity: d.config}
}

func (c config) start(d daemon) error { return c.daemons().Start(c.proc(d)) }

func (c config) stop(d daemon) error { return c.daemons().Stop(c.proc(d)) }

// startConfigured writes d's configuration file, its config, and starts d.
func (c config) startConfigured(d daemon, content string) error {
	if err := os.MkdirAll(filepath.Dir(d.config), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(d.config, []byte(content), 0o644); err != nil {
		return err
	}
	return c.start(d)
}

// daemonPID is the recorded PID of component while that process is ours.
func (c config) daemonPID(component string) (int, bool) { return c.daemons().PID(component) }

// checkAlive fails with the end of its log when component has exited.
func (c config) checkAlive(component string) error {
	return c.daemons().CheckAlive(c.proc(daemon{name: component}))
}

// waitListening waits until addr takes connections, failing at once when
// component has exited; what names it in the error.
func (c config) waitListening(ctx context.Context, component, what, addr string) error {
	return waitFor(ctx, 30*time.Second, what+" at "+addr, func() error {
		if err := c.checkAlive(component); err != nil {
			return process.StopWaiting{Err: err}
		}
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return err
		}
		return conn.Close()
	})
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

// daemonAction is an action that runs one daemon of the cluster: status
// lists them, restart and down stop them by it.
type daemonAction interface {
	action
	daemon(ac *actionContext) daemon
}

// allDaemons are every daemon of the cluster, in the order of the actions
// that start them (the order status lists them in).
func (ac *actionContext) allDaemons() []daemon {
	var ds []daemon
	for _, a := range allActions() {
		if d, ok := a.(daemonAction); ok {
			ds = append(ds, d.daemon(ac))
		}
	}
	return ds
}

// restart stops a daemon of the node gracefully and starts it again, as a
// service manager restarts it: the Pods' containers and their shims run on.
func (ac *actionContext) restart(ctx context.Context, name string) error {
	switch name {
	case "kube-apiserver":
		if err := (apiServer{}).restart(ctx, ac); err != nil {
			return err
		}
		return ac.waitRealNodeReady(ctx)
	case "kubelet":
		if err := ac.daemons().Restart(ac.proc(kubelet{}.daemon(ac))); err != nil {
			return err
		}
		return ac.waitRealNodeReady(ctx)
	case "containerd":
		if err := ac.stop(containerd{}.daemon(ac)); err != nil {
			return err
		}
		if err := (containerd{}).start(ctx, ac); err != nil {
			return err
		}
		return ac.waitRealNodeReady(ctx)
	case "kube-proxy":
		return redo(ctx, ac, kubeProxy{})
	case "coredns":
		return redo(ctx, ac, coreDNS{})
	case "metrics-server":
		return redo(ctx, ac, metricsServer{})
	}
	return fmt.Errorf("restart: %q is none of kube-apiserver, kubelet, containerd, kube-proxy, coredns, metrics-server", name)
}

// redo runs an action's down and then its up: for kube-proxy and CoreDNS,
// down stops the daemon only (kube-proxy's rules stay), up writes the
// configuration and starts it again.
func redo(ctx context.Context, ac *actionContext, a action) error {
	if err := a.Down(ctx, ac); err != nil {
		return err
	}
	return a.Up(ctx, ac)
}
