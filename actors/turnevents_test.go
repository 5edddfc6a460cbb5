package actors_test

import (
	"strings"
	"testing"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/testkit"
)

// Every model request is announced by turn_started on its lane, and its
// token_usage names the same turn; the run's second event is the request
// it answers, its question cut to 200 characters.
func TestEngine_TurnStartedAndRequestReceived(t *testing.T) {
	t.Parallel()
	e := testkit.NewEngine(t, actors.Config{})
	question := strings.Repeat("why ", 60) // 240 characters
	sc := messages.Scenario{Nodes: 3, Waves: 2, Tokens: 4, ToolsPerNode: 2, SubagentsPerNode: 1,
		Debate: &messages.DebateScenario{Agents: 2, Rounds: 1, Judge: true}}
	_, events := testkit.RunCouncil(t, e, messages.StartRun{Question: question, Scenario: &sc, Tenant: "acme"})
	testkit.AssertInvariants(t, events)

	rr, ok := events[1].Payload.(*messages.RequestReceivedPayload)
	if !ok {
		t.Fatalf("second event is %s, want request_received", events[1].Type)
	}
	if rr.Tenant != "acme" || !rr.Truncated || rr.Message != question[:200]+"…" {
		t.Errorf("request_received %+v", rr)
	}
	if n := testkit.Count(events, messages.RequestReceived); n != 1 {
		t.Errorf("%d request_received, want 1", n)
	}

	type turnKey struct {
		lane          messages.StreamID
		role          string
		turn, attempt int
	}
	started := map[turnKey]bool{}
	usages := 0
	for _, env := range events {
		switch p := env.Payload.(type) {
		case *messages.TurnStartedPayload:
			k := turnKey{env.Lane.StreamID, p.Role, p.Turn, p.Attempt}
			if started[k] || p.Model != "scripted" || p.Turn < 1 {
				t.Errorf("seq %d: turn_started %+v on %s (again, or without its model)", env.Seq, p, env.Lane.StreamID)
			}
			started[k] = true
		case *messages.TokenUsagePayload:
			usages++
			if k := (turnKey{env.Lane.StreamID, p.Role, p.Turn, p.Attempt}); !started[k] {
				t.Errorf("seq %d: token_usage of turn %+v on %s without its turn_started", env.Seq, k, env.Lane.StreamID)
			}
		}
	}
	if usages == 0 || len(started) != usages {
		t.Errorf("%d turn_started for %d token_usage", len(started), usages)
	}
}

// Every event of a run carries the id of the request that started it as
// its correlation_id: the run supervisor's, the agents', the streamed
// deltas', the steering lanes' (the scenario's notes).
func TestEngine_CorrelationID(t *testing.T) {
	t.Parallel()
	e := testkit.NewEngine(t, actors.Config{})
	sc := messages.Scenario{Nodes: 4, Waves: 2, Tokens: 4, ToolsPerNode: 1, SubagentsPerNode: 1, Steering: []messages.SteeringScript{{AtWave: 0, Note: "focus on cost"}}}
	_, events := testkit.RunCouncil(t, e, messages.StartRun{Question: "q", Scenario: &sc, RequestID: "req-42"})
	testkit.AssertInvariants(t, events)
	steered := false
	for _, env := range events {
		if env.CorrelationID != "req-42" {
			t.Fatalf("seq %d %s on %s: correlation_id %q, want req-42", env.Seq, env.Type, env.Lane.StreamID, env.CorrelationID)
		}
		steered = steered || env.Type == messages.SteeringReceived
	}
	if !steered {
		t.Error("the scenario's steering note was not received")
	}
	// A run started without a request id has none.
	_, events = testkit.RunCouncil(t, e, messages.StartRun{Question: "q", Scenario: &messages.Scenario{Nodes: 1, Tokens: 2}})
	for _, env := range events {
		if env.CorrelationID != "" {
			t.Fatalf("seq %d: correlation_id %q on a run without a request id", env.Seq, env.CorrelationID)
		}
	}
}
