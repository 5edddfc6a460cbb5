package agui_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/testkit"
	"github.com/conclave-ai/conclave/transport"
	"github.com/conclave-ai/conclave/transport/agui"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// harness serves the AG-UI handler and the rest of the API on one server,
// as conclave serve does once the route is wired.
type harness struct {
	t      testing.TB
	engine *actors.Engine
	agui   *agui.Handler
	srv    *httptest.Server
}

func newHarness(t testing.TB, cfg agui.Config) *harness {
	t.Helper()
	return newHarnessWith(t, actors.Config{}, cfg)
}

// newHarnessWith is newHarness on an engine of configuration ecfg.
func newHarnessWith(t testing.TB, ecfg actors.Config, cfg agui.Config) *harness {
	t.Helper()
	e := testkit.NewEngine(t, ecfg)
	api, err := transport.New(transport.Config{Engine: e})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Engine = e
	h := agui.New(cfg)
	mux := http.NewServeMux()
	mux.Handle("/api/v1/agui", h)
	mux.Handle("/", api.Handler())
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testkit.Watchdog)
		defer cancel()
		if err := h.Shutdown(ctx); err != nil {
			t.Errorf("agui shutdown: %v", err)
		}
		srv.Close()
		if err := api.Shutdown(ctx); err != nil {
			t.Errorf("api shutdown: %v", err)
		}
	})
	return &harness{t: t, engine: e, agui: h, srv: srv}
}

// input builds a RunAgentInput as HttpAgent sends it.
func input(thread, run, question string, props map[string]any) map[string]any {
	in := map[string]any{
		"threadId": thread, "runId": run, "protocolVersion": "1.0", "state": map[string]any{},
		"messages": []any{}, "tools": []any{}, "context": []any{}, "forwardedProps": map[string]any{},
	}
	if question != "" {
		in["messages"] = []any{map[string]any{"id": "u-" + run, "role": "user", "content": question}}
	}
	if props != nil {
		in["forwardedProps"] = props
	}
	return in
}

func (h *harness) post(ctx context.Context, body any) *http.Response {
	h.t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		h.t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.srv.URL+"/api/v1/agui", bytes.NewReader(b))
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	return resp
}

// stream is one AG-UI run as a client reads it.
type aguiRun struct {
	events []map[string]any
	v      *verifier
}

func (r *aguiRun) last() map[string]any { return r.events[len(r.events)-1] }

func (r *aguiRun) outcome() map[string]any {
	o, _ := r.last()["outcome"].(map[string]any)
	return o
}

func (r *aguiRun) interrupts() []map[string]any {
	var out []map[string]any
	for _, x := range asSlice(r.outcome()["interrupts"]) {
		out = append(out, x.(map[string]any))
	}
	return out
}

func (r *aguiRun) count(typ string) int {
	n := 0
	for _, e := range r.events {
		if e["type"] == typ {
			n++
		}
	}
	return n
}

func (r *aguiRun) conclaveRunID() messages.RunID {
	md, _ := r.events[0]["metadata"].(map[string]any)
	c, _ := md["conclave"].(map[string]any)
	s, _ := c["runId"].(string)
	return messages.RunID(s)
}

// readRun reads an SSE response to its end, checking every frame with v,
// and calls each (if set) after every event.
func readRun(t testing.TB, resp *http.Response, v *verifier, each func(map[string]any)) *aguiRun {
	t.Helper()
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	r := testkit.NewSSEReader(resp.Body)
	run := &aguiRun{v: v}
	start := len(v.events)
	for {
		f, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("SSE: %v", err)
		}
		if f.Comment != "" || f.Data == "" {
			continue
		}
		if f.ID != "" || f.Event != "" {
			t.Fatalf("unexpected SSE field in %+v", f)
		}
		if err := v.event([]byte(f.Data)); err != nil {
			t.Fatalf("verify: %v\nframe: %s", err, f.Data)
		}
		if each != nil {
			each(v.events[len(v.events)-1])
		}
	}
	if err := v.end(); err != nil {
		t.Fatalf("verify: %v", err)
	}
	run.events = v.events[start:]
	return run
}

// do posts body and reads the AG-UI run it answers.
func (h *harness) do(body map[string]any, v *verifier) *aguiRun {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Watchdog)
	defer cancel()
	return readRun(h.t, h.post(ctx, body), v, nil)
}

// errorBody posts body and expects a JSON error.
func (h *harness) errorBody(body []byte, contentType string, status int, code string) {
	h.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, h.srv.URL+"/api/v1/agui", bytes.NewReader(body))
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	var eb messages.ErrorBody
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, &eb); err != nil {
		h.t.Fatalf("status %d, body %q is not an error body", resp.StatusCode, b)
	}
	if resp.StatusCode != status || eb.Error.Code != code {
		h.t.Fatalf("got %d %s (%s), want %d %s", resp.StatusCode, eb.Error.Code, eb.Error.Message, status, code)
	}
}

// approveAll answers every interrupt of r with approve (info requests with a response).
func approveAll(r *aguiRun) []any {
	var out []any
	for _, in := range r.interrupts() {
		e := map[string]any{"interruptId": in["id"], "status": "resolved", "payload": map[string]any{"approved": true}}
		if in["reason"] == agui.ReasonInputRequired {
			e["payload"] = map[string]any{"response": "forty-two"}
		}
		out = append(out, e)
	}
	return out
}

func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testkit.Watchdog)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
