package benchkit

import (
	"os"
	"testing"
)

func TestParseVmRSS(t *testing.T) {
	t.Parallel()
	status := "Name:\tconclave\nVmPeak:\t  999 kB\nVmRSS:\t   12345 kB\nThreads:\t5\n"
	if got := parseVmRSS([]byte(status)); got != 12345<<10 {
		t.Errorf("got %d", got)
	}
	if got := parseVmRSS([]byte("VmRSS: 12 MB\n")); got != 0 {
		t.Errorf("unknown unit: got %d", got)
	}
	if got := parseVmRSS([]byte("Name: x\n")); got != 0 {
		t.Errorf("missing: got %d", got)
	}
}

func TestParseProcPIDStatCPU(t *testing.T) {
	t.Parallel()
	// The command name holds a space and a parenthesis; utime 250, stime 75.
	stat := "4242 (con clave) x) S 1 4242 4242 0 -1 4194560 1234 0 0 0 250 75 0 0 20 0 9 0 100 1000000 300\n"
	if got := parseProcPIDStatCPU([]byte(stat), 100); got != 3.25 {
		t.Errorf("cpu = %v, want 3.25", got)
	}
	for _, bad := range []string{"", "4242 (x) S 1 2", "4242 (x) S 1 2 3 4 5 6 7 8 9 10 x 0"} {
		if got := parseProcPIDStatCPU([]byte(bad), 100); got != 0 {
			t.Errorf("%q: cpu = %v, want 0", bad, got)
		}
	}
}

func TestProcessFigures(t *testing.T) {
	t.Parallel()
	pid := os.Getpid()
	if ProcessRSS(pid) == 0 || SelfRSS() == 0 {
		t.Errorf("RSS: process %d, self %d", ProcessRSS(pid), SelfRSS())
	}
	if ProcessCPUSeconds(pid) < 0 || SelfCPUSeconds() <= 0 {
		t.Errorf("CPU: process %v, self %v", ProcessCPUSeconds(pid), SelfCPUSeconds())
	}
	if ProcessRSS(-1) != 0 || ProcessCPUSeconds(-1) != 0 {
		t.Error("a process that does not exist has figures")
	}
}

func TestParseProcStatBusy(t *testing.T) {
	t.Parallel()
	stat := "cpu  100 20 30 5000 7 1 2 3 0 0\ncpu0 50 10 15 2500 3 0 1 1 0 0\n"
	if got := parseProcStatBusy([]byte(stat), 100); got != 1.56 {
		t.Errorf("busy = %v, want 1.56", got)
	}
	if got := parseProcStatBusy([]byte("intr 1 2 3\n"), 100); got != 0 {
		t.Errorf("no cpu line: %v", got)
	}
}
