// Package process is the one process runner of the local cluster and the
// tests: it starts a program with its output appended to <LogDir>/<Name>.log
// (every start and exit marked with a "=== " line), stops it with SIGTERM
// and, after a grace period, SIGKILL, and kills it as a crash would.
//
// Two kinds of process use it. A Daemon (hack/node: the cluster's control
// plane and node) outlives the program that started it: it runs in its own
// session, its PID is recorded in a file, and it is told from any other
// process by a mark on its command line (the cluster's state directory),
// so a PID the kernel reused is never signalled. A Child (tests/framework:
// the manager, the registry) is the starting program's child and is killed
// with it.
package process
