//go:build !linux

package soak

import "syscall"

// childProcAttr is nil outside Linux, which has no parent-death signal: a
// soak killed with SIGKILL leaves its server running there.
func childProcAttr() *syscall.SysProcAttr { return nil }
