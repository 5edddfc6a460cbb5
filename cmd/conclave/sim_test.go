package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// simCommand runs `conclave sim args...` as its own process (the test
// binary in child mode): testing.Main, which runs the seeds, exits the
// process.
func simCommand(t *testing.T, args ...string) (string, int) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*watchdog)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, append([]string{"sim"}, args...)...)
	cmd.Env = append(os.Environ(), crashChildEnv+"="+stdioChildMode)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &exit):
		return string(out), exit.ExitCode()
	}
	t.Fatalf("conclave sim %v: %v\n%s", args, err, out)
	return "", 0
}

func TestSim_PassingSeeds(t *testing.T) {
	out, code := simCommand(t, "--seeds", "4", "--parallel", "2")
	if code != 0 || !strings.Contains(out, "conclave sim: 4 seeds, 2 at a time: 4 passed, 0 failed") || !strings.Contains(out, "seeds/s") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}

// TestSim_FindsReintroducedBug: with the backpressure fix taken out, seed 3
// fails; the report names it, the line that reproduces it, and a shrunk
// scenario that still fails, which --scenario then reproduces.
func TestSim_FindsReintroducedBug(t *testing.T) {
	out, code := simCommand(t, "--from", "3", "--seeds", "1", "--reintroduce", "backpressure", "--shrink", "20")
	if code != 1 {
		t.Fatalf("exit %d, want 1:\n%s", code, out)
	}
	for _, want := range []string{"1 failed", "FAIL seed 3:", "backpressure:", "reproduce: conclave sim --seed 3 --reintroduce backpressure", "shrunk from", "reproduce it: conclave sim --reintroduce backpressure --scenario '"} {
		if !strings.Contains(out, want) {
			t.Fatalf("no %q in:\n%s", want, out)
		}
	}
	scenario := out[strings.LastIndex(out, "--scenario '")+len("--scenario '"):]
	scenario = scenario[:strings.Index(scenario, "'")]
	again, code := simCommand(t, "--reintroduce", "backpressure", "--scenario", scenario, "--shrink", "0")
	if code != 1 || !strings.Contains(again, "backpressure:") {
		t.Fatalf("the shrunk scenario: exit %d:\n%s", code, again)
	}
}

func TestSim_Usage(t *testing.T) {
	for _, args := range [][]string{{"--reintroduce", "nope"}, {"--seeds", "0"}, {"--scenario", "{"}, {"--nodes", "0"}} {
		out, code := simCommand(t, args...)
		if code != exitUsage {
			t.Errorf("sim %v: exit %d, want %d:\n%s", args, code, exitUsage, out)
		}
	}
}
