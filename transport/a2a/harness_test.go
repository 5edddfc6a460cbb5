package a2a_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/testkit"
	"github.com/conclave-ai/conclave/transport/a2a"
)

// harness serves a handler on a real engine over loopback HTTP.
type harness struct {
	t      *testing.T
	engine *actors.Engine
	h      *a2a.Handler
	srv    *httptest.Server
	client *http.Client
	ids    atomic.Int64
}

func newHarness(t *testing.T, cfg a2a.Config) *harness {
	t.Helper()
	return newHarnessWith(t, actors.Config{}, cfg)
}

// newHarnessWith is newHarness on an engine configured with ecfg.
func newHarnessWith(t *testing.T, ecfg actors.Config, cfg a2a.Config) *harness {
	t.Helper()
	e := testkit.NewEngine(t, ecfg) // shut down last (cleanups run in reverse)
	cfg.Engine = e
	if cfg.Logger == nil {
		cfg.Logger = testkit.TestLogger(t, 8)
	}
	h, err := a2a.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(a2a.CardPath, h.Card())
	mux.Handle(a2a.RPCPath, h.RPC())
	srv := httptest.NewServer(mux)
	hs := &harness{t: t, engine: e, h: h, srv: srv, client: &http.Client{Timeout: testkit.Watchdog}}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testkit.Watchdog)
		defer cancel()
		if err := h.Shutdown(ctx); err != nil {
			t.Errorf("a2a shutdown: %v", err)
		}
		srv.Close()
		hs.client.CloseIdleConnections()
	})
	return hs
}

// reply is a JSON-RPC response as the client sees it.
type reply struct {
	Status  int
	Header  http.Header
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result"`
	Error   *a2a.RPCError   `json:"error"`
}

// post sends a raw body to the RPC endpoint with the given headers
// (defaults: JSON, A2A-Version 1.0).
func (hs *harness) post(body []byte, hdr map[string]string) (*http.Response, error) {
	req, err := http.NewRequest(http.MethodPost, hs.srv.URL+a2a.RPCPath, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("A2A-Version", "1.0")
	for k, v := range hdr {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	return hs.client.Do(req)
}

func (hs *harness) body(method string, params any) []byte {
	b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": hs.ids.Add(1), "method": method, "params": params})
	if err != nil {
		hs.t.Fatal(err)
	}
	return b
}

// call makes a unary call.
func (hs *harness) call(method string, params any) reply {
	hs.t.Helper()
	return hs.raw(hs.body(method, params), nil)
}

func (hs *harness) raw(body []byte, hdr map[string]string) reply {
	hs.t.Helper()
	resp, err := hs.post(body, hdr)
	if err != nil {
		hs.t.Fatal(err)
	}
	defer resp.Body.Close()
	var r reply
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, &r); err != nil {
		hs.t.Fatalf("answer is not JSON (%d): %s", resp.StatusCode, b)
	}
	r.Status, r.Header = resp.StatusCode, resp.Header
	return r
}

// mustResult decodes a successful reply's result.
func mustResult[T any](t *testing.T, r reply) T {
	t.Helper()
	var v T
	if r.Error != nil {
		t.Fatalf("error %d: %s", r.Error.Code, r.Error.Message)
	}
	if err := json.Unmarshal(r.Result, &v); err != nil {
		t.Fatalf("result %s: %v", r.Result, err)
	}
	return v
}

// sse reads one streaming call.
type sse struct {
	resp *http.Response
	r    *bufio.Reader
}

// stream starts a streaming call; an error answer (not a stream) is
// returned as a reply.
func (hs *harness) stream(ctx context.Context, method string, params any) (*sse, *reply) {
	hs.t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, hs.srv.URL+a2a.RPCPath, bytes.NewReader(hs.body(method, params)))
	if err != nil {
		hs.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("A2A-Version", "1.0")
	resp, err := hs.client.Do(req)
	if err != nil {
		hs.t.Fatal(err)
	}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		defer resp.Body.Close()
		var r reply
		b, _ := io.ReadAll(resp.Body)
		if err := json.Unmarshal(b, &r); err != nil {
			hs.t.Fatalf("answer is neither a stream nor JSON (%d): %s", resp.StatusCode, b)
		}
		r.Status = resp.StatusCode
		return nil, &r
	}
	return &sse{resp: resp, r: bufio.NewReader(resp.Body)}, nil
}

// next returns the next frame's JSON-RPC response, io.EOF at the end.
func (s *sse) next() (reply, error) {
	var data []string
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			if err == io.EOF && len(data) == 0 && line == "" {
				return reply{}, io.EOF
			}
			return reply{}, fmt.Errorf("truncated frame: %q: %w", line, err)
		}
		line = strings.TrimSuffix(line, "\n")
		if strings.HasSuffix(line, "\r") {
			return reply{}, errors.New("CRLF line ending")
		}
		switch {
		case line == "":
			if len(data) == 0 {
				continue
			}
			var r reply
			if err := json.Unmarshal([]byte(strings.Join(data, "\n")), &r); err != nil {
				return reply{}, err
			}
			return r, nil
		case strings.HasPrefix(line, ":"), strings.HasPrefix(line, "event:"):
		case strings.HasPrefix(line, "data: "):
			data = append(data, strings.TrimPrefix(line, "data: "))
		default:
			return reply{}, fmt.Errorf("unexpected line %q", line)
		}
	}
}

func (s *sse) close() { s.resp.Body.Close() }

// all reads frames to the end of the stream.
func (s *sse) all(t *testing.T) []reply {
	t.Helper()
	defer s.close()
	var out []reply
	for {
		r, err := s.next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("after %d frames: %v", len(out), err)
		}
		out = append(out, r)
	}
}

func frameOf(t *testing.T, r reply) a2a.StreamResponse {
	t.Helper()
	return mustResult[a2a.StreamResponse](t, r)
}

// userText is a user message with text parts.
func userText(text string, meta any) map[string]any {
	m := map[string]any{"messageId": "m-" + text, "role": "ROLE_USER", "parts": []any{map[string]any{"text": text}}}
	if meta != nil {
		m["metadata"] = meta
	}
	return m
}

// answer is a user message answering task (in context) with parts.
func answer(task, context string, parts ...any) map[string]any {
	return map[string]any{"messageId": "answer", "role": "ROLE_USER", "taskId": task, "contextId": context, "parts": parts}
}

// checkStream checks the A2A stream rules on a whole stream: the Task
// first, then updates of the same task and context, the last one (and only
// it) terminal or input-required; artifacts created before they are
// appended to and never touched after their last chunk.
func checkStream(t *testing.T, frames []a2a.StreamResponse) (last a2a.TaskState) {
	t.Helper()
	if len(frames) == 0 || frames[0].Task == nil {
		t.Fatalf("the stream does not start with a task")
	}
	task := frames[0].Task
	state := task.Status.State
	artifacts := map[string]string{} // id → open|closed
	for _, a := range task.Artifacts {
		artifacts[a.ArtifactID] = "open"
	}
	for i, f := range frames[1:] {
		if state.Terminal() || state.Interrupted() {
			t.Fatalf("frame %d follows the final state %s", i+1, state)
		}
		switch {
		case f.StatusUpdate != nil:
			u := f.StatusUpdate
			if u.TaskID != task.ID || u.ContextID != task.ContextID {
				t.Fatalf("frame %d is about %s/%s", i+1, u.TaskID, u.ContextID)
			}
			state = u.Status.State
		case f.ArtifactUpdate != nil:
			u := f.ArtifactUpdate
			if u.TaskID != task.ID || u.ContextID != task.ContextID {
				t.Fatalf("frame %d is about %s/%s", i+1, u.TaskID, u.ContextID)
			}
			id := u.Artifact.ArtifactID
			switch {
			case artifacts[id] == "closed":
				t.Fatalf("frame %d touches artifact %s after its last chunk", i+1, id)
			case u.Append && artifacts[id] == "":
				t.Fatalf("frame %d appends to artifact %s before creating it", i+1, id)
			}
			artifacts[id] = "open"
			if u.LastChunk {
				artifacts[id] = "closed"
			}
		default:
			t.Fatalf("frame %d is neither a status nor an artifact update", i+1)
		}
	}
	if !state.Terminal() && !state.Interrupted() {
		t.Fatalf("the stream ended in state %s", state)
	}
	return state
}

func frames(t *testing.T, rs []reply) []a2a.StreamResponse {
	t.Helper()
	out := make([]a2a.StreamResponse, 0, len(rs))
	for _, r := range rs {
		out = append(out, frameOf(t, r))
	}
	return out
}

// interruptsOf returns the data parts of an input-required status.
func interruptsOf(t *testing.T, st a2a.TaskStatus) []a2a.InterruptData {
	t.Helper()
	if st.State != a2a.StateInputRequired || st.Message == nil {
		t.Fatalf("status %s has no input request", st.State)
	}
	var out []a2a.InterruptData
	for _, p := range st.Message.Parts {
		if p.Data != nil {
			var d a2a.InterruptData
			if err := json.Unmarshal(p.Data, &d); err != nil {
				t.Fatal(err)
			}
			out = append(out, d)
		}
	}
	if len(out) == 0 {
		t.Fatalf("input-required status without data parts")
	}
	return out
}

func lastStatus(fs []a2a.StreamResponse) a2a.TaskStatus {
	f := fs[len(fs)-1]
	if f.Task != nil {
		return f.Task.Status
	}
	return f.StatusUpdate.Status
}

var _ = messages.LocalTenant
