package soak

import "syscall"

// childProcAttr makes the server child get SIGTERM when this process dies
// (however it dies), so it never outlives the soak. The signal goes when
// the thread that started the child exits; Go threads live as long as the
// process unless a goroutine locked to one returns, which this package
// never does.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
