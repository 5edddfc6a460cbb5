package main

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

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

// TestServe_ModelDown: `conclave serve --model openai` whose server is
// down (nothing listens on its port). A 20-node council ends within 2 s
// of its first failed turn with planning_failed code model_unavailable
// (the breaker opened after the director's second refused connection),
// not after the agents' retries and restarts; /readyz is 503 and names
// the model; /healthz stays 200. Once the server listens again, /readyz
// returns to 200 by itself (the breaker's probe) and the next run
// finishes.
func TestServe_ModelDown(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // down: connections are refused
	sc := messages.Scenario{Nodes: 20, Waves: 2, Tokens: 2}
	srv := startServe(t, 0, nil, "--model", "openai", "--model-url", "http://"+addr+"/v1", "--model-name", "m", "--runs-per-second", "-1")
	a := newHardenAPI(t, srv, "")
	body, events := a.council(t, "q", sc)
	var planningFailed *messages.Envelope
	for _, env := range events {
		if env.Type == messages.PlanningFailed {
			planningFailed = env
		}
	}
	last := events[len(events)-1]
	if planningFailed == nil || planningFailed.Payload.(*messages.PlanningFailedPayload).Code != messages.ModelErrUnavailable {
		t.Fatalf("planning_failed %+v, want code model_unavailable", planningFailed)
	}
	if runErr, ok := last.Payload.(*messages.RunErrorPayload); !ok || runErr.Code != messages.ErrCodePlanningFailed {
		t.Fatalf("the run ended with %s %+v", last.Type, last.Payload)
	}
	if took := last.Timestamp.Sub(events[0].Timestamp); took > 2*time.Second {
		t.Fatalf("the run took %v to end, want under 2 s", took)
	}
	code, _, b := a.call(t, http.MethodGet, "/readyz", "")
	var ready messages.Readiness
	if code != http.StatusServiceUnavailable || json.Unmarshal(b, &ready) != nil || len(ready.NotReady) != 1 || !strings.Contains(ready.NotReady[0].Component, addr) {
		t.Fatalf("GET /readyz while the model is down = %d %s", code, b)
	}
	if code, _, b := a.call(t, http.MethodGet, "/healthz", ""); code != http.StatusOK {
		t.Fatalf("GET /healthz = %d %s", code, b)
	}
	_, _, metrics := a.call(t, http.MethodGet, "/metrics", "")
	for _, want := range []string{`conclave_model_breaker_open{endpoint="http://` + addr + `/v1"} 1`, `conclave_model_failures_total{class="model_unavailable",endpoint="http://` + addr + `/v1"} 1`} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	// Back up, on the same address: the probe sees it and /readyz is 200
	// again by itself; the next run finishes.
	llm, err := openaitest.New(openaitest.Config{Council: &sc})
	if err != nil {
		t.Fatal(err)
	}
	l, err = net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("cannot listen on %s again: %v", addr, err)
	}
	hs := &http.Server{Handler: llm, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(l) }()
	t.Cleanup(func() { _ = hs.Close() })
	deadline := time.Now().Add(20 * time.Second) // the probe backs off 1 s, 2 s, 4 s…
	for {
		code, _, b := a.call(t, http.MethodGet, "/readyz", "")
		if code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET /readyz after the model came back = %d %s", code, b)
		}
		time.Sleep(100 * time.Millisecond) // polling a server's state with a deadline, not synchronising
	}
	rc := a.mustStartRun(t, body)
	events = a.runEvents(t, rc.SessionID, rc.RunID)
	if last := events[len(events)-1]; last.Type != messages.RunFinished {
		t.Fatalf("the run after the model came back ended with %s %+v", last.Type, last.Payload)
	}
}

// TestServe_RealModelRealTools is issue 28's acceptance: `conclave serve
// --model openai` against openaitest, which refuses what the real API
// refuses (tool name pattern, answered calls, schemas…), with one MCP
// server and the built-in fetch: a council whose workers call the MCP
// tool (offered as kid__shout) and fetch (a page on loopback, allowed by
// its exact address) runs to run_finished, every call succeeding, and no
// scripted tool is offered.
func TestServe_RealModelRealTools(t *testing.T) {
	t.Parallel()
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = io.WriteString(w, `<html><head><title>Rayleigh</title></head><body><p>Short wavelengths scatter more.</p></body></html>`)
	}))
	t.Cleanup(page.Close)
	sc := messages.Scenario{Nodes: 4, Waves: 2, Tokens: 4, Calls: []string{"kid.shout", "fetch"}}
	llm := openaitest.NewServer(t, openaitest.Config{Council: &sc})
	srv := startServe(t, 0, nil, "--model", "openai", "--model-url", llm.URL, "--model-name", "m", "--runs-per-second", "-1",
		"--mcp", mcpChildFlag(t, "kid"), "--tool-fetch", "--fetch-allow", strings.TrimPrefix(page.URL, "http://"), "--fetch-default-url", page.URL+"/sky")
	a := newHardenAPI(t, srv, "")
	_, events := a.council(t, "why is the sky blue", sc)
	if last := events[len(events)-1]; last.Type != messages.RunFinished {
		t.Fatalf("the run ended with %s %+v", last.Type, last.Payload)
	}
	done := map[string]int{}
	for _, env := range events {
		if p, ok := env.Payload.(*messages.ToolCallFinishedPayload); ok {
			if p.IsError {
				t.Errorf("%s failed: %s", p.Tool, p.Result)
			}
			done[p.Tool]++
		}
	}
	if done["kid.shout"] != sc.Nodes || done["fetch"] != sc.Nodes {
		t.Fatalf("calls finished %v, want %d kid.shout and %d fetch", done, sc.Nodes, sc.Nodes)
	}
	offeredOnlyRealTools(t, llm.Requests())
}

// council starts a run of the scenario through the API, follows it to
// its end and checks its stream; it returns the request body (to start
// another) and the events.
func (a *hardenAPI) council(t *testing.T, question string, sc messages.Scenario) (string, []*messages.Envelope) {
	t.Helper()
	b, err := json.Marshal(messages.StartRun{Question: question, Scenario: &sc})
	if err != nil {
		t.Fatal(err)
	}
	rc := a.mustStartRun(t, string(b))
	events := a.runEvents(t, rc.SessionID, rc.RunID)
	testkit.AssertInvariants(t, events)
	return string(b), events
}
