//go:build !unix

package mcp

import (
	"os"
	"os/exec"
)

// Without process groups, signals reach the process alone.

func ownGroup(*exec.Cmd) {}

func termGroup(cmd *exec.Cmd) { _ = cmd.Process.Signal(os.Interrupt) }

func killGroup(cmd *exec.Cmd) { _ = cmd.Process.Kill() }
