package process

import (
	"errors"
	"fmt"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// Child is a running (or exited) child of this process, e.g. a test's
// manager. Restarts append to the same log; every start and exit is marked
// in it with a "=== " line.
type Child struct {
	spec Spec

	mu        sync.Mutex
	cmd       *exec.Cmd
	done      chan struct{} // closed when the current run has exited
	exit      error         // result of Wait of the current run
	signalled bool          // we signalled the current run (its end is no crash)
	starts    int
}

// StartChild starts the program spec describes (Grace defaults to 10 s).
func StartChild(spec Spec) (*Child, error) {
	if spec.Grace == 0 {
		spec.Grace = 10 * time.Second
	}
	p := &Child{spec: spec}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p, p.startLocked()
}

func (p *Child) startLocked() error {
	p.starts++
	cmd, logFile, err := p.spec.command(p.starts)
	if err != nil {
		return err
	}
	cmd.SysProcAttr = childAttr()
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(logFile, "=== %s could not start: %v\n", p.spec.Name, err)
		_ = logFile.Close()
		return fmt.Errorf("start %s: %w", p.spec.Name, err)
	}
	done := make(chan struct{})
	p.cmd, p.done, p.exit, p.signalled = cmd, done, nil, false
	go func() {
		err := cmd.Wait()
		fmt.Fprintf(logFile, "=== %s (pid %d) exited at %s: %s\n", p.spec.Name, cmd.Process.Pid, time.Now().Format(time.RFC3339Nano), cmd.ProcessState)
		_ = logFile.Close()
		p.mu.Lock()
		if p.cmd == cmd {
			p.exit = err
		}
		p.mu.Unlock()
		close(done)
	}()
	return nil
}

// PID of the current run.
func (p *Child) PID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd.Process.Pid
}

// Name names the log file and messages.
func (p *Child) Name() string { return p.spec.Name }

// LogPath is the file that collects the output.
func (p *Child) LogPath() string { return p.spec.LogPath() }

// Exited reports whether the current run has ended, and how (nil: exit code 0).
func (p *Child) Exited() (bool, error) {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	select {
	case <-done:
		p.mu.Lock()
		defer p.mu.Unlock()
		return true, p.exit
	default:
		return false, nil
	}
}

// Stop sends SIGTERM, waits up to the grace, then SIGKILL. It returns an
// error when the process had already exited on its own with a failure (a
// crash the caller should notice) or when it had to be killed. Stopping an
// exited process that we signalled before (e.g. Kill9) is no error.
func (p *Child) Stop() error {
	return p.signalAndWait(syscall.SIGTERM, p.spec.Grace)
}

// Kill9 kills the process with SIGKILL, as a crash would, and waits for it.
func (p *Child) Kill9() error {
	return p.signalAndWait(syscall.SIGKILL, 0)
}

// Restart stops the process (see Stop) and starts it again with the same
// spec, appending to the same log. A failed stop is reported but the
// process is started anyway.
func (p *Child) Restart() error {
	stopErr := p.Stop()
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.startLocked(); err != nil {
		return errors.Join(stopErr, err)
	}
	return stopErr
}

func (p *Child) signalAndWait(sig syscall.Signal, timeout time.Duration) error {
	p.mu.Lock()
	cmd, done, signalled := p.cmd, p.done, p.signalled
	p.signalled = true
	p.mu.Unlock()
	select {
	case <-done:
		if _, err := p.Exited(); err != nil && !signalled {
			return fmt.Errorf("%s had already exited: %w", p.spec.Name, err)
		}
		return nil
	default:
	}
	_ = cmd.Process.Signal(sig)
	if sig != syscall.SIGKILL {
		select {
		case <-done:
			return nil
		case <-time.After(timeout):
			_ = cmd.Process.Kill()
			<-done
			return fmt.Errorf("%s did not exit within %s of %s and was killed", p.spec.Name, timeout, sig)
		}
	}
	<-done
	return nil
}

// Tail returns the last n lines of the log.
func (p *Child) Tail(n int) string { return Tail(p.LogPath(), n) }
