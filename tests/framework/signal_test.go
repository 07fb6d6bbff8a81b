package framework

import "syscall"

var syscallZero = syscall.Signal(0)
