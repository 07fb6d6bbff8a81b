package framework

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func startShell(t *testing.T, script string) *Process {
	t.Helper()
	p, err := StartProcess(ProcessSpec{
		Name: "sh", Path: "/bin/sh", Args: []string{"-c", script},
		Env: []string{"GREETING=hello from env"}, LogDir: t.TempDir(), Grace: 500 * time.Millisecond,
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Kill9() })
	return p
}

// logContains looks for s in the process output, not in the "=== " markers
// (the start marker repeats the command line).
func logContains(p *Process, s string) Condition {
	return func(context.Context) (bool, string, error) {
		tail := p.Tail(20)
		for _, line := range strings.Split(tail, "\n") {
			if !strings.HasPrefix(line, "=== ") && strings.Contains(line, s) {
				return true, tail, nil
			}
		}
		return false, tail, nil
	}
}

func TestProcessCapturesOutputAndStops(t *testing.T) {
	t.Parallel()
	p := startShell(t, `echo "$GREETING"; echo to-stderr >&2; exec sleep 30`)
	WaitFor(t, 5*time.Second, "output in the log", logContains(p, "to-stderr"))
	require.Contains(t, p.Tail(10), "hello from env")

	exited, _ := p.Exited()
	require.False(t, exited)
	require.NoError(t, p.Stop())
	exited, _ = p.Exited()
	require.True(t, exited)
	require.Contains(t, p.Tail(1), "exited")
	require.Contains(t, p.Tail(1), "terminated")
}

func TestProcessStopKillsWhatIgnoresTERM(t *testing.T) {
	t.Parallel()
	p := startShell(t, `trap '' TERM; echo ready; while :; do sleep 0.05; done`)
	WaitFor(t, 5*time.Second, "the TERM trap in place", logContains(p, "ready"))
	start := time.Now()
	err := p.Stop()
	require.ErrorContains(t, err, "was killed")
	require.GreaterOrEqual(t, time.Since(start), 500*time.Millisecond, "waits Grace before killing")
}

func TestProcessStopReportsACrash(t *testing.T) {
	t.Parallel()
	p := startShell(t, `echo boom; exit 3`)
	WaitFor(t, 5*time.Second, "the process to exit", func(context.Context) (bool, string, error) {
		exited, err := p.Exited()
		return exited, fmt.Sprint(err), nil
	})
	require.ErrorContains(t, p.Stop(), "exit status 3")
}

func TestProcessKill9AndRestart(t *testing.T) {
	t.Parallel()
	p := startShell(t, `echo "run $$"; exec sleep 30`)
	first := p.PID()
	WaitFor(t, 5*time.Second, "first run", logContains(p, fmt.Sprintf("run %d", first)))

	require.NoError(t, p.Kill9())
	exited, err := p.Exited()
	require.True(t, exited)
	require.ErrorContains(t, err, "killed")
	require.ErrorIs(t, processAlive(first), os.ErrProcessDone)

	require.NoError(t, p.Restart(), "restarting after our own Kill9 is no crash")
	second := p.PID()
	require.NotEqual(t, first, second)
	WaitFor(t, 5*time.Second, "second run", logContains(p, fmt.Sprintf("run %d", second)))
	log, err := os.ReadFile(p.LogPath())
	require.NoError(t, err)
	require.Equal(t, 2, strings.Count(string(log), "=== sh start #"), "both runs append to one log")
	require.NoError(t, p.Stop())
}

func TestTail(t *testing.T) {
	t.Parallel()
	p := startShell(t, `i=1; while [ $i -le 1000 ]; do echo "line $i"; i=$((i+1)); done`)
	WaitFor(t, 5*time.Second, "all lines", func(context.Context) (bool, string, error) {
		exited, _ := p.Exited()
		return exited, "", nil
	})
	lines := strings.Split(p.Tail(3), "\n")
	require.Len(t, lines, 3)
	require.Equal(t, "line 999", lines[0])
	require.Equal(t, "line 1000", lines[1])
	require.Contains(t, lines[2], "=== sh (pid")
	require.Len(t, strings.Split(p.Tail(5000), "\n"), 1002, "start marker, 1000 lines, exit marker")
}

// processAlive returns os.ErrProcessDone once pid is gone.
func processAlive(pid int) error {
	proc, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	return proc.Signal(syscallZero)
}
