//go:build !linux

package process

import "syscall"

func childAttr() *syscall.SysProcAttr { return nil }
