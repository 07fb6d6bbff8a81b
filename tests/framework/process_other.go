//go:build !linux

package framework

import "syscall"

func sysProcAttr() *syscall.SysProcAttr { return nil }

func keepInheritedFilesToOurselves() {}
