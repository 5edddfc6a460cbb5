package openai_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/model"
	"github.com/conclave-ai/conclave/model/openai"
	"github.com/conclave-ai/conclave/model/openai/openaitest"
)

// turnOf streams the recorded answer in testdata/wire/name through the
// backend and returns the turn: its text, reasoning and calls (id name
// args, ";"-separated) and its usage.
func turnOf(t *testing.T, name string) (text, reasoning, calls string, usage messages.Usage) {
	t.Helper()
	body, err := os.ReadFile(filepath.Join("testdata", "wire", name))
	if err != nil {
		t.Fatal(err)
	}
	srv := openaitest.NewServer(t, openaitest.Config{Replies: []openaitest.Reply{{SSE: body}}})
	chunks := streamTurn(t, srv, openai.Config{}, nil)
	var cs []string
	for _, c := range chunks {
		switch c := c.(type) {
		case *model.Text:
			text += c.Text
		case *model.Reasoning:
			reasoning += c.Text
		case *model.Call:
			cs = append(cs, c.Call.ID+" "+c.Call.Name+" "+string(c.Call.Args))
		case *model.Usage:
			usage = c.Usage
		}
	}
	return text, reasoning, strings.Join(cs, ";"), usage
}

// TestModel_UsageOfGroqInXGroq: Groq reports usage in the finish chunk's
// x_groq.usage (without a usage chunk when stream_options is not
// honoured); the turn's usage is Groq's, not an estimate.
func TestModel_UsageOfGroqInXGroq(t *testing.T) {
	t.Parallel()
	text, _, _, u := turnOf(t, "groq.sse")
	if text != "One, two" || u != (messages.Usage{InputTokens: 45, OutputTokens: 12}) {
		t.Fatalf("text %q, usage %+v: want Groq's 45 in, 12 out", text, u)
	}
}

// TestModel_UsageOfDeepSeekCacheHits: DeepSeek counts cached prompt
// tokens in prompt_cache_hit_tokens (no prompt_tokens_details): they are
// the turn's cache_read_tokens.
func TestModel_UsageOfDeepSeekCacheHits(t *testing.T) {
	t.Parallel()
	text, reasoning, _, u := turnOf(t, "deepseek.sse")
	if text != "Scattering." || reasoning != "Rayleigh." {
		t.Fatalf("text %q, reasoning %q", text, reasoning)
	}
	if u != (messages.Usage{InputTokens: 120, OutputTokens: 30, CacheReadTokens: 64}) {
		t.Fatalf("usage %+v: want 120 in (64 cached), 30 out", u)
	}
}

// TestModel_StreamsOfRealServerSamples: recorded answers of Azure (its
// prompt_filter_results first chunk, the filter chunk after the finish),
// Gemini (calls without index, "stop" after calls, usage in the finish
// chunk), OpenRouter (its comments), Mistral (calls whole in the finish
// chunk), LiteLLM (the first call at index 1, the id once, cache writes),
// llama.cpp (timings in every chunk) and older Ollama (finish_reason ""
// and no usage: an estimate) come out
// as the text, reasoning, calls and usage they carry.
func TestModel_StreamsOfRealServerSamples(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		file, text, reasoning, calls string
		usage                        messages.Usage // zero: estimated
	}{
		{file: "azure.sse", calls: `call_qp2GCYvrhXsGIh3hbmzNSbQb search {"query":"sky"}`,
			usage: messages.Usage{InputTokens: 90, OutputTokens: 17}},
		{file: "gemini.sse", calls: `function-call-1 search {"query":"sky"};function-call-2 delegate {"task":"t"}`,
			usage: messages.Usage{InputTokens: 138, OutputTokens: 24}},
		{file: "openrouter.sse", text: "Scattering.", reasoning: "Rayleigh.",
			usage: messages.Usage{InputTokens: 100, OutputTokens: 10, CacheReadTokens: 80}},
		{file: "mistral.sse", calls: `D681PevKs search {"query": "sky"};q8Zt3LmWx delegate {"task": "t"}`,
			usage: messages.Usage{InputTokens: 95, OutputTokens: 36}},
		{file: "litellm.sse", text: "Let me look.", calls: `tooluse_BawIVFHuQ2uaPLDBdWlblA search {"query": "sky"}`,
			usage: messages.Usage{InputTokens: 500, OutputTokens: 40, CacheReadTokens: 300, CacheCreateTokens: 100}},
		{file: "llamacpp.sse", text: "Blue.", reasoning: "Playful",
			usage: messages.Usage{InputTokens: 17, OutputTokens: 80, CacheReadTokens: 7}},
		{file: "ollama-old.sse", calls: `call_a1b2c3d4 search {"query":"sky"};call_e5f6g7h8 delegate {"task":"t"}`},
	} {
		t.Run(tc.file, func(t *testing.T) {
			t.Parallel()
			text, reasoning, calls, u := turnOf(t, tc.file)
			if text != tc.text || reasoning != tc.reasoning || calls != tc.calls {
				t.Fatalf("text %q, reasoning %q, calls %q\nwant %q, %q, %q", text, reasoning, calls, tc.text, tc.reasoning, tc.calls)
			}
			switch {
			case tc.usage == (messages.Usage{}):
				if u.InputTokens == 0 || u.CacheReadTokens != 0 {
					t.Fatalf("usage %+v, want an estimate", u)
				}
			case u != tc.usage:
				t.Fatalf("usage %+v, want %+v", u, tc.usage)
			}
		})
	}
}

// TestModel_GeminiThoughtSignatureGoesBack: the extra_content Gemini
// streams with a call (its thought_signature) goes back with that call in
// the next turn's history, as Gemini 3 requires; a call streamed without
// one goes back without.
func TestModel_GeminiThoughtSignatureGoesBack(t *testing.T) {
	t.Parallel()
	body, err := os.ReadFile(filepath.Join("testdata", "wire", "gemini.sse"))
	if err != nil {
		t.Fatal(err)
	}
	srv := openaitest.NewServer(t, openaitest.Config{Replies: []openaitest.Reply{{SSE: body},
		{Chunks: []openaitest.Chunk{openaitest.TextChunk("done"), openaitest.FinishChunk("stop")}}}})
	m := newModel(t, srv, openai.Config{})
	st, err := m.Stream(t.Context(), workerReq())
	if err != nil {
		t.Fatal(err)
	}
	chunks, err := collect(t, st)
	if err != nil {
		t.Fatal(err)
	}
	var ex model.Exchange
	for _, c := range chunks {
		if c, ok := c.(*model.Call); ok {
			ex.Calls = append(ex.Calls, c.Call)
			ex.Results = append(ex.Results, model.ToolResult{CallID: c.Call.ID, Name: c.Call.Name, Content: "r"})
		}
	}
	req := workerReq()
	req.Turn = 2
	req.History = []model.Exchange{ex}
	st, err = m.Stream(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := collect(t, st); err != nil {
		t.Fatal(err)
	}
	var back []string
	for _, msg := range srv.Requests()[1].Messages {
		for _, c := range msg.ToolCalls {
			back = append(back, c.ID+" "+string(c.ExtraContent))
		}
	}
	want := `function-call-1 {"google":{"thought_signature":"c2ln"}};function-call-2 `
	if strings.Join(back, ";") != want {
		t.Fatalf("calls sent back %q, want %q", back, want)
	}
}
