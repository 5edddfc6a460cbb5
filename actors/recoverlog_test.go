package actors_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/internal/runlog"
	"github.com/conclave-ai/conclave/journal"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/testkit"
)

// TestRecover_LogsResumedRuns: an engine that resumes a run at startup
// logs one INFO line "run resumed" naming it, its session and tenant,
// before New returns. Before, a restart said nothing of the runs it
// brought back. Observers that keep a run's trace id (runlog) are told of
// the resumed run, so its lines carry its trace id after the restart too.
func TestRecover_LogsResumedRuns(t *testing.T) {
	t.Parallel()
	j := &sessionsJournal{Memory: journal.NewMemory()}
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Watchdog)
	defer cancel()
	e1, err := actors.New(actors.Config{Journal: j, KeepRunsOnShutdown: true})
	if err != nil {
		t.Fatal(err)
	}
	const trace = "4bf92f3577b34da6a3ce929d0e0e4736"
	ref, err := e1.StartRun(ctx, messages.StartRun{Question: "q", SessionID: "u", Tenant: "acme", HITL: messages.HITLPlan, Scenario: &messages.Scenario{Nodes: 2},
		TraceParent: "00-" + trace + "-00f067aa0ba902b7-01"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := testkit.NewProbe(ctx, e1, "acme", "u", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Until(ctx, func(env *messages.Envelope) bool { return env.Type == messages.InterruptRaised }); err != nil {
		t.Fatal(err)
	}
	p.Close()
	if err := e1.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	var logs testkit.LockedBuffer
	runLog := runlog.New(runlog.Config{})
	testkit.NewEngine(t, actors.Config{Journal: j, KeepRunsOnShutdown: true, Observers: []actors.Observer{runLog},
		Logger: slog.New(runLog.Handler(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo})))})
	var resumed []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		if m["msg"] == "run resumed" {
			resumed = append(resumed, m)
		}
	}
	if len(resumed) != 1 {
		t.Fatalf("%d run resumed lines, want 1:\n%s", len(resumed), logs.String())
	}
	if l := resumed[0]; l["trace_id"] != trace {
		t.Errorf("the resumed run's line has trace_id %v, want %s", l["trace_id"], trace)
	}
	if l := resumed[0]; l["level"] != "INFO" || l["run"] != string(ref.RunID) || l["session"] != "u" || l["tenant"] != "acme" || l["ending"] != false {
		t.Fatalf("line %v", l)
	}
}
