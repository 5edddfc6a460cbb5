package openaitest_test

import (
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
	res, body := post(t, srv.URL, `{"model":"m","stream":true,"messages":[]}`)
	want := `data: {"id":"chatcmpl-openaitest","object":"chat.completion.chunk","created":0,"model":"m","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}` + "\n\n" +
		`data: {"id":"chatcmpl-openaitest","object":"chat.completion.chunk","created":0,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n" +
		"data: [DONE]\n\n"
	if res.Header.Get("Content-Type") != "text/event-stream" || body != want {
		t.Fatalf("content type %q, body\n%s\nwant\n%s", res.Header.Get("Content-Type"), body, want)
	}
	res, body = post(t, srv.URL, `{"model":"m","stream":true,"messages":[]}`)
	if res.StatusCode != http.StatusTooManyRequests || res.Header.Get("Retry-After") != "2" || !strings.Contains(body, `"error":{"message":"Too Many Requests"`) {
		t.Fatalf("%d %v %s", res.StatusCode, res.Header, body)
	}
	res, _ = post(t, srv.URL, `{"model":"m"}`)
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
