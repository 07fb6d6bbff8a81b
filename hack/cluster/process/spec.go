package process

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Spec says how to run a program.
type Spec struct {
	// Name names its log file (<LogDir>/<Name>.log), its PID file and
	// messages.
	Name string
	// Path is the binary.
	Path string
	Args []string
	// Env is added to this process's environment; OnlyEnv makes it the
	// whole environment, as a container gets it.
	Env     []string
	OnlyEnv bool
	// Dir is the working directory (default: this process's).
	Dir string
	// LogDir holds the log file.
	LogDir string
	// Grace is how long a stop waits after SIGTERM before SIGKILL.
	Grace time.Duration
}

// LogPath is the file that collects the output of every run.
func (s Spec) LogPath() string { return filepath.Join(s.LogDir, s.Name+".log") }

// command opens the log (appended: a restarted program keeps what it
// logged before), marks the start in it (with run, the how-manieth, when
// known) and returns the command and the
// open log, which the caller closes once the program has started (a
// Daemon) or ended (a Child).
func (s Spec) command(run int) (*exec.Cmd, *os.File, error) {
	if s.Name == "" || s.Path == "" || s.LogDir == "" {
		return nil, nil, fmt.Errorf("process spec %+v lacks a name, a path or a log directory", s)
	}
	if err := os.MkdirAll(s.LogDir, 0o755); err != nil {
		return nil, nil, err
	}
	logFile, err := os.OpenFile(s.LogPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, nil, err
	}
	cmd := exec.Command(s.Path, s.Args...)
	cmd.Dir = s.Dir
	cmd.Env = append(os.Environ(), s.Env...)
	if s.OnlyEnv {
		cmd.Env = append([]string{}, s.Env...)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	which := s.Name + " start"
	if run > 0 {
		which += " #" + strconv.Itoa(run)
	}
	fmt.Fprintf(logFile, "=== %s at %s: %s %s\n", which, time.Now().Format(time.RFC3339Nano), s.Path, strings.Join(s.Args, " "))
	return cmd, logFile, nil
}
