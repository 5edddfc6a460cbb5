package main

import (
	"encoding/json"
	"testing"

	"github.com/conclave-ai/conclave/internal/fanout"
	"github.com/conclave-ai/conclave/messages"
)

// TestBenchFanout_Council runs `conclave bench fanout --workload council`
// at a tiny size with the server in this process.
func TestBenchFanout_Council(t *testing.T) {
	t.Parallel()
	r := runCLI(t, t.Context(), nil, false, "bench", "fanout", "--workload", "council", "--in-process", "--clients", "5",
		"--nodes", "4", "--waves", "2", "--tokens", "5", "--subagents", "1", "--concurrency", "2", "--token-delay", "1ms",
		"--settle", "1ms", "--drain", "10s", "--json")
	if r.code != exitOK {
		t.Fatalf("exit %d\nstderr:\n%s", r.code, r.stderr)
	}
	var res fanout.Result
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatalf("the output is not a result: %v\n%s", err, tail(r.stdout))
	}
	if res.Workload != fanout.WorkloadCouncil || len(res.Modes) != 1 || res.Council == nil || res.Council.Nodes != 4 {
		t.Fatalf("result %+v", res)
	}
	m := res.Modes[0]
	if m.Run == nil || m.Run.Status != messages.StatusFinished || m.Delivered != int64(m.Run.Events)*5 || m.Lost != 0 {
		t.Errorf("run %+v: delivered %d, lost %d", m.Run, m.Delivered, m.Lost)
	}
}

func TestBenchFanout_WorkloadFlags(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--workload", "lottery"},
		{"--workload", "council", "--baseline"},
		{"--workload", "council", "--rate", "100"},
		{"--workload", "council", "--duration", "1s"},
		{"--nodes", "5"},
		{"--token-delay", "5ms"},
	} {
		if r := runCLI(t, t.Context(), nil, false, append([]string{"bench", "fanout"}, args...)...); r.code != exitUsage {
			t.Errorf("%q: exit %d, want %d\n%s", args, r.code, exitUsage, r.stderr)
		}
	}
}
