package openaitest_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/model/openai/openaitest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func post(t *testing.T, url, body string) (*http.Response, string) {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	res, err := (&http.Client{Transport: tr}).Post(url+"/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res, string(b)
}

// TestServer_WireFormat: a scripted reply is SSE frames of chunk JSON, then
// [DONE]; an error reply is an OpenAI error body with its headers.
func TestServer_WireFormat(t *testing.T) {
	t.Parallel()
	srv := openaitest.NewServer(t, openaitest.Config{Replies: []openaitest.Reply{
		{Chunks: []openaitest.Chunk{openaitest.TextChunk("hi"), openaitest.FinishChunk("stop")}},
		{Status: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {"2"}}},
	}})
	const hi = `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	res, body := post(t, srv.URL, hi)
	want := `data: {"id":"chatcmpl-openaitest","object":"chat.completion.chunk","created":0,"model":"m","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}` + "\n\n" +
		`data: {"id":"chatcmpl-openaitest","object":"chat.completion.chunk","created":0,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n" +
		"data: [DONE]\n\n"
	if res.Header.Get("Content-Type") != "text/event-stream" || body != want {
		t.Fatalf("content type %q, body\n%s\nwant\n%s", res.Header.Get("Content-Type"), body, want)
	}
	res, body = post(t, srv.URL, hi)
	if res.StatusCode != http.StatusTooManyRequests || res.Header.Get("Retry-After") != "2" || !strings.Contains(body, `"error":{"message":"Too Many Requests"`) {
		t.Fatalf("%d %v %s", res.StatusCode, res.Header, body)
	}
	res, _ = post(t, srv.URL, hi)
	if res.StatusCode != http.StatusInternalServerError {
		t.Fatalf("no reply left: %d", res.StatusCode)
	}
}

// TestServer_CouncilRejectsUnknownPrompts: council mode answers 400 to a
// request that is not one of the backend's.
func TestServer_CouncilRejectsUnknownPrompts(t *testing.T) {
	t.Parallel()
	srv := openaitest.NewServer(t, openaitest.Config{Council: &messages.Scenario{Nodes: 1}})
	res, body := post(t, srv.URL, `{"model":"m","stream":true,"messages":[{"role":"system","content":"be nice"},{"role":"user","content":"hi"},{"role":"user","content":"<turn>\n1\n</turn>\n"}]}`)
	if res.StatusCode != http.StatusBadRequest || !strings.Contains(body, "unknown system prompt") {
		t.Fatalf("%d %s", res.StatusCode, body)
	}
}

// TestServer_RefusesWhatUpstreamRefuses: each documented request rule of
// the Chat Completions API is a 400 with upstream's error body (message,
// type, param, code); the request is not served.
// png is a data URL of a PNG; pdfPart a file part of a PDF.
const (
	png     = "data:image/png;base64,iVBORw0KGgo="
	pdfPart = `{"type":"file","file":{"filename":"a.pdf","file_data":"data:application/pdf;base64,JVBERi0xLjc="}}`
)

func imagePart(url string) string { return `{"type":"image_url","image_url":{"url":"` + url + `"}}` }

// TestServer_AcceptsContentParts: what the API takes passes the fake's
// rules (a user message of text, image and PDF parts), and a text-only
// model's server refuses the image.
func TestServer_AcceptsContentParts(t *testing.T) {
	t.Parallel()
	body := `{"model":"m","messages":[{"role":"system","content":[{"type":"text","text":"s"}]},{"role":"user","content":[{"type":"text","text":"q"},` +
		imagePart(png) + `,` + imagePart("https://img.example/a.png") + `,` + pdfPart + `]}]}`
	var req openaitest.Request
	if err := json.Unmarshal([]byte(body), &req); err != nil {
		t.Fatal(err)
	}
	if bad := openaitest.CheckRequest(&req); bad != nil {
		t.Fatalf("refused: %v", bad)
	}
	if len(req.Messages[1].Parts) != 4 || req.Messages[1].Content != "q" || req.Messages[1].Parts[3].File == nil {
		t.Fatalf("parts %+v", req.Messages[1])
	}
	srv := openaitest.NewServer(t, openaitest.Config{TextOnly: true})
	res, out := post(t, srv.URL, body)
	if res.StatusCode != http.StatusBadRequest || !strings.Contains(out, "Invalid content type. image_url is only supported by certain models.") {
		t.Fatalf("text-only: %d %s", res.StatusCode, out)
	}
}

func TestServer_RefusesWhatUpstreamRefuses(t *testing.T) {
	t.Parallel()
	srv := openaitest.NewServer(t, openaitest.Config{})
	tool := func(name string) string {
		return `{"type":"function","function":{"name":"` + name + `","parameters":{"type":"object"}}}`
	}
	many := make([]string, 129)
	for i := range many {
		many[i] = tool(fmt.Sprintf("t%d", i))
	}
	user := `{"role":"user","content":"q"}`
	call := `{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"web__search","arguments":"{}"}},{"id":"c2","type":"function","function":{"name":"x","arguments":"{}"}}]}`
	for _, tc := range []struct{ name, body, param, says string }{
		{"dotted tool name", `{"model":"m","messages":[` + user + `],"tools":[` + tool("web.search") + `]}`, "tools[0].function.name",
			"Invalid 'tools[0].function.name': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'."},
		{"long tool name", `{"model":"m","messages":[` + user + `],"tools":[` + tool(strings.Repeat("a", 65)) + `]}`, "tools[0].function.name", "string too long"},
		{"129 tools", `{"model":"m","messages":[` + user + `],"tools":[` + strings.Join(many, ",") + `]}`, "tools", "maximum length 128"},
		{"long description", `{"model":"m","messages":[` + user + `],"tools":[{"type":"function","function":{"name":"a","description":"` + strings.Repeat("d", 1025) + `"}}]}`,
			"tools[0].function.description", "maximum length 1024"},
		{"array schema", `{"model":"m","messages":[` + user + `],"tools":[{"type":"function","function":{"name":"a","parameters":{"type":"array"}}}]}`,
			"tools[0].function.parameters", `schema must be a JSON Schema of 'type: "object"'`},
		{"dotted name in history", `{"model":"m","messages":[` + user + `,{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"web.search","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"r"}]}`,
			"messages[1].tool_calls[0].function.name", "does not match pattern"},
		{"a call unanswered", `{"model":"m","messages":[` + user + `,` + call + `,{"role":"tool","tool_call_id":"c1","content":"r"},` + user + `]}`,
			"messages.[1].role", "did not have response messages: c2"},
		{"a tool message without its call", `{"model":"m","messages":[` + user + `,{"role":"tool","tool_call_id":"c9","content":"r"}]}`,
			"messages.[1].role", "must be a response to a preceeding message with 'tool_calls'"},
		{"temperature", `{"model":"m","temperature":2.5,"messages":[` + user + `]}`, "temperature", "Expected a value between 0 and 2"},
		{"no messages", `{"model":"m","messages":[]}`, "messages", "empty array"},
		// Content parts (the Chat Completions API's and its vision and PDF guides' rules).
		{"image in a system message", `{"model":"m","messages":[{"role":"system","content":[` + imagePart(png) + `]},` + user + `]}`,
			"messages[0].content[0].type", "Supported values are: 'text'."},
		{"file part in a tool message", `{"model":"m","messages":[` + user + `,` + call + `,{"role":"tool","tool_call_id":"c1","content":[` + pdfPart + `]},{"role":"tool","tool_call_id":"c2","content":"r"}]}`,
			"messages[2].content[0].type", "Supported values are: 'text'."},
		{"unknown part type", `{"model":"m","messages":[{"role":"user","content":[{"type":"video","video":{}}]}]}`,
			"messages[0].content[0].type", "Invalid value: 'video'. Supported values are: 'text', 'image_url', 'input_audio', and 'file'."},
		{"text part without text", `{"model":"m","messages":[{"role":"user","content":[{"type":"text"}]}]}`, "messages[0].content[0].text", "Missing required parameter"},
		{"empty parts", `{"model":"m","messages":[{"role":"user","content":[]}]}`, "messages[0].content", "empty array"},
		{"tiff image", `{"model":"m","messages":[{"role":"user","content":[` + imagePart("data:image/tiff;base64,AAAA") + `]}]}`,
			"messages[0].content[0].image_url.url", "image MIME type of 'image/png', 'image/jpeg', 'image/gif', and 'image/webp'"},
		{"image not base64", `{"model":"m","messages":[{"role":"user","content":[` + imagePart("data:image/png;base64,%%%") + `]}]}`,
			"messages[0].content[0].image_url.url", "Invalid image URL"},
		{"image detail", `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"` + png + `","detail":"max"}}]}]}`,
			"messages[0].content[0].image_url.detail", "Invalid value: 'max'"},
		{"a text file as file_data", `{"model":"m","messages":[{"role":"user","content":[{"type":"file","file":{"filename":"a.txt","file_data":"data:text/plain;base64,aGk="}}]}]}`,
			"messages[0].content[0].file.file_data", "application/pdf MIME type"},
		{"file_data and file_id", `{"model":"m","messages":[{"role":"user","content":[{"type":"file","file":{"file_id":"file-1","file_data":"data:application/pdf;base64,JVBERg=="}}]}]}`,
			"messages[0].content[0].file", "mutually exclusive"},
		{"neither", `{"model":"m","messages":[{"role":"user","content":[{"type":"file","file":{"filename":"a.pdf"}}]}]}`,
			"messages[0].content[0].file", "one of"},
	} {
		res, body := post(t, srv.URL, tc.body)
		var e struct {
			Error struct{ Message, Type, Param string }
		}
		if err := json.Unmarshal([]byte(body), &e); err != nil || res.StatusCode != http.StatusBadRequest || e.Error.Type != "invalid_request_error" ||
			e.Error.Param != tc.param || !strings.Contains(e.Error.Message, tc.says) {
			t.Errorf("%s: %d %s; want 400 invalid_request_error, param %s, saying %q", tc.name, res.StatusCode, body, tc.param, tc.says)
		}
	}
	if n := srv.Served(); n != 0 {
		t.Fatalf("%d refused requests were served", n)
	}
}
