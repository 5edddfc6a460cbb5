package a2aclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/remote"
	"github.com/conclave-ai/conclave/transport/a2a"
	"github.com/conclave-ai/conclave/transport/a2a/a2aclient"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeA2A is a strict A2A v1.0 JSON-RPC server: it refuses what our
// server refuses (a missing A2A-Version, a Content-Type other than JSON,
// a missing Authorization, fields A2A does not define) and answers each
// method from a script of SSE frames, verbatim wire samples of our server.
type fakeA2A struct {
	t    *testing.T
	auth string
	mu   sync.Mutex
	// streams are the answers of the streaming calls, in call order: the
	// raw SSE body of each (a body that ends without a terminal frame is
	// a dropped stream).
	streams []string
	// unary answers GetTask and CancelTask: the raw JSON-RPC result or error.
	unary map[string]string
	calls []string // "Method params" of every call
}

func (f *fakeA2A) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/agent-card.json", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != f.auth {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"name":"Fake","description":"d","version":"1","supportedInterfaces":[{"url":"http://%s/a2a","protocolBinding":"JSONRPC","protocolVersion":"1.0"}],"capabilities":{"streaming":true,"pushNotifications":false,"extendedAgentCard":false},"defaultInputModes":["text/plain"],"defaultOutputModes":["text/plain"],"skills":[]}`, r.Host)
	})
	mux.HandleFunc("POST /a2a", func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Header.Get("Authorization") != f.auth:
			http.Error(w, "no", http.StatusUnauthorized)
			return
		case r.Header.Get("A2A-Version") != "1.0", r.Header.Get("Content-Type") != "application/json":
			f.t.Errorf("headers: A2A-Version %q, Content-Type %q", r.Header.Get("A2A-Version"), r.Header.Get("Content-Type"))
			http.Error(w, "bad headers", http.StatusBadRequest)
			return
		}
		var req struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Method  string          `json:"method"`
			Params  json.RawMessage `json:"params"`
		}
		dec := json.NewDecoder(r.Body)
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil || req.JSONRPC != "2.0" || len(req.ID) == 0 {
			f.t.Errorf("not a JSON-RPC request: %v", err)
			return
		}
		f.checkParams(req.Method, req.Params)
		f.mu.Lock()
		f.calls = append(f.calls, req.Method+" "+string(req.Params))
		var body string
		streaming := req.Method == "SendStreamingMessage" || req.Method == "SubscribeToTask"
		if streaming && len(f.streams) > 0 {
			body, f.streams = f.streams[0], f.streams[1:]
		}
		unary := f.unary[req.Method]
		f.mu.Unlock()
		if streaming {
			if strings.HasPrefix(body, "{") { // an error before the stream begins: plain JSON-RPC
				w.Header().Set("Content-Type", "application/json")
				fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":%s}`, req.ID, body)
				return
			}
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, strings.ReplaceAll(body, "$ID", string(req.ID)))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,%s}`, req.ID, unary)
	})
	return mux
}

// checkParams decodes params strictly into the wire type of method.
func (f *fakeA2A) checkParams(method string, params json.RawMessage) {
	var v any
	switch method {
	case "SendStreamingMessage":
		v = &a2a.SendMessageRequest{}
	case "SubscribeToTask":
		v = &a2a.SubscribeToTaskRequest{}
	case "GetTask":
		v = &a2a.GetTaskRequest{}
	case "CancelTask":
		v = &a2a.CancelTaskRequest{}
	default:
		f.t.Errorf("unknown method %s", method)
		return
	}
	dec := json.NewDecoder(strings.NewReader(string(params)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		f.t.Errorf("%s params %s: %v", method, params, err)
	}
	if m, ok := v.(*a2a.SendMessageRequest); ok && (m.Message == nil || m.Message.Role != a2a.RoleUser || m.Message.MessageID == "" || len(m.Message.Parts) != 1) {
		f.t.Errorf("SendStreamingMessage: bad message %s", params)
	}
}

func (f *fakeA2A) callLog() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

// frame is one SSE frame of a JSON-RPC result.
func frame(result string) string {
	return `data: {"jsonrpc":"2.0","id":$ID,"result":` + result + "}\n\n"
}

// Wire samples of our server (transport/a2a) for a one-node council.
var (
	sampleSubmitted = frame(`{"task":{"id":"r-1","contextId":"s-1","status":{"state":"TASK_STATE_SUBMITTED","timestamp":"2026-11-29T11:00:00.000Z"}}}`)
	sampleWorking   = frame(`{"statusUpdate":{"taskId":"r-1","contextId":"s-1","status":{"state":"TASK_STATE_WORKING","message":{"messageId":"m-2","contextId":"s-1","taskId":"r-1","role":"ROLE_AGENT","parts":[{"text":"n001 started: Aspect 1 of 1"}],"metadata":{"conclave":{"seq":4,"event":"node_started","lane":"node:n001","agentId":"n001"}}},"timestamp":"2026-11-29T11:00:00.010Z"}}}`)
	sampleChunk1    = frame(`{"artifactUpdate":{"taskId":"r-1","contextId":"s-1","artifact":{"artifactId":"answer","name":"answer","parts":[{"text":"Hello "}]},"metadata":{"conclave":{"seq":5,"event":"text_delta","lane":"synthesis","agentId":"synthesizer"}}}}`)
	sampleChunk2    = frame(`{"artifactUpdate":{"taskId":"r-1","contextId":"s-1","artifact":{"artifactId":"answer","parts":[{"text":"world"}]},"append":true,"metadata":{"conclave":{"seq":6,"event":"text_delta","lane":"synthesis","agentId":"synthesizer"}}}}`)
	sampleCompleted = frame(`{"statusUpdate":{"taskId":"r-1","contextId":"s-1","status":{"state":"TASK_STATE_COMPLETED","message":{"messageId":"m-9","contextId":"s-1","taskId":"r-1","role":"ROLE_AGENT","parts":[{"text":"Hello world"}]},"timestamp":"2026-11-29T11:00:01.000Z"}}}`)
)

func newFake(t *testing.T, streams ...string) (*fakeA2A, *httptest.Server) {
	t.Helper()
	f := &fakeA2A{t: t, auth: "Bearer s3cret-token", streams: streams, unary: map[string]string{}}
	srv := httptest.NewServer(f.handler())
	t.Cleanup(srv.Close)
	return f, srv
}

func dial(t *testing.T, srv *httptest.Server, cfg a2aclient.Config) *a2aclient.Client {
	t.Helper()
	cfg.Header = http.Header{"Authorization": {"Bearer s3cret-token"}}
	c, err := a2aclient.Dial(t.Context(), srv.URL+a2a.CardPath, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// collect gathers what Run emits, as "type text" lines.
type collect struct{ got []string }

func (c *collect) emit(p messages.Payload) error {
	switch p := p.(type) {
	case *messages.TextDeltaPayload:
		c.got = append(c.got, "text "+p.Delta)
	case *messages.RemoteTaskPayload:
		c.got = append(c.got, fmt.Sprintf("remote %s %s %s %q", p.TaskID, p.ContextID, p.State, p.Message))
	default:
		c.got = append(c.got, "other "+string(p.EventType()))
	}
	return nil
}

func TestDial_Card(t *testing.T) {
	t.Parallel()
	_, srv := newFake(t)
	c := dial(t, srv, a2aclient.Config{})
	if c.Card().Name != "Fake" || c.URL() != srv.URL+"/a2a" {
		t.Fatalf("card %q at %q", c.Card().Name, c.URL())
	}
	// Without the Authorization: refused, and the error does not leak it.
	if _, err := a2aclient.Dial(t.Context(), srv.URL+a2a.CardPath, a2aclient.Config{}); err == nil || !errors.Is(err, a2aclient.ErrBadCard) {
		t.Fatalf("no auth: %v", err)
	}
	// A card over the bound.
	big := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"name":"`+strings.Repeat("x", 2000)+`"}`)
	}))
	defer big.Close()
	if _, err := a2aclient.Dial(t.Context(), big.URL, a2aclient.Config{MaxCardBytes: 1000}); !errors.Is(err, a2aclient.ErrTooLarge) {
		t.Fatalf("big card: %v", err)
	}
	// A card of A2A 0.3 only (a2a-go v0.3.3's, say).
	old := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"name":"Old","capabilities":{"streaming":true},"supportedInterfaces":[{"url":"http://x/","protocolBinding":"JSONRPC","protocolVersion":"0.3"}]}`)
	}))
	defer old.Close()
	if _, err := a2aclient.Dial(t.Context(), old.URL, a2aclient.Config{}); !errors.Is(err, a2aclient.ErrBadCard) || !strings.Contains(err.Error(), "JSONRPC 0.3") {
		t.Fatalf("0.3 card: %v", err)
	}
	// A card whose interface is elsewhere gets no credentials.
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"name":"E","capabilities":{"streaming":true},"supportedInterfaces":[{"url":"http://evil.example/a2a","protocolBinding":"JSONRPC","protocolVersion":"1.0"}]}`)
	}))
	defer elsewhere.Close()
	if _, err := a2aclient.Dial(t.Context(), elsewhere.URL, a2aclient.Config{Header: http.Header{"Authorization": {"Bearer x"}}}); !errors.Is(err, a2aclient.ErrBadCard) || !strings.Contains(err.Error(), "another origin") {
		t.Fatalf("other origin: %v", err)
	}
	if _, err := a2aclient.Dial(t.Context(), elsewhere.URL, a2aclient.Config{}); err != nil {
		t.Fatalf("other origin, no credentials: %v", err)
	}
	// Nobody there.
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	if _, err := a2aclient.Dial(t.Context(), gone.URL, a2aclient.Config{CardTimeout: time.Second}); err == nil {
		t.Fatal("dialled a closed server")
	}
}

func TestAgent_Run(t *testing.T) {
	t.Parallel()
	f, srv := newFake(t, ": ping\n\n"+sampleSubmitted+sampleWorking+sampleChunk1+sampleChunk2+sampleCompleted)
	a := a2aclient.NewAgent("research", dial(t, srv, a2aclient.Config{}))
	var c collect
	res, err := a.Run(t.Context(), remote.Request{Text: "the goal\n[n000] input"}, c.emit)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`remote r-1 s-1 TASK_STATE_SUBMITTED ""`,
		`remote r-1 s-1 TASK_STATE_WORKING "n001 started: Aspect 1 of 1"`,
		"text Hello ", "text world",
		`remote r-1 s-1 TASK_STATE_COMPLETED "Hello world"`,
	}
	if fmt.Sprint(c.got) != fmt.Sprint(want) {
		t.Fatalf("emitted\n%q\nwant\n%q", c.got, want)
	}
	if res.Outcome != remote.Completed || res.Output != "Hello world" || res.TaskID != "r-1" || res.ContextID != "s-1" {
		t.Fatalf("result %+v", res)
	}
	calls := f.callLog()
	if len(calls) != 1 || !strings.Contains(calls[0], `"text":"the goal\n[n000] input"`) {
		t.Fatalf("calls %q", calls)
	}
}

// A stream that drops mid-task is followed again with SubscribeToTask
// after a backoff: the snapshot's text the lane already has is not
// repeated.
func TestAgent_Run_Resubscribes(t *testing.T) {
	t.Parallel()
	snapshot := frame(`{"task":{"id":"r-1","contextId":"s-1","status":{"state":"TASK_STATE_WORKING"},"artifacts":[{"artifactId":"answer","name":"answer","parts":[{"text":"Hello "}]}]}}`)
	f, srv := newFake(t,
		sampleSubmitted+sampleChunk1+"data: {\"jsonr",     // dropped mid-frame
		`{"code":-32603,"message":"journal unavailable"}`, // the first re-subscription fails
		snapshot+sampleChunk2+sampleCompleted)
	var waits []time.Duration
	a := a2aclient.NewAgent("research", dial(t, srv, a2aclient.Config{Backoff: 10 * time.Millisecond,
		Sleep: func(ctx context.Context, d time.Duration) error { waits = append(waits, d); return nil }}))
	var c collect
	res, err := a.Run(t.Context(), remote.Request{Text: "q"}, c.emit)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{`remote r-1 s-1 TASK_STATE_SUBMITTED ""`, "text Hello ", `remote r-1 s-1 TASK_STATE_WORKING ""`, "text world",
		`remote r-1 s-1 TASK_STATE_COMPLETED "Hello world"`}
	if fmt.Sprint(c.got) != fmt.Sprint(want) {
		t.Fatalf("emitted\n%q\nwant\n%q", c.got, want)
	}
	if res.Output != "Hello world" {
		t.Fatalf("result %+v", res)
	}
	if fmt.Sprint(waits) != "[10ms 20ms]" {
		t.Fatalf("backoff %v", waits)
	}
	calls := f.callLog()
	if len(calls) != 3 || !strings.HasPrefix(calls[1], `SubscribeToTask {"id":"r-1"}`) || !strings.HasPrefix(calls[2], "SubscribeToTask") {
		t.Fatalf("calls %q", calls)
	}
}

// The retries are bounded.
func TestAgent_Run_GivesUp(t *testing.T) {
	t.Parallel()
	_, srv := newFake(t, sampleSubmitted, sampleSubmitted, sampleSubmitted, sampleSubmitted)
	a := a2aclient.NewAgent("research", dial(t, srv, a2aclient.Config{Retries: 2,
		Sleep: func(context.Context, time.Duration) error { return nil }}))
	_, err := a.Run(t.Context(), remote.Request{Text: "q"}, (&collect{}).emit)
	if err == nil || !strings.Contains(err.Error(), "dropped 3 times") {
		t.Fatalf("err %v", err)
	}
}

// Re-subscribing to a task that ended meanwhile reads it with GetTask.
func TestAgent_Run_ResubscribeToFinishedTask(t *testing.T) {
	t.Parallel()
	f, srv := newFake(t, `{"code":-32004,"message":"task r-1 is in a terminal state"}`)
	f.unary["GetTask"] = `"result":{"id":"r-1","contextId":"s-1","status":{"state":"TASK_STATE_COMPLETED","message":{"messageId":"m","role":"ROLE_AGENT","parts":[{"text":"done"}]}},"artifacts":[{"artifactId":"answer","parts":[{"text":"done"}]}]}`
	a := a2aclient.NewAgent("research", dial(t, srv, a2aclient.Config{}))
	var c collect
	res, err := a.Run(t.Context(), remote.Request{TaskID: "r-1", Resubscribe: true}, c.emit)
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != remote.Completed || res.Output != "done" {
		t.Fatalf("result %+v", res)
	}
	if calls := f.callLog(); len(calls) != 2 || !strings.HasPrefix(calls[1], `GetTask {"id":"r-1"}`) {
		t.Fatalf("calls %q", calls)
	}
}

func TestAgent_Run_InputRequired(t *testing.T) {
	t.Parallel()
	ask := frame(`{"statusUpdate":{"taskId":"r-1","contextId":"s-1","status":{"state":"TASK_STATE_INPUT_REQUIRED","message":{"messageId":"m-3","role":"ROLE_AGENT","parts":[{"text":"n001 wants to call publish"},{"data":{"interruptId":"i-1","reason":"tool_approval","agentId":"n001","lane":"node:n001","toolCallId":"c1","toolName":"publish","toolArgs":{"title":"x"},"timeoutSeconds":600,"responseSchema":{}}}]}}}}`)
	_, srv := newFake(t, sampleSubmitted+ask)
	a := a2aclient.NewAgent("research", dial(t, srv, a2aclient.Config{}))
	res, err := a.Run(t.Context(), remote.Request{Text: "q"}, (&collect{}).emit)
	if err != nil {
		t.Fatal(err)
	}
	in := res.Input
	if res.Outcome != remote.InputRequired || in == nil || in.Kind != messages.InterruptToolApproval || in.ToolName != "publish" || string(in.ToolArgs) != `{"title":"x"}` {
		t.Fatalf("result %+v input %+v", res, in)
	}
}

func TestAgent_Run_Failed(t *testing.T) {
	t.Parallel()
	failed := frame(`{"statusUpdate":{"taskId":"r-1","contextId":"s-1","status":{"state":"TASK_STATE_FAILED","message":{"messageId":"m","role":"ROLE_AGENT","parts":[{"text":"node n001 failed: boom"}]}}}}`)
	_, srv := newFake(t, sampleSubmitted+failed)
	a := a2aclient.NewAgent("research", dial(t, srv, a2aclient.Config{}))
	res, err := a.Run(t.Context(), remote.Request{Text: "q"}, (&collect{}).emit)
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != remote.Failed || res.Reason != "TASK_STATE_FAILED: node n001 failed: boom" {
		t.Fatalf("result %+v", res)
	}
}

func TestAgent_Cancel(t *testing.T) {
	t.Parallel()
	f, srv := newFake(t)
	f.unary["CancelTask"] = `"result":{"id":"r-1","contextId":"s-1","status":{"state":"TASK_STATE_CANCELED"}}`
	a := a2aclient.NewAgent("research", dial(t, srv, a2aclient.Config{}))
	if err := a.Cancel(t.Context(), "r-1"); err != nil {
		t.Fatal(err)
	}
	f.unary["CancelTask"] = `"error":{"code":-32002,"message":"task r-1 is in a terminal state"}`
	if err := a.Cancel(t.Context(), "r-1"); err != nil {
		t.Fatalf("terminal: %v", err)
	}
	f.unary["CancelTask"] = `"error":{"code":-32001,"message":"task not found"}`
	var rerr *a2a.RPCError
	if err := a.Cancel(t.Context(), "r-1"); !errors.As(err, &rerr) || rerr.Code != a2a.CodeTaskNotFound {
		t.Fatalf("unknown: %v", err)
	}
}

func TestStream_FrameTooLarge(t *testing.T) {
	t.Parallel()
	_, srv := newFake(t, frame(`{"task":{"id":"r-1","contextId":"s-1","status":{"state":"TASK_STATE_WORKING","message":{"messageId":"m","role":"ROLE_AGENT","parts":[{"text":"`+strings.Repeat("x", 5000)+`"}]}}}}`))
	c := dial(t, srv, a2aclient.Config{MaxFrameBytes: 4096})
	st, err := c.SubscribeToTask(t.Context(), "r-1")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Next(); !errors.Is(err, a2aclient.ErrFrameTooLarge) {
		t.Fatalf("err %v", err)
	}
}

// A stream that goes silent (no frame, no ping) past IdleTimeout fails
// with ErrIdle.
func TestStream_Idle(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, strings.ReplaceAll(sampleSubmitted, "$ID", "1"))
			w.(http.Flusher).Flush()
			select {
			case <-release:
			case <-r.Context().Done():
			}
		})
		srv := newPipeServer(t, h)
		c := a2aclient.New(srv.url, a2aclient.Config{HTTP: srv.client, IdleTimeout: 30 * time.Second})
		st, err := c.SubscribeToTask(t.Context(), "r-1")
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		if fr, err := st.Next(); err != nil || fr.Task == nil {
			t.Fatalf("first frame %+v %v", fr, err)
		}
		start := time.Now()
		if _, err := st.Next(); !errors.Is(err, a2aclient.ErrIdle) {
			t.Fatalf("err %v", err)
		}
		if d := time.Since(start); d != 30*time.Second {
			t.Fatalf("idle after %v", d)
		}
		close(release)
		srv.close()
	})
}
