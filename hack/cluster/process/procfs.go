package process

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"syscall"
	"time"
)

// Alive is false for a process that is gone or whose threads are all
// zombies. The thread group leader can be a zombie while other threads
// still exit: they hold the process's files and sockets until the last is
// done, and a successor then fails to bind its port (seen with
// kube-apiserver after SIGKILL).
func Alive(pid int) bool {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, t := range tasks {
		stat, err := os.ReadFile(dir + "/" + t.Name() + "/stat")
		if err != nil {
			continue // that thread is gone
		}
		// the state follows the command name in parentheses
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 || i+2 >= len(stat) || stat[i+2] != 'Z' {
			return true
		}
	}
	return false
}

// CommandLine is a process's arguments, NUL-separated ("" once it is gone
// or while it exits).
func CommandLine(pid int) ([]byte, error) {
	return os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
}

// KillMatching sends SIGKILL to every process (but this one) whose command
// line matches and waits until they are gone.
func KillMatching(match func(cmdline []byte) bool) error {
	pids, err := Find(func(pid int) bool {
		cmdline, err := CommandLine(pid)
		return err == nil && match(cmdline)
	})
	if err != nil {
		return err
	}
	return KillAndWait(pids)
}

// Find lists the processes (but this one) match accepts.
func Find(match func(pid int) bool) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		if match(pid) {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// KillAndWait sends SIGKILL to pids and waits up to 10 s until none is
// alive.
func KillAndWait(pids []int) error {
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range pids {
		for Alive(pid) {
			if time.Now().After(deadline) {
				return fmt.Errorf("process %d still runs 10s after SIGKILL", pid)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return nil
}

// KeepInheritedFilesToOurselves marks every file descriptor this process
// inherited beyond stdin, stdout and stderr close-on-exec: the processes it
// starts would otherwise hold, say, a lock the caller took (hack/cluster.sh's,
// or `flock` around a test run) for as long as they run.
func KeepInheritedFilesToOurselves() {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range entries {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			syscall.CloseOnExec(fd)
		}
	}
}

// Tail is the last n lines of a file, for messages; it reads at most the
// last 256 KiB.
func Tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	defer func() { _ = f.Close() }()
	const window = 256 << 10
	if info, err := f.Stat(); err == nil && info.Size() > window {
		_, _ = f.Seek(-window, io.SeekEnd)
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// WaitFor polls check every 100 ms until it returns nil, ctx ends or
// timeout passes; the error names what and the last failure seen. A check
// that returns StopWaiting ends it at once.
func WaitFor(ctx context.Context, timeout time.Duration, what string, check func() error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		err := check()
		if err == nil {
			return nil
		}
		var stop StopWaiting
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

// StopWaiting ends a WaitFor at once (e.g. the process being waited on died).
type StopWaiting struct{ Err error }

func (s StopWaiting) Error() string { return s.Err.Error() }
func (s StopWaiting) Unwrap() error { return s.Err }
