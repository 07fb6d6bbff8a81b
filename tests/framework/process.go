package framework

import (
	"path/filepath"
	"time"

	"github.com/kyma-project/serverless-manager/hack/cluster/process"
	"github.com/kyma-project/serverless-manager/tests/support/repo"
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

// Process is a child of the test process, run by the runner the local
// cluster's daemons run on too (hack/cluster/process): its output goes to a
// log file, restarts append to it, every start and exit is marked in it
// with a "=== " line, and it dies with the test process.
type Process struct{ *process.Child }

// StartProcess starts the process described by spec.
func StartProcess(spec ProcessSpec) (*Process, error) {
	if spec.Name == "" {
		spec.Name = filepath.Base(spec.Path)
	}
	if spec.LogDir == "" {
		root, err := repo.Root()
		if err != nil {
			return nil, err
		}
		spec.LogDir = filepath.Join(root, "tests", ".artifacts", "logs")
	}
	c, err := process.StartChild(process.Spec{
		Name: spec.Name, Path: spec.Path, Args: spec.Args, Env: spec.Env, OnlyEnv: spec.OnlyEnv,
		Dir: spec.Dir, LogDir: spec.LogDir, Grace: spec.StopTimeout,
	})
	if err != nil {
		return nil, err
	}
	return &Process{c}, nil
}
