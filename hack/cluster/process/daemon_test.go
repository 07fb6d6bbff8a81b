//go:build linux

package process

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testDaemon is a shell loop whose command line ends with its identity
// (a file below the state directory, the mark); trapTerm is what it does
// on SIGTERM.
func testDaemon(t *testing.T, state, name, trapTerm string) Daemon {
	t.Helper()
	return Daemon{
		Spec: Spec{
			Name: name, Path: "/bin/sh",
			Args:   []string{"-c", "trap '" + trapTerm + "' TERM; echo up; while :; do sleep 0.05; done", name, filepath.Join(state, name+".conf")},
			LogDir: filepath.Join(state, "logs"), Grace: 300 * time.Millisecond,
		},
		Identity: filepath.Join(state, name+".conf"),
	}
}

func testDaemons(t *testing.T) (Daemons, string) {
	state := t.TempDir()
	return Daemons{PIDDir: filepath.Join(state, "pids"), Mark: state + "/"}, state
}

// startLoop starts a testDaemon named loop in a state directory of its own
// and returns the runner, the daemon and the PID the runner recorded.
func startLoop(t *testing.T, trapTerm string) (Daemons, Daemon, int) {
	t.Helper()
	d, state := testDaemons(t)
	dm := testDaemon(t, state, "loop", trapTerm)
	require.NoError(t, d.Start(dm))
	pid, ok := d.PID("loop")
	require.True(t, ok, "the recorded PID is ours")
	return d, dm, pid
}

func TestDaemonStartStop(t *testing.T) {
	for _, tc := range []struct {
		name     string
		trapTerm string
		killed   bool
	}{
		{name: "exits on SIGTERM", trapTerm: "exit 0"},
		{name: "ignores SIGTERM: killed after the grace", trapTerm: "", killed: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, dm, pid := startLoop(t, tc.trapTerm)
			t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
			require.NoError(t, d.CheckAlive(dm))
			// its trap is set once it said so (the start marker holds the
			// script, so the line must be the word alone)
			require.NoError(t, WaitFor(t.Context(), 5*time.Second, "its output", func() error {
				if !slices.Contains(strings.Split(Tail(dm.LogPath(), 5), "\n"), "up") {
					return os.ErrNotExist
				}
				return nil
			}))
			assert.Contains(t, Tail(dm.LogPath(), 5), "=== loop start at ", "the start is marked")

			require.NoError(t, d.Stop(dm))
			assert.False(t, Alive(pid), "gone (or a zombie) once Stop returns")
			// it is this test's child: its end says how it ended
			var ws syscall.WaitStatus
			_, err := syscall.Wait4(pid, &ws, 0, nil)
			require.NoError(t, err)
			assert.Equal(t, tc.killed, ws.Signaled() && ws.Signal() == syscall.SIGKILL, "killed: %v (status %v)", tc.killed, ws)
			assert.NoFileExists(t, filepath.Join(d.PIDDir, "loop.pid"))
			err = d.CheckAlive(dm)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "loop exited")
			assert.Contains(t, err.Error(), "up", "with the end of its log")
			require.NoError(t, d.Stop(dm), "stopping what is not running is no error")
		})
	}
}

func TestDaemonKillAndStart(t *testing.T) {
	d, dm, first := startLoop(t, "")
	require.NoError(t, d.Kill(dm))
	assert.False(t, Alive(first))
	require.NoError(t, d.Start(dm))
	second, ok := d.PID("loop")
	require.True(t, ok)
	assert.NotEqual(t, first, second)
	require.NoError(t, d.Stop(dm))
	assert.Equal(t, 2, strings.Count(Tail(dm.LogPath(), 20), "=== loop start"), "both runs in one log")
}

// A copy no PID file names (a run killed between start and record) goes
// with Stop; a process the PID file names that is not ours (a reused PID)
// is never signalled.
func TestDaemonStopKillsStrayCopiesOnly(t *testing.T) {
	d, dm, stray := startLoop(t, "")
	require.NoError(t, os.Remove(filepath.Join(d.PIDDir, "loop.pid")))

	other := exec.Command("sleep", "30")
	require.NoError(t, other.Start())
	t.Cleanup(func() { _ = other.Process.Kill(); _ = other.Wait() })
	require.NoError(t, os.WriteFile(filepath.Join(d.PIDDir, "loop.pid"), []byte(strconv.Itoa(other.Process.Pid)+"\n"), 0o644))
	_, ok := d.PID("loop")
	assert.False(t, ok, "a process without the mark is not ours")

	require.NoError(t, d.Stop(dm))
	assert.False(t, Alive(stray), "the stray copy was killed")
	assert.True(t, Alive(other.Process.Pid), "the other process runs on")
}

func TestDaemonWithoutIdentityIsRefused(t *testing.T) {
	d, state := testDaemons(t)
	dm := testDaemon(t, state, "loop", "")
	dm.Identity = ""
	assert.ErrorContains(t, d.Stop(dm), "names no configuration file")
	assert.ErrorContains(t, Daemons{}.Start(Daemon{Spec: Spec{Name: "x"}}), "lacks a name, a path or a log directory")
}
