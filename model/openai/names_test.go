package openai_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/conclave-ai/conclave/model"
	"github.com/conclave-ai/conclave/model/openai"
	"github.com/conclave-ai/conclave/model/openai/openaitest"
)

// TestModel_ToolNamesOnTheWire: tools whose names the API refuses (an MCP
// server's "web.search", a name colliding with another's sanitized form,
// one of 64 bytes with dots, one starting with a digit) are offered under
// names it accepts, unique, the same in the history of earlier turns;
// the model's calls by those names come back under the tools' own names,
// and openaitest (which refuses what the API refuses) serves the request.
// A description over the API's 1,024 characters is cut.
func TestModel_ToolNamesOnTheWire(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", 30) + "." + strings.Repeat("b", 33) // 64 bytes
	srv := openaitest.NewServer(t, openaitest.Config{Replies: []openaitest.Reply{{Chunks: []openaitest.Chunk{
		openaitest.CallChunk(openaitest.CallStart(0, "c1", "web__search"), openaitest.CallArgs(0, `{"q":"sky"}`)),
		openaitest.CallChunk(openaitest.CallStart(1, "c2", "web__search_2"), openaitest.CallArgs(1, `{}`)),
		openaitest.CallChunk(openaitest.CallStart(2, "c3", "delegate"), openaitest.CallArgs(2, `{"task":"t"}`)),
		openaitest.FinishChunk("tool_calls"),
	}}}})
	obj := json.RawMessage(`{"type":"object"}`)
	req := workerReq()
	req.Turn = 2
	req.Tools = []model.ToolDef{
		{Name: "web.search", Schema: obj, Description: strings.Repeat("é", 1500)},
		{Name: "web__search", Schema: obj}, // valid: it keeps its name, and web.search takes web__search_2
		{Name: long, Schema: obj},
		{Name: "9lives.x", Schema: obj},
		{Name: "delegate", Schema: obj},
	}
	req.History = []model.Exchange{{Calls: []model.ToolCall{{ID: "h1", Name: "web.search", Args: json.RawMessage(`{}`)}},
		Results: []model.ToolResult{{CallID: "h1", Name: "web.search", Content: "r"}}}}
	chunks := streamTurn(t, srv, openai.Config{}, &req)
	sent := srv.Requests()[0]
	var offered []string
	for _, tl := range sent.Tools {
		offered = append(offered, tl.Function.Name)
		if n := len([]rune(tl.Function.Description)); n > openaitest.MaxFunctionDescription {
			t.Errorf("%s: description of %d characters", tl.Function.Name, n)
		}
	}
	want := []string{"web__search_2", "web__search", strings.Repeat("a", 30) + "__" + strings.Repeat("b", 32), "t_9lives__x", "delegate"}
	if strings.Join(offered, " ") != strings.Join(want, " ") {
		t.Fatalf("offered %q, want %q", offered, want)
	}
	if h := sent.Messages[2].ToolCalls; len(h) != 1 || h[0].Function.Name != "web__search_2" {
		t.Fatalf("history call sent as %+v, want web__search_2", h)
	}
	var got []string
	for _, c := range chunks {
		if c, ok := c.(*model.Call); ok {
			got = append(got, c.Call.Name)
		}
	}
	if strings.Join(got, " ") != "web__search web.search delegate" {
		t.Fatalf("calls came back as %q", got)
	}
}

// TestModel_ToolCallStreamsOfRealServers: the tool-call streaming of
// servers that do not follow OpenAI's (index per call, id and name once,
// arguments in pieces) folds into the calls they meant, from their wire
// samples: Ollama 0.20 streams each parallel call whole at index 0 with
// its own id; older Ollama sends no index at all; NIM and some proxies
// resend the whole name in every delta; llama.cpp splits names too.
func TestModel_ToolCallStreamsOfRealServers(t *testing.T) {
	t.Parallel()
	frame := func(delta string) string {
		return `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","system_fingerprint":"fp_ollama","choices":[{"index":0,"delta":` + delta + `,"finish_reason":null}]}`
	}
	finish := `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`
	for _, tc := range []struct {
		name   string
		frames []string
		want   string // calls as id name args, ";"-separated
	}{
		{"ollama 0.20: parallel calls at index 0", []string{
			frame(`{"role":"assistant","content":"","tool_calls":[{"id":"call_a","index":0,"type":"function","function":{"name":"search","arguments":"{\"query\":\"sky\"}"}}]}`),
			frame(`{"role":"assistant","content":"","tool_calls":[{"id":"call_b","index":0,"type":"function","function":{"name":"search","arguments":"{\"query\":\"sea\"}"}}]}`),
			finish,
		}, `call_a search {"query":"sky"};call_b search {"query":"sea"}`},
		{"older ollama: no index", []string{
			frame(`{"role":"assistant","content":"","tool_calls":[{"id":"call_a","type":"function","function":{"name":"search","arguments":"{\"query\":\"sky\"}"}}]}`),
			frame(`{"role":"assistant","content":"","tool_calls":[{"id":"call_b","type":"function","function":{"name":"delegate","arguments":"{\"task\":\"t\"}"}}]}`),
			finish,
		}, `call_a search {"query":"sky"};call_b delegate {"task":"t"}`},
		{"names resent in every delta", []string{
			frame(`{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"search","arguments":"{\"que"}}]}`),
			frame(`{"tool_calls":[{"index":0,"function":{"name":"search","arguments":"ry\":\"sky\"}"}}]}`),
			frame(`{"tool_calls":[{"index":1,"id":"c2","type":"function","function":{"name":"delegate","arguments":""}}]}`),
			frame(`{"tool_calls":[{"index":1,"function":{"name":"delegate","arguments":"{\"task\":\"t\"}"}}]}`),
			finish,
		}, `c1 search {"query":"sky"};c2 delegate {"task":"t"}`},
		{"split names", []string{
			frame(`{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"sea","arguments":""}}]}`),
			frame(`{"tool_calls":[{"index":0,"function":{"name":"rch","arguments":"{}"}}]}`),
			finish,
		}, `c1 search {}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := openaitest.NewServer(t, openaitest.Config{Replies: []openaitest.Reply{{Raw: tc.frames}}})
			chunks := streamTurn(t, srv, openai.Config{}, nil)
			var got []string
			for _, c := range chunks {
				if c, ok := c.(*model.Call); ok {
					got = append(got, c.Call.ID+" "+c.Call.Name+" "+string(c.Call.Args))
				}
			}
			if strings.Join(got, ";") != tc.want {
				t.Fatalf("calls %q, want %q", got, tc.want)
			}
		})
	}
}
