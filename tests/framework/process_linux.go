package framework

import (
	"os"
	"strconv"
	"syscall"
)

// The child gets SIGKILL when the test process dies (e.g. on a test timeout),
// so no manager keeps running against the cluster after its test binary.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// keepInheritedFilesToOurselves marks every file descriptor this process
// inherited beyond stdin, stdout and stderr close-on-exec. A test run under
// `flock /tmp/e2e.lock` inherits the lock's descriptor; without this the
// cluster daemons hack/cluster.sh starts would inherit it too and hold the
// lock for as long as the cluster runs.
func keepInheritedFilesToOurselves() {
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
