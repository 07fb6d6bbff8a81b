package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// daemon is a long-running process of the node.
type daemon struct {
	// name is its component name (log and PID file).
	name, path string
	args       []string
	// config is its configuration file: one of args, below the node's
	// directory, which tells its process from any other.
	config string
	// grace is how long it may take to stop after SIGTERM.
	grace time.Duration
}

// start runs the daemon detached (own session, no terminal, output
// appended to its log) and records its PID where hack/cluster.sh's status
// and down look.
func (n *node) start(d daemon) error {
	logFile, err := os.OpenFile(n.logFile(d.name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer func() { _ = logFile.Close() }()
	component, path, args := d.name, d.path, d.args
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", component, err)
	}
	pid := cmd.Process.Pid
	// No Wait: the process outlives us. Whether it is still running is
	// checkAlive's to tell.
	_ = cmd.Process.Release()
	return os.WriteFile(n.pidFile(component), []byte(strconv.Itoa(pid)+"\n"), 0o644)
}

// ours says pid is alive and runs with the state directory on its command
// line.
func (n *node) ours(pid int) bool {
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	return err == nil && bytes.Contains(cmdline, []byte(n.state+"/"))
}

// daemonPID is the recorded PID of component while that process is ours.
func (n *node) daemonPID(component string) (int, bool) {
	data, err := os.ReadFile(n.pidFile(component))
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || !n.ours(pid) {
		return 0, false
	}
	return pid, true
}

// checkAlive fails with the end of its log when component has exited. A
// recorded process counts as exited only when two looks 200 ms apart find
// it gone: under load a single read of /proc/<pid>/cmdline has come back
// without the state directory while the process was running (state R).
func (n *node) checkAlive(component string) error {
	for i := range 2 {
		if _, ok := n.daemonPID(component); ok {
			return nil
		}
		if i == 0 {
			time.Sleep(200 * time.Millisecond)
		}
	}
	return fmt.Errorf("%s exited (%s); the end of %s:\n%s", component, n.pidState(component), n.logFile(component), tail(n.logFile(component), 20))
}

// pidState says what became of a daemon's recorded process, for messages.
func (n *node) pidState(component string) string {
	data, err := os.ReadFile(n.pidFile(component))
	if err != nil {
		return "no PID file: " + err.Error()
	}
	pid := strings.TrimSpace(string(data))
	stat, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return "PID " + pid + " is gone"
	}
	cmdline, _ := os.ReadFile("/proc/" + pid + "/cmdline")
	return fmt.Sprintf("PID %s: %.60s, command line %q", pid, stat, bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '}))
}

// stop sends SIGTERM and, after its grace, SIGKILL; it returns once the
// process is gone (or was never there). A copy of it that no PID file
// names (left by a run killed between start and record) is killed too: it
// names the daemon's configuration file on its command line.
func (n *node) stop(d daemon) error {
	component, grace := d.name, d.grace
	if d.config == "" {
		// nothing would tell its processes from any other's
		return fmt.Errorf("daemon %s names no configuration file", component)
	}
	defer func() {
		_ = killProcesses(func(cmdline []byte) bool { return bytes.Contains(cmdline, []byte(d.config+"\x00")) })
	}()
	pid, ok := n.daemonPID(component)
	if !ok {
		_ = os.Remove(n.pidFile(component))
		return nil
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	deadline := time.Now().Add(grace)
	for n.exiting(pid) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return os.Remove(n.pidFile(component))
}

// exiting is true until a process of ours has finished exiting. The kernel
// drops a process's memory, and so its command line, before its files:
// until it is a zombie it may still hold its sockets, which its successor
// would fail to bind.
func (n *node) exiting(pid int) bool {
	if !alive(pid) {
		return false
	}
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	return err == nil && (len(cmdline) == 0 || bytes.Contains(cmdline, []byte(n.state+"/")))
}

// alive is false for a process that is gone or a zombie.
func alive(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// the state follows the command name in parentheses
	i := bytes.LastIndexByte(stat, ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] != 'Z'
}

// waitFor polls check every interval until it returns nil, ctx ends or
// timeout passes; the error names what and the last failure seen.
func waitFor(ctx context.Context, timeout time.Duration, what string, check func() error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		err := check()
		if err == nil {
			return nil
		}
		var stop stopWaiting
		if errors.As(err, &stop) {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: gave up after %s; last seen: %w", what, timeout, err)
		case <-tick.C:
		}
	}
}

// stopWaiting ends a waitFor at once (e.g. the process being waited on died).
type stopWaiting struct{ error }

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

// tail is the last lines of a file, for error messages.
func tail(path string, lines int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	all := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return strings.Join(all[max(0, len(all)-lines):], "\n")
}

// restart stops a daemon of the node gracefully and starts it again, as a
// service manager restarts it: the Pods' containers and their shims run on.
func (n *node) restart(ctx context.Context, name string) error {
	switch name {
	case "kube-apiserver":
		return n.restartAPIServer(ctx)
	case "kubelet":
		if err := n.stop(n.kubeletDaemon()); err != nil {
			return err
		}
		return n.start(n.kubeletDaemon())
	case "containerd":
		if err := n.stop(n.containerdDaemon()); err != nil {
			return err
		}
		return n.startContainerd(ctx)
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
