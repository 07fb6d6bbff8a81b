package framework

import "syscall"

// The child gets SIGKILL when the test process dies (e.g. on a test timeout),
// so no manager keeps running against the cluster after its test binary.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
