//go:build unix

package mcp

import (
	"os/exec"
	"syscall"
)

// ownGroup puts the process in a process group of its own, so that a
// signal to the group reaches what it started too (npx starts node, a
// shell script its commands), and a terminal's Ctrl-C reaches only us: we
// stop our servers ourselves.
func ownGroup(cmd *exec.Cmd) { cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} }

func termGroup(cmd *exec.Cmd) { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }

func killGroup(cmd *exec.Cmd) { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
