package process

import "syscall"

// childAttr makes the kernel kill a Child when this process dies (e.g. on a
// test's timeout), so no manager keeps running against the cluster after
// its test binary.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
