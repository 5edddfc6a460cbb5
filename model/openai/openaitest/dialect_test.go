package openaitest_test

import (
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/model"
	"github.com/conclave-ai/conclave/model/openai"
	"github.com/conclave-ai/conclave/model/openai/openaitest"
)

// TestDialect_Render: in each dialect, the council's answer to a worker's
// first turn (reasoning, text, three parallel calls) has the marks of the
// server's wire format: Azure's prompt_filter_results first chunk and
// content_filter_results, OpenRouter's comments, Groq's x_groq usage,
// DeepSeek's cache counters, Gemini's indexless calls with their
// thought_signature and "stop", Mistral's 9-character ids in the finish
// chunk, Ollama 0.20's calls all at index 0, older Ollama's empty
// finish_reason and missing usage, LiteLLM's calls from index 1, NIM's
// names in every delta.
func TestDialect_Render(t *testing.T) {
	t.Parallel()
	sc := messages.Scenario{Nodes: 1, Tokens: 2, ReasoningTokens: 1, ToolsPerNode: 2, SubagentsPerNode: 1}
	obj := json.RawMessage(`{"type":"object"}`)
	req := model.Request{Role: model.RoleWorker, AgentID: "n001", Question: "q", Goal: "g", Turn: 1, Attempt: 1,
		Tools: []model.ToolDef{{Name: model.ToolSearch, Schema: obj}, {Name: model.ToolDelegate, Schema: obj}}}
	for _, tc := range []struct {
		d         openaitest.Dialect
		want, not []string
	}{
		{openaitest.OpenAI, []string{`"delta":{"role":"assistant","content":""}`, `"reasoning_content":`, `"choices":[],"usage":{`}, nil},
		{openaitest.Azure, []string{`data: {"choices":[],"created":0,"id":"","model":"","object":"","prompt_filter_results":`,
			`"finish_reason":null,"content_filter_results":{"hate"`, `"content_filter_offsets"`}, nil},
		{openaitest.VLLM, []string{`"id":"chatcmpl-tool-`, `"reasoning_content":`}, nil},
		{openaitest.LlamaCpp, []string{`"reasoning_content":`, `"timings":{`, `"choices":[],"usage":{`}, nil},
		{openaitest.Ollama020, []string{`"reasoning":`, `"tool_calls":[{"index":0,"id":"call_`}, []string{`"index":1,"id"`}},
		{openaitest.OllamaOld, []string{`"finish_reason":""`, `"finish_reason":"stop"`, `"tool_calls":[{"id":"call_`}, []string{`"usage"`, `"index":1`, `"reasoning`}},
		{openaitest.LiteLLM, []string{`"tool_calls":[{"index":1,"id":"toolu_`, `"cache_creation_input_tokens":`}, []string{`"index":0,"id"`}},
		{openaitest.OpenRouter, []string{": OPENROUTER PROCESSING\n\n", `"reasoning":`}, []string{`"reasoning_content"`}},
		{openaitest.Groq, []string{`"x_groq":{"id":"req_openaitest","usage":{`, `"choices":[],"usage":{`}, nil},
		{openaitest.DeepSeek, []string{`"prompt_cache_hit_tokens":`, `"finish_reason":"tool_calls"}],"usage":{`}, []string{`prompt_tokens_details`}},
		{openaitest.Gemini, []string{`"tool_calls":[{"id":"function-call-`, `"extra_content":{"google":{"thought_signature"`, `"finish_reason":"stop"}],"usage":{`},
			[]string{`"reasoning`, `"finish_reason":"tool_calls"`}},
		{openaitest.Mistral, []string{`"finish_reason":"tool_calls"}],"usage":{`}, []string{`"reasoning`}},
		{openaitest.NIM, []string{`"tool_calls":[{"index":0,"function":{"name":"search","arguments":`}, nil},
	} {
		t.Run(tc.d.Name, func(t *testing.T) {
			t.Parallel()
			srv := openaitest.NewServer(t, openaitest.Config{Council: &sc, Dialect: tc.d})
			tr := &http.Transport{}
			t.Cleanup(tr.CloseIdleConnections)
			m, err := openai.New(openai.Config{BaseURL: srv.URL, Model: "m", HTTPClient: &http.Client{Transport: tr}})
			if err != nil {
				t.Fatal(err)
			}
			st, err := m.Stream(t.Context(), req)
			if err != nil {
				t.Fatal(err)
			}
			for {
				if _, err := st.Recv(); err == io.EOF {
					break
				} else if err != nil {
					t.Fatal(err)
				}
			}
			_ = st.Close()
			sent, err := json.Marshal(srv.Requests()[0]) // the backend's request, again
			if err != nil {
				t.Fatal(err)
			}
			_, body := post(t, srv.URL, string(sent))
			for _, w := range tc.want {
				if !strings.Contains(body, w) {
					t.Errorf("no %q in\n%s", w, body)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(body, n) {
					t.Errorf("%q in\n%s", n, body)
				}
			}
			names := 3 // each call named once
			if tc.d.Name == "nim" {
				names = 9 // in each of its three deltas
			}
			if !strings.HasSuffix(body, "data: [DONE]\n\n") || strings.Count(body, `"name":"`) != names {
				t.Errorf("want 3 calls named %d times in all, then [DONE]:\n%s", names, body)
			}
			if tc.d.Name == "mistral" {
				ids := regexp.MustCompile(`"tool_calls":\[\{"index":0,"id":"([a-zA-Z0-9]{9})"`).FindStringSubmatch(body)
				if ids == nil || !strings.Contains(body, `"finish_reason":"tool_calls"`) {
					t.Errorf("no 9-character call id in the finish chunk:\n%s", body)
				}
			}
		})
	}
}
