package framework

import (
	"path/filepath"

	"github.com/kyma-project/serverless-manager/hack/cluster/process"
	"github.com/kyma-project/serverless-manager/tests/support/repo"
)

// ProcessSpec says how to run a process, e.g. bin/manager: the runner's
// spec, with Name defaulting to the binary's and LogDir to
// tests/.artifacts/logs in the repository.
type ProcessSpec = process.Spec

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
	c, err := process.StartChild(spec)
	if err != nil {
		return nil, err
	}
	return &Process{c}, nil
}
