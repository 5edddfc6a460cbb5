package transport_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/internal/runmetrics"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/testkit"
	"github.com/conclave-ai/conclave/transport"
)

type harness struct {
	t      *testing.T
	engine *actors.Engine
	srv    *transport.Server
	base   string
	client *http.Client
	// rt opens streams (no timeout: they are long); nil means
	// http.DefaultTransport.
	rt http.RoundTripper
}

// newHarness serves a fresh engine on a random loopback port and tears
// everything down (engine, then server) when the test ends.
func newHarness(t *testing.T, cfg transport.Config) *harness {
	t.Helper()
	return newHarnessWith(t, actors.Config{}, cfg)
}

// newHarnessWith is newHarness with an engine configured by ecfg (its
// Logger is the test's).
func newHarnessWith(t *testing.T, ecfg actors.Config, cfg transport.Config) *harness {
	t.Helper()
	ecfg.Logger = testkit.TestLogger(t, 8)
	e, err := actors.New(ecfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Engine = e
	if cfg.Logger == nil {
		cfg.Logger = testkit.TestLogger(t, 8) // errors only
	}
	srv, err := transport.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	l, err := srv.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	h := &harness{t: t, engine: e, srv: srv, base: "http://" + l.Addr().String(), client: &http.Client{Timeout: testkit.Watchdog}}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testkit.Watchdog)
		defer cancel()
		if err := e.Shutdown(ctx); err != nil {
			t.Errorf("engine shutdown: %v", err)
		}
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("server shutdown: %v", err)
		}
		if err := <-served; !errors.Is(err, transport.ErrServerClosed) {
			t.Errorf("Serve = %v", err)
		}
		h.client.CloseIdleConnections()
	})
	return h
}

func (h *harness) do(method, path string, body any, hdr ...string) (*http.Response, []byte) {
	h.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, _ := json.Marshal(b)
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, h.base+path, rd)
	if err != nil {
		h.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := h.client.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp, out
}

// afterRetry checks that an SSE stream starts with "retry: 1000" (the
// default reconnection delay) and returns the rest of it. testkit's strict
// reader knows only the fields of events.
func afterRetry(t testing.TB, body io.Reader) io.Reader {
	t.Helper()
	r, err := skipRetry(body)
	if err != nil {
		t.Error(err)
	}
	return r
}

// skipRetry reads the "retry: 1000" block that starts an SSE stream and
// returns the rest; it is safe off the test goroutine.
func skipRetry(body io.Reader) (io.Reader, error) {
	const want = "retry: 1000\n\n"
	buf := make([]byte, len(want))
	if _, err := io.ReadFull(body, buf); err != nil || string(buf) != want {
		return io.MultiReader(bytes.NewReader(buf), body), fmt.Errorf("stream starts with %q (%v), want %q", buf, err, want)
	}
	return body, nil
}

func (h *harness) startRun(body any, hdr ...string) messages.RunCreated {
	h.t.Helper()
	resp, out := h.do("POST", "/api/v1/runs", body, hdr...)
	if resp.StatusCode != http.StatusCreated {
		h.t.Fatalf("POST /runs = %d %s", resp.StatusCode, out)
	}
	var rc messages.RunCreated
	if err := json.Unmarshal(out, &rc); err != nil {
		h.t.Fatal(err)
	}
	return rc
}

// sse opens a stream; hdr are header name/value pairs.
func (h *harness) sse(ctx context.Context, query string, hdr ...string) (*http.Response, *testkit.SSEReader) {
	h.t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", h.base+"/api/v1/events/stream?"+query, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rt := h.rt
	if rt == nil {
		rt = http.DefaultTransport
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		h.t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		return resp, testkit.NewSSEReader(resp.Body)
	}
	return resp, testkit.NewSSEReader(afterRetry(h.t, resp.Body))
}

// readUntil reads envelopes from an SSE stream until stop (inclusive),
// checking that each frame's id and event match its envelope.
func readUntil(t *testing.T, r *testkit.SSEReader, stop func(*messages.Envelope) bool) []*messages.Envelope {
	t.Helper()
	var out []*messages.Envelope
	for {
		f, err := r.Next()
		if err != nil {
			t.Fatalf("SSE read after %d events: %v", len(out), err)
		}
		if f.Comment != "" && f.Data == "" {
			continue
		}
		var env messages.Envelope
		if err := json.Unmarshal([]byte(f.Data), &env); err != nil {
			t.Fatalf("frame %+v: %v", f, err)
		}
		if f.ID != strconv.FormatUint(env.Seq, 10) || f.Event != string(env.Type) {
			t.Fatalf("frame id/event %q/%q do not match envelope %d/%s", f.ID, f.Event, env.Seq, env.Type)
		}
		out = append(out, &env)
		if stop(&env) {
			return out
		}
	}
}

func terminalOf(run messages.RunID) func(*messages.Envelope) bool { return testkit.TerminalOf(run) }

func scenario(nodes, tokens int) *messages.Scenario {
	return &messages.Scenario{Nodes: nodes, Waves: min(3, nodes), Tokens: tokens, ToolsPerNode: 1, SubagentsPerNode: 1}
}

func TestSSE_FollowRun(t *testing.T) {
	t.Parallel()
	h := newHarness(t, transport.Config{})
	rc := h.startRun(messages.StartRun{Question: "why is the sky blue", Scenario: scenario(6, 12)})
	if !strings.HasPrefix(rc.StreamURL, h.base+"/api/v1/events/stream?session_id=") || !strings.HasPrefix(rc.WSURL, "ws://") {
		t.Fatalf("urls = %+v", rc)
	}
	ctx := context.Background()
	resp, r := h.sse(ctx, "session_id="+string(rc.SessionID))
	defer resp.Body.Close()
	for k, v := range map[string]string{"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no"} {
		if got := resp.Header.Get(k); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	events := readUntil(t, r, terminalOf(rc.RunID))
	testkit.AssertInvariants(t, events)
	if events[len(events)-1].Type != messages.RunFinished {
		t.Fatalf("ended with %s", events[len(events)-1].Type)
	}
	// The run's summary agrees.
	_, out := h.do("GET", "/api/v1/runs/"+string(rc.RunID), nil)
	var sum messages.RunSummary
	if err := json.Unmarshal(out, &sum); err != nil || sum.Status != messages.StatusFinished || sum.Nodes.Completed != 6 {
		t.Fatalf("GET run = %s (%v)", out, err)
	}
}

// TestSSE_ResumeWithLastEventID disconnects at a point in the run and
// reconnects with Last-Event-ID: the second stream holds exactly the rest.
func TestSSE_ResumeWithLastEventID(t *testing.T) {
	t.Parallel()
	h := newHarness(t, transport.Config{})
	rc := h.startRun(messages.StartRun{Question: "q", Scenario: &messages.Scenario{Nodes: 8, Tokens: 30, TokenDelayMS: 1}})
	for _, cut := range []int{1, 7, 40, 123} {
		ctx, cancel := context.WithCancel(context.Background())
		resp, r := h.sse(ctx, "session_id="+string(rc.SessionID))
		n := 0
		first := readUntil(t, r, func(*messages.Envelope) bool { n++; return n == cut })
		cancel()
		resp.Body.Close()
		last := first[len(first)-1].Seq

		resp, r = h.sse(context.Background(), "session_id="+string(rc.SessionID), "Last-Event-ID", strconv.FormatUint(last, 10))
		rest := readUntil(t, r, terminalOf(rc.RunID))
		resp.Body.Close()
		if rest[0].Seq != last+1 {
			t.Fatalf("cut %d: resumed at seq %d, want %d", cut, rest[0].Seq, last+1)
		}
		all := append(first, rest...)
		testkit.AssertInvariants(t, all)
	}
	// ?after= works the same.
	resp, r := h.sse(context.Background(), "session_id="+string(rc.SessionID)+"&after=5")
	defer resp.Body.Close()
	if evs := readUntil(t, r, terminalOf(rc.RunID)); evs[0].Seq != 6 {
		t.Fatalf("after=5 started at %d", evs[0].Seq)
	}
}

func TestSSE_HundredSubscribersIdentical(t *testing.T) {
	t.Parallel()
	h := newHarness(t, transport.Config{})
	rc := h.startRun(messages.StartRun{Question: "q", Scenario: &messages.Scenario{Nodes: 20, Tokens: 20, TokenDelayMS: 1}})
	const n = 100
	got := make([][]uint64, n)
	ids := make([][]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, r := h.sse(context.Background(), "session_id="+string(rc.SessionID))
			defer resp.Body.Close()
			for _, env := range readUntil(t, r, terminalOf(rc.RunID)) {
				got[i] = append(got[i], env.Seq)
				ids[i] = append(ids[i], env.ID.String())
			}
		}()
	}
	wg.Wait()
	for i := 1; i < n; i++ {
		if fmt.Sprint(ids[i]) != fmt.Sprint(ids[0]) {
			t.Fatalf("subscriber %d saw a different sequence (%d events vs %d)", i, len(ids[i]), len(ids[0]))
		}
	}
	for j, s := range got[0] {
		if s != uint64(j+1) {
			t.Fatalf("seq %d at position %d", s, j)
		}
	}
}

// TestSSE_SlowReaderDelaysNoOne: a client that stops reading does not hold
// back the others, and still gets every event once it reads again.
func TestSSE_SlowReaderDelaysNoOne(t *testing.T) {
	t.Parallel()
	h := newHarness(t, transport.Config{})
	// Big enough that the stalled client's socket buffers fill up.
	rc := h.startRun(messages.StartRun{Question: "q", Scenario: &messages.Scenario{Nodes: 200, Tokens: 60}})
	slowResp, slow := h.sse(context.Background(), "session_id="+string(rc.SessionID))
	defer slowResp.Body.Close()
	first := readUntil(t, slow, func(*messages.Envelope) bool { return true }) // then stall

	for range 3 { // fast clients finish the whole run while the slow one reads nothing
		resp, r := h.sse(context.Background(), "session_id="+string(rc.SessionID))
		events := readUntil(t, r, terminalOf(rc.RunID))
		resp.Body.Close()
		testkit.AssertInvariants(t, events)
	}
	rest := readUntil(t, slow, terminalOf(rc.RunID))
	testkit.AssertInvariants(t, append(first, rest...))
}

func TestAPI_TenantIsolation(t *testing.T) {
	t.Parallel()
	var toks transport.Tokens
	if err := toks.Add("token-aaaaaaaaaaaaaaaa", "acme"); err != nil {
		t.Fatal(err)
	}
	if err := toks.Add("token-bbbbbbbbbbbbbbbb", "globex"); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, transport.Config{Tokens: toks})
	acme := []string{"Authorization", "Bearer token-aaaaaaaaaaaaaaaa"}
	globex := []string{"Authorization", "Bearer token-bbbbbbbbbbbbbbbb"}
	rc := h.startRun(messages.StartRun{Question: "q", Scenario: scenario(2, 3)}, acme...)

	if resp, _ := h.do("GET", "/api/v1/runs/"+string(rc.RunID), nil); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no token: %d, want 401", resp.StatusCode)
	}
	if resp, _ := h.do("GET", "/api/v1/runs/"+string(rc.RunID), nil, "Authorization", "Bearer wrong-token-xxxxxxxx"); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("bad token: %d, want 401", resp.StatusCode)
	}
	for _, c := range []struct{ method, path string }{
		{"GET", "/api/v1/runs/" + string(rc.RunID)},
		{"POST", "/api/v1/runs/" + string(rc.RunID) + "/abort"},
		{"GET", "/api/v1/events/stream?session_id=" + string(rc.SessionID)},
	} {
		resp, body := h.do(c.method, c.path, nil, globex...)
		if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(body), `"code":"not_found"`) {
			t.Fatalf("globex %s %s = %d %s, want 404", c.method, c.path, resp.StatusCode, body)
		}
	}
	// Session ids are namespaced per tenant: globex using acme's session
	// id gets a session of its own (it cannot tell that acme's exists,
	// nor write into it).
	resp, body := h.do("POST", "/api/v1/runs", messages.StartRun{Question: "q", SessionID: rc.SessionID, Scenario: scenario(1, 1)}, globex...)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("globex run with acme's session id = %d %s, want 201 in a session of its own", resp.StatusCode, body)
	}
	acmeHead, err := h.engine.Head(context.Background(), "acme", rc.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	acmeResp, acmeStream := h.sse(context.Background(), "session_id="+string(rc.SessionID), acme...)
	defer acmeResp.Body.Close()
	for {
		f := readUntil(t, acmeStream, func(env *messages.Envelope) bool { return true })
		if f[0].RunID != rc.RunID {
			t.Fatalf("acme's stream shows globex's event %s of run %s", f[0].Type, f[0].RunID)
		}
		if f[0].Seq == acmeHead {
			break
		}
	}
	_, body = h.do("GET", "/api/v1/runs", nil, globex...)
	if strings.Contains(string(body), string(rc.RunID)) {
		t.Fatalf("globex lists acme's run: %s", body)
	}
	// access_token in the query works for EventSource.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sresp, _ := h.sse(ctx, "session_id="+string(rc.SessionID)+"&access_token=token-aaaaaaaaaaaaaaaa")
	sresp.Body.Close()
	if sresp.StatusCode != http.StatusOK {
		t.Fatalf("access_token stream = %d", sresp.StatusCode)
	}
}

func TestAPI_BadInput(t *testing.T) {
	t.Parallel()
	h := newHarness(t, transport.Config{})
	rc := h.startRun(messages.StartRun{Question: "q", Scenario: scenario(2, 2)})
	big := `{"question":"` + strings.Repeat("x", transport.DefaultMaxBody) + `"}`
	cases := []struct {
		name, method, path string
		body               any
		hdr                []string
		status             int
		code               string
	}{
		{"malformed json", "POST", "/api/v1/runs", `{"question":`, nil, 400, "invalid_json"},
		{"not an object", "POST", "/api/v1/runs", `[1,2]`, nil, 400, "invalid_json"},
		{"unknown field", "POST", "/api/v1/runs", `{"question":"q","colour":"red"}`, nil, 400, "unknown_field"},
		{"unknown scenario field", "POST", "/api/v1/runs", `{"question":"q","scenario":{"nodez":3}}`, nil, 400, "unknown_field"},
		{"trailing data", "POST", "/api/v1/runs", `{"question":"q"} {}`, nil, 400, "invalid_json"},
		{"trailing brace", "POST", "/api/v1/runs", `{"question":"q","scenario":{"nodes":3}}}`, nil, 400, "invalid_json"},
		{"invalid utf-8", "POST", "/api/v1/runs", "{\"question\":\"q\xff\"}", nil, 400, "invalid_json"},
		{"wrong type", "POST", "/api/v1/runs", `{"question":7}`, nil, 400, "invalid_json"},
		{"body over 1 MiB", "POST", "/api/v1/runs", big, nil, 413, "body_too_large"},
		{"empty question", "POST", "/api/v1/runs", `{"question":""}`, nil, 422, "bad_request"},
		{"bad scenario", "POST", "/api/v1/runs", `{"question":"q","scenario":{"nodes":-4}}`, nil, 422, "bad_request"},
		{"bad hitl", "POST", "/api/v1/runs", `{"question":"q","hitl":"always"}`, nil, 400, "invalid_json"},
		{"wrong media type", "POST", "/api/v1/runs", `question=q`, []string{"Content-Type", "text/plain"}, 415, "unsupported_media_type"},
		{"wrong method", "DELETE", "/api/v1/runs", nil, nil, 405, "method_not_allowed"},
		{"wrong method on stream", "POST", "/api/v1/events/stream?session_id=x", nil, nil, 405, "method_not_allowed"},
		{"unknown endpoint", "GET", "/api/v2/nothing", nil, nil, 404, "not_found"},
		{"unknown run", "GET", "/api/v1/runs/nope", nil, nil, 404, "not_found"},
		{"unknown session", "GET", "/api/v1/events/stream?session_id=nope", nil, nil, 404, "not_found"},
		{"missing session", "GET", "/api/v1/events/stream", nil, nil, 400, "bad_request"},
		{"non-numeric Last-Event-ID", "GET", "/api/v1/events/stream?session_id=" + string(rc.SessionID), nil, []string{"Last-Event-ID", "12abc"}, 400, "invalid_cursor"},
		{"negative after", "GET", "/api/v1/events/stream?session_id=" + string(rc.SessionID) + "&after=-1", nil, nil, 400, "invalid_cursor"},
		{"future Last-Event-ID", "GET", "/api/v1/events/stream?session_id=" + string(rc.SessionID), nil, []string{"Last-Event-ID", "99999999"}, 400, "cursor_ahead"},
		{"huge Last-Event-ID", "GET", "/api/v1/events/stream?session_id=" + string(rc.SessionID), nil, []string{"Last-Event-ID", "99999999999999999999999"}, 400, "invalid_cursor"},
		{"bad limit", "GET", "/api/v1/runs?limit=0", nil, nil, 400, "bad_request"},
		{"bad status", "GET", "/api/v1/runs?status=sleeping", nil, nil, 400, "bad_request"},
		{"ws without upgrade", "GET", "/api/v1/events/ws?session_id=" + string(rc.SessionID), nil, nil, 400, "bad_request"},
	}
	for _, c := range cases {
		resp, body := h.do(c.method, c.path, c.body, c.hdr...)
		var eb messages.ErrorBody
		if resp.StatusCode != c.status || json.Unmarshal(body, &eb) != nil || eb.Error.Code != c.code || eb.Error.Message == "" {
			t.Errorf("%s: %d %s, want %d with code %s", c.name, resp.StatusCode, truncate(body), c.status, c.code)
		}
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s: Content-Type %q", c.name, ct)
		}
	}
	// An unknown field's message says where it is.
	if _, body := h.do("POST", "/api/v1/runs", `{"question":"q","scenario":{"nodes":2,"colour":"red"}}`); !strings.Contains(string(body), `unknown field \"colour\" in scenario`) {
		t.Errorf("unknown scenario field: %s, want the message to name the path", body)
	}
	// Nothing broke: the server still runs councils.
	rc2 := h.startRun(messages.StartRun{Question: "still fine", Scenario: scenario(2, 2)})
	resp, r := h.sse(context.Background(), "session_id="+string(rc2.SessionID))
	defer resp.Body.Close()
	testkit.AssertInvariants(t, readUntil(t, r, terminalOf(rc2.RunID)))
}

func truncate(b []byte) string {
	if len(b) > 200 {
		return string(b[:200]) + "…"
	}
	return string(b)
}

func TestAPI_IdempotencyKey(t *testing.T) {
	t.Parallel()
	h := newHarness(t, transport.Config{})
	body := messages.StartRun{Question: "once", Scenario: scenario(2, 2)}
	const n = 10
	got := make([]messages.RunCreated, n)
	var wg sync.WaitGroup
	for i := range n { // concurrent retries: one run
		wg.Add(1)
		go func() { defer wg.Done(); got[i] = h.startRun(body, "Idempotency-Key", "k-1") }()
	}
	wg.Wait()
	for i := range got {
		if got[i].RunID != got[0].RunID {
			t.Fatalf("retry %d started run %s, first was %s", i, got[i].RunID, got[0].RunID)
		}
	}
	resp, out := h.do("POST", "/api/v1/runs", messages.StartRun{Question: "different"}, "Idempotency-Key", "k-1")
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(string(out), "idempotency_key_reused") {
		t.Fatalf("reuse with another body = %d %s", resp.StatusCode, out)
	}
	if other := h.startRun(body, "Idempotency-Key", "k-2"); other.RunID == got[0].RunID {
		t.Fatal("another key returned the same run")
	}
	_, list := h.do("GET", "/api/v1/runs?session_id="+string(got[0].SessionID), nil)
	var rl messages.RunList
	if err := json.Unmarshal(list, &rl); err != nil || len(rl.Runs) != 1 {
		t.Fatalf("runs in the session: %s", list)
	}
}

func TestAPI_AbortAndList(t *testing.T) {
	t.Parallel()
	h := newHarness(t, transport.Config{})
	rc := h.startRun(messages.StartRun{Question: "q", Scenario: &messages.Scenario{Nodes: 4, Tokens: 1000, TokenDelayMS: 5}})
	resp, r := h.sse(context.Background(), "session_id="+string(rc.SessionID))
	defer resp.Body.Close()
	readUntil(t, r, func(e *messages.Envelope) bool { return e.Type == messages.NodeStarted })
	if resp, out := h.do("POST", "/api/v1/runs/"+string(rc.RunID)+"/abort", `{"reason":"enough"}`); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("abort = %d %s", resp.StatusCode, out)
	}
	events := readUntil(t, r, terminalOf(rc.RunID))
	last := events[len(events)-1].Payload.(*messages.RunErrorPayload)
	if last.Code != messages.ErrCodeAborted || last.Message != "enough" {
		t.Fatalf("terminal = %+v", last)
	}
	if resp, out := h.do("POST", "/api/v1/runs/"+string(rc.RunID)+"/abort", nil); resp.StatusCode != http.StatusConflict {
		t.Fatalf("second abort = %d %s", resp.StatusCode, out)
	}
	_, out := h.do("GET", "/api/v1/runs?status=aborted", nil)
	var rl messages.RunList
	if err := json.Unmarshal(out, &rl); err != nil || len(rl.Runs) != 1 || rl.Runs[0].RunID != rc.RunID {
		t.Fatalf("aborted runs = %s", out)
	}
}

func TestServer_RefusesOpenBindWithoutTokens(t *testing.T) {
	t.Parallel()
	e, err := actors.New(actors.Config{})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := transport.New(transport.Config{Engine: e})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = e.Shutdown(context.Background())
		_ = srv.Shutdown(context.Background())
	}()
	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0"} {
		if l, err := srv.Listen(addr); !errors.Is(err, transport.ErrInsecureBind) {
			if l != nil {
				l.Close()
			}
			t.Fatalf("Listen(%q) = %v, want ErrInsecureBind", addr, err)
		}
	}
	for _, addr := range []string{"127.0.0.1:0", "localhost:0", "[::1]:0"} {
		l, err := srv.Listen(addr)
		if err != nil {
			var opErr *net.OpError
			if errors.As(err, &opErr) && strings.Contains(addr, "::1") {
				continue // no IPv6 on this machine
			}
			t.Fatalf("Listen(%q) = %v", addr, err)
		}
		l.Close()
	}
}

func TestServer_HealthzAndMetrics(t *testing.T) {
	t.Parallel()
	h := newHarness(t, transport.Config{})
	rc := h.startRun(messages.StartRun{Question: "q", Scenario: scenario(2, 2)})
	resp, r := h.sse(context.Background(), "session_id="+string(rc.SessionID))
	readUntil(t, r, terminalOf(rc.RunID))
	if resp, body := h.do("GET", "/healthz", nil); resp.StatusCode != 200 || !strings.Contains(string(body), "ok") {
		t.Fatalf("healthz = %d %s", resp.StatusCode, body)
	}
	// A write is counted delivered once it returned, which can be after
	// the client read it.
	var body []byte
	testkit.Eventually(t, func() bool {
		_, body = h.do("GET", "/metrics", nil)
		return strings.Contains(string(body), `conclave_events_delivered_total{transport="sse"}`)
	})
	for _, want := range []string{
		`conclave_stream_connections{transport="sse"} 1`,
		`conclave_events_published_total`, `conclave_events_delivered_total{transport="sse"}`,
		`conclave_stream_lag_events_max`, `conclave_runs{status="finished"} 1`, `go_goroutines`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	resp.Body.Close()
}

// TestServer_MetricsInterruptsPending: /metrics counts the interrupts
// waiting for a human by kind, every kind listed (0 when none), and
// serves OpenMetrics (the format of exemplars) to a scraper asking for it.
func TestServer_MetricsInterruptsPending(t *testing.T) {
	t.Parallel()
	h := newHarness(t, transport.Config{})
	rc := h.startRun(messages.StartRun{Question: "q", HITL: messages.HITLPlan, Scenario: scenario(2, 2)})
	resp, r := h.sse(context.Background(), "session_id="+string(rc.SessionID))
	defer resp.Body.Close()
	readUntil(t, r, func(e *messages.Envelope) bool { return e.Type == messages.InterruptRaised })
	var body []byte
	testkit.Eventually(t, func() bool { // listed once journaled
		_, body = h.do("GET", "/metrics", nil)
		return strings.Contains(string(body), `conclave_interrupts_pending{kind="plan_approval"} 1`)
	})
	if !strings.Contains(string(body), `conclave_interrupts_pending{kind="tool_approval"} 0`) {
		t.Errorf("metrics lack tool_approval's 0:\n%s", body)
	}
	om, _ := h.do("GET", "/metrics", nil, "Accept", "application/openmetrics-text; version=1.0.0")
	if ct := om.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/openmetrics-text") {
		t.Errorf("Content-Type %q, want OpenMetrics", ct)
	}
}

// TestServer_MetricsExemplars: run metrics of a run with a trace id (its
// run_started.trace_id, from the traceparent that started it) reach a scraper asking for
// OpenMetrics as exemplars carrying that trace id; the classic text
// format carries none.
func TestServer_MetricsExemplars(t *testing.T) {
	t.Parallel()
	const trace = "4bf92f3577b34da6a3ce929d0e0e4736"
	m := runmetrics.New(runmetrics.Config{})
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	h := newHarnessWith(t, actors.Config{Observers: []actors.Observer{m}}, transport.Config{Registry: reg})
	rc := h.startRun(messages.StartRun{Question: "q", Scenario: scenario(2, 2)}, "traceparent", "00-"+trace+"-00f067aa0ba902b7-01")
	resp, r := h.sse(context.Background(), "session_id="+string(rc.SessionID))
	defer resp.Body.Close()
	readUntil(t, r, terminalOf(rc.RunID))
	om, body := h.do("GET", "/metrics", nil, "Accept", "application/openmetrics-text; version=1.0.0")
	if !strings.HasPrefix(om.Header.Get("Content-Type"), "application/openmetrics-text") {
		t.Fatalf("Content-Type %q", om.Header.Get("Content-Type"))
	}
	var found bool
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, "conclave_runs_ended_total{") && strings.Contains(line, `# {trace_id="`+trace+`"}`) {
			found = true
		}
	}
	if !found {
		t.Errorf("no exemplar with the run's trace id on conclave_runs_ended_total:\n%s", body)
	}
	if _, text := h.do("GET", "/metrics", nil); strings.Contains(string(text), "trace_id") {
		t.Error("the text format carries exemplars")
	}
}

// TestSSE_HeartbeatAndShutdownFrame: an idle stream gets ": ping" comments;
// at shutdown it gets the final stream_closed frame.
func TestSSE_HeartbeatAndShutdownFrame(t *testing.T) {
	t.Parallel()
	h := newHarness(t, transport.Config{Heartbeat: 40 * time.Millisecond})
	rc := h.startRun(messages.StartRun{Question: "q", Scenario: scenario(1, 1)})
	resp, r := h.sse(context.Background(), "session_id="+string(rc.SessionID))
	defer resp.Body.Close()
	readUntil(t, r, terminalOf(rc.RunID))
	f, err := r.Next()
	if err != nil || f.Comment != "ping" || f.Data != "" {
		t.Fatalf("idle stream frame = %+v, %v; want a ping comment", f, err)
	}
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), testkit.Watchdog)
		defer cancel()
		done <- h.srv.Shutdown(ctx)
	}()
	for {
		f, err = r.Next()
		if err != nil {
			t.Fatalf("no stream_closed frame before EOF: %v", err)
		}
		if f.Event == "stream_closed" {
			break
		}
	}
	if !strings.Contains(f.Data, "shutting down") {
		t.Fatalf("final frame data %q", f.Data)
	}
	if _, err := r.Next(); err != io.EOF {
		t.Fatalf("after the final frame: %v, want EOF", err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestAPI_Rewind(t *testing.T) {
	t.Parallel()
	h := newHarness(t, transport.Config{})
	rc := h.startRun(messages.StartRun{Question: "q", Scenario: &messages.Scenario{Nodes: 4, Waves: 2, Tokens: 2}})
	resp, r := h.sse(context.Background(), "session_id="+string(rc.SessionID))
	defer resp.Body.Close()
	readUntil(t, r, terminalOf(rc.RunID))
	for body, want := range map[string]int{`{"wave":9}`: 422, `{"wave":1,"colour":1}`: 400} {
		if resp, out := h.do("POST", "/api/v1/runs/"+string(rc.RunID)+"/rewind", body); resp.StatusCode != want {
			t.Fatalf("rewind %s = %d %s, want %d", body, resp.StatusCode, out, want)
		}
	}
	resp2, out := h.do("POST", "/api/v1/runs/"+string(rc.RunID)+"/rewind", `{"wave":1,"note":"again"}`)
	if resp2.StatusCode != http.StatusCreated {
		t.Fatalf("rewind = %d %s", resp2.StatusCode, out)
	}
	var re messages.RunCreated
	if err := json.Unmarshal(out, &re); err != nil || re.SessionID != rc.SessionID || re.RunID == rc.RunID {
		t.Fatalf("rewind answer %s", out)
	}
	// The same stream carries the rewound run, with new seqs.
	events := readUntil(t, r, terminalOf(re.RunID))
	if events[0].RunID != re.RunID || events[0].Type != messages.RunStarted {
		t.Fatalf("first event after the rewind: %s of %s", events[0].Type, events[0].RunID)
	}
	if resp, _ := h.do("POST", "/api/v1/runs/nope/rewind", `{"wave":0}`); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("unknown run: %d", resp.StatusCode)
	}
}

// TestAPI_IdempotencyClientGaveUp: a client that drops its request while
// the run is being started does not turn the start into an error, so its
// retry with the same Idempotency-Key gets the same run, not a second one.
func TestAPI_IdempotencyClientGaveUp(t *testing.T) {
	t.Parallel()
	h := newHarness(t, transport.Config{})
	body, err := json.Marshal(messages.StartRun{Question: "once", Scenario: scenario(1, 1)})
	if err != nil {
		t.Fatal(err)
	}
	gone, cancel := context.WithCancel(context.Background())
	cancel() // the client has already hung up
	req := httptest.NewRequestWithContext(gone, "POST", "/api/v1/runs", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", "k-drop")
	rec := httptest.NewRecorder()
	h.srv.Handler().ServeHTTP(rec, req)
	if rec.Code != http.StatusCreated {
		t.Fatalf("dropped request = %d %s, want 201 (the run was started)", rec.Code, rec.Body)
	}
	var first messages.RunCreated
	if err := json.Unmarshal(rec.Body.Bytes(), &first); err != nil {
		t.Fatal(err)
	}
	if retry := h.startRun(messages.StartRun{Question: "once", Scenario: scenario(1, 1)}, "Idempotency-Key", "k-drop"); retry.RunID != first.RunID {
		t.Fatalf("retry started run %s, the dropped request started %s", retry.RunID, first.RunID)
	}
}

func TestAPI_Steer(t *testing.T) {
	t.Parallel()
	h := newHarness(t, transport.Config{})
	// Wave 0 takes about 0.6 s: the diff arrives during it.
	rc := h.startRun(messages.StartRun{Question: "q", Scenario: &messages.Scenario{Nodes: 4, Waves: 2, Tokens: 300, TokenDelayMS: 2}})
	resp, r := h.sse(context.Background(), "session_id="+string(rc.SessionID))
	defer resp.Body.Close()
	readUntil(t, r, func(e *messages.Envelope) bool { return e.Type == messages.NodeStarted })
	path := "/api/v1/runs/" + string(rc.RunID) + "/steer"
	for body, want := range map[string]int{
		`{}`: 422, `{"note":"x","colour":1}`: 400, `{"diff":{"ops":[{"op":"explode"}]}}`: 422,
		`{"diff":{"ops":[{"op":"remove_node","node_id":"n001","role":"x"}]}}`: 422,
	} {
		if resp, out := h.do("POST", path, body); resp.StatusCode != want {
			t.Errorf("steer %s = %d %s, want %d", body, resp.StatusCode, out, want)
		}
	}
	if resp, out := h.do("POST", "/api/v1/runs/nope/steer", `{"note":"x"}`); resp.StatusCode != http.StatusNotFound {
		t.Errorf("steer unknown run = %d %s", resp.StatusCode, out)
	}
	resp2, out := h.do("POST", path, `{"note":"costs","diff":{"ops":[{"op":"add_node","node":{"id":"extra","goal":"costs","deps":["n001"]}}]}}`)
	if resp2.StatusCode != http.StatusAccepted {
		t.Fatalf("steer = %d %s", resp2.StatusCode, out)
	}
	var acc messages.SteerAccepted
	if err := json.Unmarshal(out, &acc); err != nil || acc.SteeringID == "" || acc.RunID != rc.RunID {
		t.Fatalf("steer answer %s", out)
	}
	events := readUntil(t, r, terminalOf(rc.RunID))
	var applied *messages.SteeringAppliedPayload
	ran := false
	for _, e := range events {
		switch p := e.Payload.(type) {
		case *messages.SteeringAppliedPayload:
			applied = p
		case *messages.NodeCompletedPayload:
			ran = ran || p.NodeID == "extra"
		}
	}
	if applied == nil || applied.SteeringID != acc.SteeringID || applied.AppliedAtWave != 1 || !ran {
		t.Fatalf("steering_applied %+v, extra ran %v", applied, ran)
	}
	if resp, out := h.do("POST", path, `{"note":"late"}`); resp.StatusCode != http.StatusConflict {
		t.Errorf("steer ended run = %d %s", resp.StatusCode, out)
	}
}

// TestSSE_ClientGoneIsNoticedWhileIdle: an idle SSE stream whose client
// disconnects gives its slot back within a fraction of the heartbeat, not
// after heartbeat writes fail (nothing reads an SSE socket).
func TestSSE_ClientGoneIsNoticedWhileIdle(t *testing.T) {
	t.Parallel()
	const heartbeat = 2 * time.Second
	h := newHarness(t, transport.Config{Heartbeat: heartbeat})
	rc := h.startRun(messages.StartRun{Question: "q", Scenario: scenario(1, 1)})
	resp, r := h.sse(context.Background(), "session_id="+string(rc.SessionID))
	readUntil(t, r, terminalOf(rc.RunID)) // now idle
	open := func() bool {
		_, body := h.do("GET", "/metrics", nil)
		return !strings.Contains(string(body), `conclave_stream_connections{transport="sse"} 0`)
	}
	if !open() {
		t.Fatal("the stream is not counted while open")
	}
	_ = resp.Body.Close()
	gone := time.Now()
	for open() {
		if time.Since(gone) > heartbeat {
			t.Fatalf("the stream of a client that left is still open after %v", time.Since(gone))
		}
		time.Sleep(10 * time.Millisecond) // polling the metric with a deadline
	}
	t.Logf("noticed %v after the client left", time.Since(gone).Round(time.Millisecond))
}

// TestSSE_UntilRunEnd: with ?until=run_end a stream ends with its final
// frame (run_ended) right after a terminal event: the first one after the
// cursor, or the named run's; at once when the named run's is before the
// cursor. Bad values are refused before the stream starts.
func TestSSE_UntilRunEnd(t *testing.T) {
	t.Parallel()
	h := newHarness(t, transport.Config{})
	a := h.startRun(messages.StartRun{Question: "a", Scenario: scenario(1, 2)})
	b := h.startRun(messages.StartRun{Question: "b", SessionID: a.SessionID, Scenario: &messages.Scenario{Nodes: 3, Tokens: 20, TokenDelayMS: 2}})
	other := h.startRun(messages.StartRun{Question: "other", Scenario: scenario(1, 1)})
	session := "session_id=" + string(a.SessionID)

	// readToEnd reads frames until EOF; it returns the events and the final frame's data.
	readToEnd := func(query string, hdr ...string) ([]*messages.Envelope, string) {
		t.Helper()
		resp, r := h.sse(context.Background(), query, hdr...)
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d", query, resp.StatusCode)
		}
		var evs []*messages.Envelope
		final := ""
		for {
			f, err := r.Next()
			if err == io.EOF {
				if final == "" {
					t.Fatalf("%s: EOF without a final frame", query)
				}
				return evs, final
			}
			if err != nil {
				t.Fatalf("%s: %v", query, err)
			}
			switch {
			case final != "":
				t.Fatalf("%s: a frame after the final one: %+v", query, f)
			case f.Event == "stream_closed":
				final = f.Data
			case f.Data != "":
				env := new(messages.Envelope)
				if err := json.Unmarshal([]byte(f.Data), env); err != nil {
					t.Fatal(err)
				}
				evs = append(evs, env)
			}
		}
	}
	// The named run: everything up to its terminal event, the final frame, EOF.
	evs, final := readToEnd(session + "&until=run_end&run_id=" + string(b.RunID))
	last := evs[len(evs)-1]
	if last.RunID != b.RunID || !last.Type.Terminal() || !strings.Contains(final, `"code":"run_ended"`) {
		t.Fatalf("until b: last event %s of %s, final %s", last.Type, last.RunID, final)
	}
	for _, v := range testkit.CheckPartial(evs) { // run a may still be going
		t.Errorf("violation: %s", v)
	}
	bEnd := last.Seq
	evs, _ = readToEnd(session + "&until=run_end&run_id=" + string(a.RunID))
	aEnd := evs[len(evs)-1].Seq
	// Any run: the first terminal event after the cursor.
	evs, _ = readToEnd(session + "&until=run_end")
	if last := evs[len(evs)-1]; last.Seq != min(aEnd, bEnd) {
		t.Errorf("until any run from the start ended after seq %d, want %d", last.Seq, min(aEnd, bEnd))
	}
	evs, _ = readToEnd(session+"&until=run_end", "Last-Event-ID", strconv.FormatUint(min(aEnd, bEnd), 10))
	if last := evs[len(evs)-1]; last.Seq != max(aEnd, bEnd) {
		t.Errorf("until any run after the first end ended after seq %d, want %d", last.Seq, max(aEnd, bEnd))
	}
	// The named run ended before the cursor: the final frame at once.
	evs, final = readToEnd(session + "&until=run_end&run_id=" + string(a.RunID) + "&after=" + strconv.FormatUint(aEnd, 10))
	if len(evs) != 0 || !strings.Contains(final, `"code":"run_ended"`) {
		t.Errorf("until a ended before the cursor: %d events, final %s", len(evs), final)
	}
	for _, c := range []struct {
		query  string
		status int
	}{
		{session + "&until=forever", 400},
		{session + "&run_id=" + string(a.RunID), 400},
		{session + "&until=run_end&run_id=" + string(other.RunID), 400},
		{session + "&until=run_end&run_id=nope", 404},
	} {
		resp, body := h.do("GET", "/api/v1/events/stream?"+c.query, nil)
		if resp.StatusCode != c.status {
			t.Errorf("%s: %d %s, want %d", c.query, resp.StatusCode, body, c.status)
		}
	}
}

// TestAPI_RequestID: a run's terminal event names the request that
// started it: the client's X-Request-Id, echoed, or one the server made;
// a malformed one is refused.
func TestAPI_RequestID(t *testing.T) {
	t.Parallel()
	h := newHarness(t, transport.Config{})
	body := messages.StartRun{Question: "q", Scenario: scenario(1, 1)}
	for _, sent := range []string{"client-req-7", ""} {
		var hdr []string
		if sent != "" {
			hdr = []string{"X-Request-Id", sent}
		}
		resp, out := h.do("POST", "/api/v1/runs", body, hdr...)
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("POST /runs = %d %s", resp.StatusCode, out)
		}
		echoed := resp.Header.Get("X-Request-Id")
		if sent != "" && echoed != sent || !messages.ValidRequestID(echoed) {
			t.Fatalf("X-Request-Id %q echoed as %q", sent, echoed)
		}
		var rc messages.RunCreated
		if err := json.Unmarshal(out, &rc); err != nil {
			t.Fatal(err)
		}
		events, err := testkit.Follow(context.Background(), h.engine, actors.RunRef{RunID: rc.RunID, SessionID: rc.SessionID}, 0)
		if err != nil {
			t.Fatal(err)
		}
		fin, ok := testkit.Terminal(events, rc.RunID).Payload.(*messages.RunFinishedPayload)
		if !ok || fin.RequestID != echoed || fin.ConversationID != rc.SessionID || fin.TenantID != messages.LocalTenant {
			t.Fatalf("terminal %+v, want request %q", testkit.Terminal(events, rc.RunID).Payload, echoed)
		}
	}
	if resp, out := h.do("POST", "/api/v1/runs", body, "X-Request-Id", "two words"); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("a malformed X-Request-Id = %d %s", resp.StatusCode, out)
	}
}

// TestServer_CORS: a page of an allowed origin gets its preflight answered
// (the trace context headers and X-Request-Id among those it may send) and
// may read Retry-After and X-Request-Id from the answers; a page of any
// other origin gets no CORS header, and its preflight is refused.
func TestServer_CORS(t *testing.T) {
	t.Parallel()
	h := newHarness(t, transport.Config{AllowedOrigins: []string{"https://app.example"}})
	resp, _ := h.do("OPTIONS", "/api/v1/runs", nil, "Origin", "https://app.example", "Access-Control-Request-Method", "POST",
		"Access-Control-Request-Headers", "content-type, traceparent, x-request-id")
	allow := strings.ToLower(resp.Header.Get("Access-Control-Allow-Headers"))
	if resp.StatusCode != http.StatusNoContent || resp.Header.Get("Access-Control-Allow-Origin") != "https://app.example" {
		t.Fatalf("preflight: %d %v", resp.StatusCode, resp.Header)
	}
	for _, want := range []string{"authorization", "content-type", "traceparent", "tracestate", "x-request-id", "idempotency-key"} {
		if !strings.Contains(allow, want) {
			t.Errorf("preflight allows %q, not %s", allow, want)
		}
	}
	resp, _ = h.do("GET", "/api/v1/runs", nil, "Origin", "https://app.example")
	expose := strings.ToLower(resp.Header.Get("Access-Control-Expose-Headers"))
	for _, want := range []string{"retry-after", "x-request-id"} {
		if !strings.Contains(expose, want) {
			t.Errorf("answers expose %q, not %s", expose, want)
		}
	}
	if !slices.Contains(resp.Header.Values("Vary"), "Origin") {
		t.Errorf("Vary %v, want Origin", resp.Header.Values("Vary"))
	}
	resp, _ = h.do("GET", "/api/v1/runs", nil, "Origin", "https://evil.example")
	if resp.Header.Get("Access-Control-Allow-Origin") != "" || resp.Header.Get("Access-Control-Expose-Headers") != "" {
		t.Errorf("another origin got CORS headers: %v", resp.Header)
	}
	resp, _ = h.do("OPTIONS", "/api/v1/runs", nil, "Origin", "https://evil.example", "Access-Control-Request-Method", "POST")
	if resp.StatusCode == http.StatusNoContent || resp.Header.Get("Access-Control-Allow-Headers") != "" {
		t.Errorf("another origin's preflight: %d %v", resp.StatusCode, resp.Header)
	}
}
