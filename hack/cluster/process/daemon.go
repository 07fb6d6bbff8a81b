package process

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Daemons runs programs that outlive the one that starts them: each in its
// own session, its PID in <PIDDir>/<Name>.pid. A recorded PID counts only
// while the process's command line holds Mark (the cluster's state
// directory): a PID the kernel reused for another program is never
// signalled.
type Daemons struct {
	PIDDir string
	Mark   string
}

// Daemon is a program Daemons runs; Identity is one of its arguments (a
// configuration file), which tells a copy of it that no PID file names
// (left by a run killed between start and record) from any other process.
type Daemon struct {
	Spec
	Identity string
}

func (d Daemons) pidFile(name string) string { return filepath.Join(d.PIDDir, name+".pid") }

// Start runs the daemon detached (own session, no terminal, output
// appended to its log) and records its PID.
func (d Daemons) Start(dm Daemon) error {
	cmd, logFile, err := dm.command(0)
	if err != nil {
		return err
	}
	defer func() { _ = logFile.Close() }()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", dm.Name, err)
	}
	pid := cmd.Process.Pid
	// No Wait: the process outlives us; whether it still runs is
	// CheckAlive's to tell.
	_ = cmd.Process.Release()
	awaitExec(pid)
	if err := os.MkdirAll(d.PIDDir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(d.pidFile(dm.Name), []byte(strconv.Itoa(pid)+"\n"), 0o644)
}

// Ours says pid is alive and holds the mark on its command line.
func (d Daemons) Ours(pid int) bool {
	cmdline, err := CommandLine(pid)
	return err == nil && bytes.Contains(cmdline, []byte(d.Mark))
}

// exiting is true until a process of ours has finished exiting. The kernel
// drops a process's memory, and so its command line, before its files:
// until it is a zombie it may still hold its sockets, which its successor
// would fail to bind.
func (d Daemons) exiting(pid int) bool {
	if !Alive(pid) {
		return false
	}
	cmdline, err := CommandLine(pid)
	return err == nil && (len(cmdline) == 0 || bytes.Contains(cmdline, []byte(d.Mark)))
}

// PID is the recorded PID of the daemon name while that process is ours.
func (d Daemons) PID(name string) (int, bool) {
	data, err := os.ReadFile(d.pidFile(name))
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || !d.Ours(pid) {
		return 0, false
	}
	return pid, true
}

// awaitExec returns once pid runs its new program, or is gone. cmd.Start
// returns when the kernel closes the exec pipe, which it does before it
// lays out the new program's arguments: until then /proc/<pid>/cmdline
// reads empty and the process would not look like ours.
func awaitExec(pid int) {
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		if cmdline, err := CommandLine(pid); err != nil || len(cmdline) > 0 || !Alive(pid) {
			return
		}
	}
}

// CheckAlive fails with the end of its log when the daemon has exited.
func (d Daemons) CheckAlive(dm Daemon) error {
	if _, ok := d.PID(dm.Name); ok {
		return nil
	}
	return fmt.Errorf("%s exited (%s); the end of %s:\n%s", dm.Name, d.pidState(dm.Name), dm.LogPath(), Tail(dm.LogPath(), 20))
}

// pidState says what became of a daemon's recorded process, for messages.
func (d Daemons) pidState(name string) string {
	data, err := os.ReadFile(d.pidFile(name))
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

// Stop sends SIGTERM and, after the grace, SIGKILL; it returns once the
// process is gone (or was never there). A copy that no PID file names is
// killed too.
func (d Daemons) Stop(dm Daemon) error {
	return d.signal(dm, syscall.SIGTERM, dm.Grace)
}

// Kill kills the daemon with SIGKILL, as a crash would, and returns once
// it has let go of its files and sockets.
func (d Daemons) Kill(dm Daemon) error {
	return d.signal(dm, syscall.SIGKILL, 0)
}

func (d Daemons) signal(dm Daemon, sig syscall.Signal, grace time.Duration) error {
	if dm.Identity == "" {
		// nothing would tell its processes from any other's
		return fmt.Errorf("daemon %s names no configuration file", dm.Name)
	}
	defer func() {
		_ = KillMatching(func(cmdline []byte) bool { return bytes.Contains(cmdline, []byte(dm.Identity+"\x00")) })
	}()
	pid, ok := d.PID(dm.Name)
	if !ok {
		return removeIfExists(d.pidFile(dm.Name))
	}
	_ = syscall.Kill(pid, sig)
	deadline := time.Now().Add(grace)
	for d.exiting(pid) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return removeIfExists(d.pidFile(dm.Name))
}

// Restart stops the daemon (SIGTERM, as a service manager does) and starts
// it again.
func (d Daemons) Restart(dm Daemon) error {
	if err := d.Stop(dm); err != nil {
		return err
	}
	return d.Start(dm)
}

// WaitServing waits until ready says the daemon serves, and fails at once
// when it has exited.
func (d Daemons) WaitServing(ctx context.Context, dm Daemon, timeout time.Duration, what string, ready func() error) error {
	return WaitFor(ctx, timeout, what, func() error {
		if err := d.CheckAlive(dm); err != nil {
			return StopWaiting{err}
		}
		return ready()
	})
}

func removeIfExists(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}
