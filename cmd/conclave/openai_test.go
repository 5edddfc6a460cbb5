package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/model/openai"
	"github.com/conclave-ai/conclave/model/openai/openaitest"
	"github.com/conclave-ai/conclave/testkit"
)

// TestServe_OpenAIBackend is the acceptance test of the OpenAI backend: a
// `conclave serve --model openai --model-url …` process runs a whole
// council — plan, waves, a team, a debate with a judge, search and delegate
// tool calls, sub-agents, synthesis — against openaitest in council mode,
// every agent turn a streamed chat completion over HTTP. Followed over the
// session's SSE stream, the run finishes with every node completed and the
// stream passes testkit.Check. The server used the key from the
// environment and the per-role model, and never logged the key.
func TestServe_OpenAIBackend(t *testing.T) {
	t.Parallel()
	sc := messages.Scenario{
		Nodes: 6, Waves: 3, Teams: 1, TeamSize: 2, Tokens: 8, ReasoningTokens: 2, SynthesisTokens: 6,
		Calls: []string{"kid.shout"}, SubagentsPerNode: 1,
		Debate: &messages.DebateScenario{Nodes: 1, Agents: 2, Rounds: 2, Judge: true},
	}
	llm := openaitest.NewServer(t, openaitest.Config{Council: &sc})
	const key = "sk-acceptance-0123456789"
	srv := startServe(t, 0, []string{openai.EnvAPIKey + "=" + key},
		"--model", "openai", "--model-url", llm.URL, "--model-name", "council-model",
		"--role-model", "director=strong-model", "--model-context-tokens", "100000", "--runs-per-second", "-1",
		"--mcp", mcpChildFlag(t, "kid"))
	a := newHardenAPI(t, srv, "")
	body, err := json.Marshal(messages.StartRun{Question: "why is the sky blue", Scenario: &sc})
	if err != nil {
		t.Fatal(err)
	}
	rc := a.mustStartRun(t, string(body))
	events := a.runEvents(t, rc.SessionID, rc.RunID)
	if v := testkit.Check(events); len(v) > 0 {
		t.Fatalf("%d invariant violations, first: %v", len(v), v[0])
	}
	fin, ok := events[len(events)-1].Payload.(*messages.RunFinishedPayload)
	if !ok {
		t.Fatalf("the run ended with %s: %+v", events[len(events)-1].Type, events[len(events)-1].Payload)
	}
	if fin.Nodes.Completed != sc.Nodes || !strings.HasPrefix(fin.Answer, "Answer to: why is the sky blue") {
		t.Fatalf("run_finished %+v", fin)
	}
	for _, typ := range []messages.EventType{
		messages.PlanProposed, messages.WaveStarted, messages.ToolCallStarted, messages.ToolCallFinished,
		messages.TeamStarted, messages.DebateRoundStarted, messages.ReasoningDelta, messages.TextDelta, messages.TokenUsage,
	} {
		if testkit.Count(events, typ) == 0 {
			t.Errorf("no %s event", typ)
		}
	}
	done := map[string]int{}
	for _, env := range events {
		if p, ok := env.Payload.(*messages.ToolCallFinishedPayload); ok && !p.IsError {
			done[p.Tool]++
		}
	}
	if done["delegate"] == 0 || done["kid.shout"] == 0 {
		t.Errorf("calls completed %v: want delegate and the MCP server's kid.shout", done)
	}

	reqs := llm.Requests()
	offeredOnlyRealTools(t, reqs)
	if len(reqs) < 20 {
		t.Fatalf("%d model requests", len(reqs))
	}
	director := 0
	for _, r := range reqs {
		if r.Authorization != "Bearer "+key {
			t.Fatalf("Authorization %q", r.Authorization)
		}
		if r.Model == "strong-model" {
			director++
			if r.ResponseFormat == nil || r.ResponseFormat.JSONSchema == nil || r.ResponseFormat.JSONSchema.Name != openai.PlanSchemaName {
				t.Errorf("the director's request has response_format %+v", r.ResponseFormat)
			}
		} else if r.Model != "council-model" {
			t.Errorf("request for model %q", r.Model)
		}
	}
	if director != 1 {
		t.Errorf("%d requests for the director's model, want 1", director)
	}
	if log := srv.log.tail(1 << 20); strings.Contains(log, key) {
		t.Error("the server logged the API key")
	} else if !strings.Contains(log, "model: openai-compatible") {
		t.Errorf("the server did not log its model:\n%s", log)
	}
}

// TestRun_OpenAIBackend: `conclave run --model openai` runs a council in
// process against openaitest (on loopback: no key needed) with a per-role
// model and a context budget; the JSONL stream passes testkit.Check.
func TestRun_OpenAIBackend(t *testing.T) {
	t.Parallel()
	sc := messages.Scenario{Nodes: 3, Waves: 2, Tokens: 6, ReasoningTokens: 2, Calls: []string{"kid.shout"}}
	llm := openaitest.NewServer(t, openaitest.Config{Council: &sc})
	r := runCLI(t, t.Context(), nil, false, "run", "why is the sky blue", "--json",
		"--model", "openai", "--model-url", llm.URL, "--model-name", "small", "--role-model", "synthesizer=big",
		"--model-context-tokens", "50000", "--mcp", mcpChildFlag(t, "kid"))
	if r.code != exitOK {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	events := decodeJSONL(t, r.stdout)
	if v := testkit.Check(events); len(v) > 0 {
		t.Fatalf("%d invariant violations, first: %v", len(v), v[0])
	}
	fin, ok := events[len(events)-1].Payload.(*messages.RunFinishedPayload)
	if !ok || fin.Nodes.Completed != sc.Nodes || testkit.Count(events, messages.ToolCallFinished) != sc.Nodes {
		t.Fatalf("last event %s %+v", events[len(events)-1].Type, events[len(events)-1].Payload)
	}
	offeredOnlyRealTools(t, llm.Requests())
	models := map[string]int{}
	for _, req := range llm.Requests() {
		models[req.Model]++
	}
	if models["big"] != 1 || models["small"] < 2*sc.Nodes {
		t.Fatalf("requests per model %v", models)
	}
}

// offeredOnlyRealTools: a real model is never offered the scripted
// model's search and publish (a search returning invented results):
// only the runtime's own tools and the MCP server's, under the names the
// API accepts (kid.shout as kid__shout: openaitest refuses a dotted one,
// as the real API does).
func offeredOnlyRealTools(t *testing.T, reqs []openaitest.Request) {
	t.Helper()
	offered := map[string]bool{}
	for _, r := range reqs {
		for _, tl := range r.Tools {
			offered[tl.Function.Name] = true
		}
	}
	if offered["search"] || offered["publish"] || !offered["kid__shout"] {
		t.Errorf("tools offered to the model %v: want kid__shout and never the scripted search or publish", offered)
	}
}
