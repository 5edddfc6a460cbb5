package actors_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/model/openai"
	"github.com/conclave-ai/conclave/model/openai/openaitest"
	"github.com/conclave-ai/conclave/model/scripted"
	"github.com/conclave-ai/conclave/testkit"
)

// TestCouncil_OpenAIBackend runs a whole council — plan, waves, a team, a
// debate with a judge, search and delegate tool calls, sub-agents, async
// tasks, a steering note (the steerer's graph diff), the advisor with a
// redirect, synthesis — through the OpenAI backend against openaitest in
// council mode: every agent turn is a streamed chat completion over HTTP.
// The run finishes with every node completed and the stream passes every
// invariant.
func TestCouncil_OpenAIBackend(t *testing.T) {
	t.Parallel()
	sc := messages.Scenario{
		Nodes: 6, Waves: 3, Teams: 1, TeamSize: 2, Tokens: 8, ReasoningTokens: 2, SynthesisTokens: 6,
		ToolsPerNode: 1, SubagentsPerNode: 1,
		Debate:      &messages.DebateScenario{Nodes: 1, Agents: 2, Rounds: 2, Judge: true},
		Delegations: &messages.DelegationScenario{Async: 1},
		Steering:    []messages.SteeringScript{{AtWave: 0, Note: "Add a node on sunsets"}},
		Advisor:     &messages.AdvisorScenario{Redirects: 1},
	}
	srv := openaitest.NewServer(t, openaitest.Config{Council: &sc})
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	m, err := openai.New(openai.Config{BaseURL: srv.URL, Model: "council-model", HTTPClient: &http.Client{Transport: tr}})
	if err != nil {
		t.Fatal(err)
	}
	e := testkit.NewEngine(t, actors.Config{Models: m.Factory()})
	start := messages.StartRun{Question: "why is the sky blue", Scenario: &sc, Advisor: &messages.AdvisorOptions{}}
	ref, events := testkit.RunCouncil(t, e, start)
	testkit.AssertInvariants(t, events)
	fin := terminal[*messages.RunFinishedPayload](t, events, ref.RunID)
	if fin.Nodes.Completed != sc.Nodes+1 { // the steering note's node
		t.Fatalf("nodes %+v", fin.Nodes)
	}
	count := map[messages.EventType]int{}
	var cached int64
	for _, env := range events {
		count[env.Type]++
		if u, ok := env.Payload.(*messages.TokenUsagePayload); ok {
			if u.Model != "council-model" {
				t.Fatalf("usage of model %q", u.Model)
			}
			cached += u.CacheReadTokens
		}
	}
	for _, typ := range []messages.EventType{
		messages.PlanProposed, messages.ToolCallStarted, messages.ToolCallFinished, messages.TeamStarted,
		messages.DebateRoundStarted, messages.ReasoningDelta, messages.TextDelta,
		messages.SteeringApplied, messages.Advisor,
	} {
		if count[typ] == 0 {
			t.Errorf("no %s event", typ)
		}
	}
	if cached == 0 {
		t.Error("no cached tokens reported")
	}
	if srv.Served() < 20 {
		t.Errorf("only %d model requests", srv.Served())
	}
	schemas := map[string]int{}
	for _, r := range srv.Requests() {
		if rf := r.ResponseFormat; rf != nil && rf.JSONSchema != nil {
			schemas[rf.JSONSchema.Name]++
		}
	}
	if schemas[openai.PlanSchemaName] != 1 || schemas[openai.DiffSchemaName] != 1 {
		t.Errorf("response formats %v, want the plan's and the diff's once", schemas)
	}

	// The same council on the scripted model in-process says the same
	// things: the server rebuilt every request the scripted model reads.
	ref2, events2 := testkit.RunCouncil(t, testkit.NewEngine(t, actors.Config{}), start)
	fin2 := terminal[*messages.RunFinishedPayload](t, events2, ref2.RunID)
	if fin.Answer != fin2.Answer {
		t.Errorf("answer over HTTP %q\nanswer in-process %q", fin.Answer, fin2.Answer)
	}
	for _, n := range scripted.PlanFor(sc.WithDefaults()).Nodes {
		if a, b := nodeOutput(events, n.ID), nodeOutput(events2, n.ID); a != b {
			t.Errorf("node %s over HTTP %q\nin-process %q", n.ID, a, b)
		}
	}
}

// TestDirector_OpenAIRepairTurn: a real model's plan that is not JSON gets
// the director's one repair turn; the request of that turn shows the model
// its invalid answer and the error, and the corrected plan runs.
func TestDirector_OpenAIRepairTurn(t *testing.T) {
	t.Parallel()
	sc := messages.Scenario{Nodes: 2, Tokens: 4}
	srv := openaitest.NewServer(t, openaitest.Config{
		Replies: []openaitest.Reply{{Chunks: []openaitest.Chunk{
			openaitest.TextChunk(`{"nodes": [{"id": "n001", `), openaitest.TextChunk(`"goal": oops}]}`), openaitest.FinishChunk("stop"),
		}}},
		Council: &sc,
	})
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	m, err := openai.New(openai.Config{BaseURL: srv.URL, Model: "m", HTTPClient: &http.Client{Transport: tr}})
	if err != nil {
		t.Fatal(err)
	}
	e := testkit.NewEngine(t, actors.Config{Models: m.Factory()})
	ref, events := testkit.RunCouncil(t, e, messages.StartRun{Question: "q", Scenario: &sc})
	testkit.AssertInvariants(t, events)
	if fin := terminal[*messages.RunFinishedPayload](t, events, ref.RunID); fin.Nodes.Completed != 2 {
		t.Fatalf("nodes %+v", fin.Nodes)
	}
	repair := srv.Requests()[1]
	n := len(repair.Messages)
	if n < 4 || repair.Messages[n-2].Role != "assistant" || !strings.Contains(string(repair.Messages[n-2].Content), "oops") ||
		!strings.Contains(string(repair.Messages[n-1].Content), "<guidance>\nYour previous answer was not a valid plan") {
		t.Fatalf("repair request messages %+v", repair.Messages)
	}
}

// TestCouncil_OpenAIStreamDropped: a node whose model connection drops
// mid-stream (openaitest cuts the connection of a scripted fail node, on
// every attempt) fails with a transient model error: its supervisor
// restarts it, with backoff, up to the restart limit, then fails it; the
// run ends with run_error node_failed (its other nodes completed or
// cancelled).
func TestCouncil_OpenAIStreamDropped(t *testing.T) {
	t.Parallel()
	sc := messages.Scenario{Nodes: 3, Waves: 1, Tokens: 6, FailNodes: messages.NodeSelector{IDs: []string{"n002"}}}
	srv := openaitest.NewServer(t, openaitest.Config{Council: &sc})
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	m, err := openai.New(openai.Config{BaseURL: srv.URL, Model: "m", HTTPClient: &http.Client{Transport: tr}})
	if err != nil {
		t.Fatal(err)
	}
	e := testkit.NewEngine(t, actors.Config{Models: m.Factory()})
	ref, events := testkit.RunCouncil(t, e, messages.StartRun{Question: "q", Scenario: &sc})
	testkit.AssertInvariants(t, events)
	fin := terminal[*messages.RunErrorPayload](t, events, ref.RunID)
	if fin.Code != messages.ErrCodeNodeFailed || fin.Nodes.Failed != 1 || fin.Nodes.Completed+fin.Nodes.Cancelled != 2 {
		t.Fatalf("run_error %+v", fin)
	}
	if n := testkit.Count(events, messages.AgentRestarted); n != 3 {
		t.Errorf("%d agent_restarted, want 3 (the default restart limit)", n)
	}
	for _, env := range events {
		if p, ok := env.Payload.(*messages.NodeFailedPayload); ok {
			if p.NodeID != "n002" || !strings.Contains(p.Error, "openai") {
				t.Fatalf("node_failed %+v", p)
			}
			return
		}
	}
	t.Fatal("no node_failed")
}
