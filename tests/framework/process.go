package framework

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/kyma-project/serverless-manager/operator/pkg/repo"
)

// ProcessSpec says how to run a process, e.g. bin/manager.
type ProcessSpec struct {
	// Name names the log file (<LogDir>/<Name>.log) and messages.
	Name string
	// Path is the binary.
	Path string
	Args []string
	// Env is added to the test's environment.
	Env []string
	// OnlyEnv makes Env the whole environment, as a container gets it.
	OnlyEnv bool
	// Dir is the working directory (default: the test's).
	Dir string
	// LogDir defaults to tests/.artifacts/logs in the repository.
	LogDir string
	// StopTimeout is how long Stop waits after SIGTERM before SIGKILL (default 10s).
	StopTimeout time.Duration
}

// Process is a running (or exited) process whose stdout and stderr go to a
// log file. Restarts append to the same file; every start and exit is marked
// in it with a "=== " line.
type Process struct {
	spec    ProcessSpec
	logPath string

	mu        sync.Mutex
	cmd       *exec.Cmd
	done      chan struct{} // closed when the current run has exited
	exit      error         // result of Wait of the current run
	signalled bool          // we signalled the current run (its end is no crash)
	starts    int
}

// StartProcess starts the process described by spec.
func StartProcess(spec ProcessSpec) (*Process, error) {
	if spec.Name == "" {
		spec.Name = filepath.Base(spec.Path)
	}
	if spec.StopTimeout == 0 {
		spec.StopTimeout = 10 * time.Second
	}
	if spec.LogDir == "" {
		root, err := repo.Root()
		if err != nil {
			return nil, err
		}
		spec.LogDir = filepath.Join(root, "tests", ".artifacts", "logs")
	}
	if err := os.MkdirAll(spec.LogDir, 0o755); err != nil {
		return nil, err
	}
	p := &Process{spec: spec, logPath: filepath.Join(spec.LogDir, spec.Name+".log")}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p, p.startLocked()
}

func (p *Process) startLocked() error {
	logFile, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(p.spec.Path, p.spec.Args...)
	cmd.Dir = p.spec.Dir
	cmd.Env = append(os.Environ(), p.spec.Env...)
	if p.spec.OnlyEnv {
		cmd.Env = append([]string{}, p.spec.Env...)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = sysProcAttr()
	p.starts++
	fmt.Fprintf(logFile, "=== %s start #%d at %s: %s %s\n", p.spec.Name, p.starts, time.Now().Format(time.RFC3339Nano), p.spec.Path, strings.Join(p.spec.Args, " "))
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(logFile, "=== %s could not start: %v\n", p.spec.Name, err)
		logFile.Close()
		return fmt.Errorf("start %s: %w", p.spec.Name, err)
	}
	done := make(chan struct{})
	p.cmd, p.done, p.exit, p.signalled = cmd, done, nil, false
	go func() {
		err := cmd.Wait()
		fmt.Fprintf(logFile, "=== %s (pid %d) exited at %s: %s\n", p.spec.Name, cmd.Process.Pid, time.Now().Format(time.RFC3339Nano), cmd.ProcessState)
		logFile.Close()
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
func (p *Process) PID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd.Process.Pid
}

// LogPath is the file that collects the process output.
func (p *Process) LogPath() string { return p.logPath }

// Exited reports whether the current run has ended, and how (nil: exit code 0).
func (p *Process) Exited() (bool, error) {
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

// Stop sends SIGTERM, waits up to StopTimeout, then SIGKILL. It returns an
// error when the process had already exited on its own with a failure (a
// crash the test should notice) or when it had to be killed. Stopping an
// exited process that we signalled before (e.g. Kill9) is no error.
func (p *Process) Stop() error {
	return p.signalAndWait(syscall.SIGTERM, p.spec.StopTimeout)
}

// Kill9 kills the process with SIGKILL, as a crash would, and waits for it.
func (p *Process) Kill9() error {
	return p.signalAndWait(syscall.SIGKILL, 0)
}

// Restart stops the process (see Stop) and starts it again with the same
// spec, appending to the same log file. A failed stop is reported but the
// process is started anyway.
func (p *Process) Restart() error {
	stopErr := p.Stop()
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.startLocked(); err != nil {
		return errors.Join(stopErr, err)
	}
	return stopErr
}

func (p *Process) signalAndWait(sig syscall.Signal, timeout time.Duration) error {
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

// Tail returns the last n lines of the log file.
func (p *Process) Tail(n int) string {
	f, err := os.Open(p.logPath)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", p.logPath, err)
	}
	defer f.Close()
	// read at most the last 256 KiB: enough for any sensible n
	const window = 256 << 10
	if info, err := f.Stat(); err == nil && info.Size() > window {
		_, _ = f.Seek(-window, io.SeekEnd)
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", p.logPath, err)
	}
	lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}
