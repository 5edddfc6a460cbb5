package actors_test

import (
	"net/http"
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
// tasks, synthesis — through the OpenAI backend against openaitest in
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
	}
	srv := openaitest.NewServer(t, openaitest.Config{Council: &sc})
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	m, err := openai.New(openai.Config{BaseURL: srv.URL, Model: "council-model", HTTPClient: &http.Client{Transport: tr}})
	if err != nil {
		t.Fatal(err)
	}
	e := testkit.NewEngine(t, actors.Config{Models: m.Factory()})
	ref, events := testkit.RunCouncil(t, e, messages.StartRun{Question: "why is the sky blue", Scenario: &sc})
	testkit.AssertInvariants(t, events)
	fin := terminal[*messages.RunFinishedPayload](t, events, ref.RunID)
	if fin.Nodes.Completed != sc.Nodes {
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
			cached += u.CachedInputTokens
		}
	}
	for _, typ := range []messages.EventType{
		messages.PlanProposed, messages.ToolCallStarted, messages.ToolCallFinished, messages.TeamStarted,
		messages.DebateRoundStarted, messages.ReasoningDelta, messages.TextDelta,
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

	// The same council on the scripted model in-process says the same
	// things: the server rebuilt every request the scripted model reads.
	ref2, events2 := testkit.RunCouncil(t, testkit.NewEngine(t, actors.Config{}), messages.StartRun{Question: "why is the sky blue", Scenario: &sc})
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
