package actors_test

import (
	"net/http"
	"regexp"
	"testing"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/model/openai"
	"github.com/conclave-ai/conclave/model/openai/openaitest"
	"github.com/conclave-ai/conclave/model/scripted"
	"github.com/conclave-ai/conclave/testkit"
)

// TestCouncil_OpenAIDialects runs a whole council — the plan, waves whose
// workers make three parallel calls in one turn (two searches and a
// delegation to a sub-agent), an async delegation, synthesis — through the
// OpenAI backend against openaitest speaking each real server's streaming
// dialect (openaitest.Dialects: OpenAI, Azure, vLLM, llama.cpp, Ollama 0.20
// and older, LiteLLM, OpenRouter, Groq, DeepSeek, Gemini, Mistral, NVIDIA
// NIM). Every
// run finishes with every node completed, passes every invariant, gives
// the answer and node outputs the scripted model gives in-process, makes
// every call under the server's own ids, and reports exactly the usage the
// server sent (cached and cache-write tokens included) or, from a server
// that sends none, an estimate.
func TestCouncil_OpenAIDialects(t *testing.T) {
	t.Parallel()
	sc := messages.Scenario{
		Nodes: 4, Waves: 2, Tokens: 6, ReasoningTokens: 2, SynthesisTokens: 4,
		ToolsPerNode: 2, SubagentsPerNode: 1,
		Delegations: &messages.DelegationScenario{Async: 1},
	}
	start := messages.StartRun{Question: "why is the sky blue", Scenario: &sc}
	ref0, events0 := testkit.RunCouncil(t, testkit.NewEngine(t, actors.Config{}), start)
	want := terminal[*messages.RunFinishedPayload](t, events0, ref0.RunID).Answer
	ids := map[string]*regexp.Regexp{ // the servers' call ids
		"vllm":        regexp.MustCompile(`^chatcmpl-tool-[0-9a-f]{32}$`),
		"ollama-0.20": regexp.MustCompile(`^call_[a-zA-Z0-9]{8}$`),
		"deepseek":    regexp.MustCompile(`^call_0_[0-9a-f]{32}$`),
		"gemini":      regexp.MustCompile(`^function-call-[0-9]+$`),
		"mistral":     regexp.MustCompile(`^[a-zA-Z0-9]{9}$`),
	}
	for _, d := range openaitest.Dialects() {
		t.Run(d.Name, func(t *testing.T) {
			t.Parallel()
			srv := openaitest.NewServer(t, openaitest.Config{Council: &sc, Dialect: d})
			tr := &http.Transport{}
			t.Cleanup(tr.CloseIdleConnections)
			m, err := openai.New(openai.Config{BaseURL: srv.URL, Model: "m-" + d.Name, HTTPClient: &http.Client{Transport: tr}})
			if err != nil {
				t.Fatal(err)
			}
			ref, events := testkit.RunCouncil(t, testkit.NewEngine(t, actors.Config{Models: m.Factory()}), start)
			testkit.AssertInvariants(t, events)
			fin := terminal[*messages.RunFinishedPayload](t, events, ref.RunID)
			if fin.Nodes.Completed != sc.Nodes {
				t.Fatalf("nodes %+v", fin.Nodes)
			}
			if fin.Answer != want {
				t.Errorf("answer %q\nin-process %q", fin.Answer, want)
			}
			for _, n := range scripted.PlanFor(sc.WithDefaults()).Nodes {
				if a, b := nodeOutput(events, n.ID), nodeOutput(events0, n.ID); a != b {
					t.Errorf("node %s: %q\nin-process %q", n.ID, a, b)
				}
			}
			var used messages.Usage
			var started, finished int
			for _, env := range events {
				switch p := env.Payload.(type) {
				case *messages.TokenUsagePayload:
					used = used.Add(p.Usage)
				case *messages.ToolCallStartedPayload:
					started++
					if re := ids[d.Name]; re != nil && !re.MatchString(p.CallID) {
						t.Errorf("call id %q, want %s", p.CallID, re)
					}
				case *messages.ToolCallFinishedPayload:
					finished++
				}
			}
			// Each worker's first turn: 2 searches, 1 delegate, 1 async task.
			if started < 4*sc.Nodes || finished != started {
				t.Errorf("%d calls started, %d finished", started, finished)
			}
			sent := srv.Reported()
			switch {
			case d.Usage == openaitest.UsageNone:
				if sent != (messages.Usage{}) || used.InputTokens == 0 || used.OutputTokens == 0 || used.CacheReadTokens != 0 {
					t.Errorf("usage %+v (the server sent %+v): want an estimate", used, sent)
				}
			case used != sent || sent.InputTokens == 0:
				t.Errorf("usage %+v, the server sent %+v", used, sent)
			}
		})
	}
}
