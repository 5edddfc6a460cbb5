package actors_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/journal"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/testkit"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestRecover_LogsResumedRuns: an engine that resumes a run at startup
// logs one INFO line "run resumed" naming it, its session and tenant,
// before New returns. Before, a restart said nothing of the runs it
// brought back.
func TestRecover_LogsResumedRuns(t *testing.T) {
	t.Parallel()
	j := &sessionsJournal{Memory: journal.NewMemory()}
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Watchdog)
	defer cancel()
	e1, err := actors.New(actors.Config{Journal: j, KeepRunsOnShutdown: true})
	if err != nil {
		t.Fatal(err)
	}
	ref, err := e1.StartRun(ctx, messages.StartRun{Question: "q", SessionID: "u", Tenant: "acme", HITL: messages.HITLPlan, Scenario: &messages.Scenario{Nodes: 2}})
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
	var logs lockedBuffer
	testkit.NewEngine(t, actors.Config{Journal: j, KeepRunsOnShutdown: true,
		Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))})
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
	if l := resumed[0]; l["level"] != "INFO" || l["run"] != string(ref.RunID) || l["session"] != "u" || l["tenant"] != "acme" || l["ending"] != false {
		t.Fatalf("line %v", l)
	}
}
