package transport_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gorilla/websocket"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/actors/runindex"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/testkit"
	"github.com/conclave-ai/conclave/transport"
	"github.com/conclave-ai/conclave/transport/a2a"
)

// embedded is an engine whose Server's handlers are mounted on a mux of
// the test's, each with the same Authenticate: the tenant is the
// X-Tenant header, and a request without it is refused.
type embedded struct {
	t      *testing.T
	engine *actors.Engine
	srv    *transport.Server
	web    *httptest.Server
}

var errNoTenant = errors.New("no X-Tenant header")

func headerTenant(r *http.Request) (messages.TenantID, error) {
	t := r.Header.Get("X-Tenant")
	if t == "" {
		return "", errNoTenant
	}
	return messages.TenantID(t), nil
}

func newEmbedded(t *testing.T, auth transport.Authenticate) *embedded {
	t.Helper()
	e := testkit.NewEngine(t, actors.Config{})
	srv, err := transport.New(transport.Config{Engine: e, Logger: testkit.TestLogger(t, 8)})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/api/v1/", srv.APIHandler(auth))
	mux.Handle("GET /events", srv.SSEHandler(auth))
	mux.Handle("/ws", srv.WebSocketHandler(auth))
	mux.Handle("/agui", srv.AGUIHandler(auth))
	a := srv.A2AHandler(auth)
	mux.Handle(a2a.RPCPath, a)
	mux.Handle(a2a.CardPath, a)
	web := httptest.NewServer(mux)
	t.Cleanup(func() {
		// Registered after the engine's cleanup, so it runs first: the
		// handlers' streams end before the engine stops.
		ctx, cancel := context.WithTimeout(context.Background(), testkit.Watchdog)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("server shutdown: %v", err)
		}
		web.Close()
	})
	return &embedded{t: t, engine: e, srv: srv, web: web}
}

func (h *embedded) do(method, path, tenant string, body any) (*http.Response, []byte) {
	h.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			h.t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, h.web.URL+path, rd)
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("A2A-Version", "1.0")
	if tenant != "" {
		req.Header.Set("X-Tenant", tenant)
	}
	resp, err := h.web.Client().Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp, out
}

var smallRun = map[string]any{"question": "q", "scenario": map[string]any{"nodes": 1, "tokens": 2, "synthesis_tokens": 2}}

// TestServer_EmbeddedHandlersAuthenticate: every handler refuses a request
// its Authenticate refuses, with 401 and the hook's reason, before
// anything else.
func TestServer_EmbeddedHandlersAuthenticate(t *testing.T) {
	t.Parallel()
	h := newEmbedded(t, headerTenant)
	for _, c := range []struct{ method, path string }{
		{"POST", "/api/v1/runs"}, {"GET", "/api/v1/runs"}, {"GET", "/api/v1/interrupts?session_id=S"},
		{"GET", "/events?session_id=S"}, {"GET", "/ws?session_id=S"}, {"POST", "/agui"}, {"POST", a2a.RPCPath},
	} {
		resp, body := h.do(c.method, c.path, "", smallRun)
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(body), errNoTenant.Error()) {
			t.Errorf("%s %s without a tenant = %d %s, want 401 with the hook's reason", c.method, c.path, resp.StatusCode, body)
		}
	}
	// The agent card is public, as on the server's own mux.
	if resp, body := h.do("GET", a2a.CardPath, "", nil); resp.StatusCode != http.StatusOK || !strings.Contains(string(body), a2a.RPCPath) {
		t.Errorf("GET card = %d %s", resp.StatusCode, body)
	}
	// A tenant that is not a valid id is the embedder's bug: 500.
	if resp, body := h.do("GET", "/api/v1/runs", "not a/tenant", nil); resp.StatusCode != http.StatusInternalServerError {
		t.Errorf("GET /api/v1/runs as an invalid tenant = %d %s, want 500", resp.StatusCode, body)
	}
	// Outside the API's paths: JSON 404.
	if resp, body := h.do("GET", "/api/v1/nothing", "acme", nil); resp.StatusCode != http.StatusNotFound || !strings.Contains(string(body), "not_found") {
		t.Errorf("GET /api/v1/nothing = %d %s, want 404", resp.StatusCode, body)
	}
}

// TestServer_EmbeddedHandlersTenants: the tenant Authenticate returns is
// the caller's on every handler: a run created through the API is acme's
// and streams to acme over SSE, WebSocket and A2A, and nobody else sees it.
func TestServer_EmbeddedHandlersTenants(t *testing.T) {
	t.Parallel()
	h := newEmbedded(t, headerTenant)
	resp, body := h.do("POST", "/api/v1/runs", "acme", smallRun)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST /api/v1/runs = %d %s", resp.StatusCode, body)
	}
	var rc messages.RunCreated
	if err := json.Unmarshal(body, &rc); err != nil {
		t.Fatal(err)
	}
	if _, err := h.engine.Run("acme", rc.RunID); err != nil {
		t.Fatalf("the run is not acme's: %v", err)
	}
	if resp, body := h.do("GET", "/api/v1/runs/"+string(rc.RunID), "other", nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("another tenant's GET of the run = %d %s, want 404", resp.StatusCode, body)
	}

	// SSE, to the run's end.
	q := "?session_id=" + string(rc.SessionID) + "&until=run_end"
	resp, body = h.do("GET", "/events"+q, "acme", nil)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "event: run_finished\n") || !strings.Contains(string(body), "event: stream_closed\n") {
		t.Errorf("SSE as acme = %d, body:\n%s", resp.StatusCode, body)
	}
	if resp, body := h.do("GET", "/events"+q, "other", nil); resp.StatusCode == http.StatusOK {
		t.Errorf("SSE of acme's session as another tenant = %d %s", resp.StatusCode, body)
	}

	// WebSocket: the first message holds run_started.
	d := websocket.Dialer{HandshakeTimeout: testkit.Watchdog}
	conn, wsResp, err := d.Dial("ws"+strings.TrimPrefix(h.web.URL, "http")+"/ws?session_id="+string(rc.SessionID), http.Header{"X-Tenant": {"acme"}})
	if err != nil {
		t.Fatalf("WebSocket as acme: %v", err)
	}
	defer conn.Close()
	wsResp.Body.Close()
	_, msg, err := conn.ReadMessage()
	if err != nil || !strings.Contains(string(msg), `"type":"run_started"`) {
		t.Errorf("first WebSocket message = %.200s (%v)", msg, err)
	}

	// A2A: acme lists its task; another tenant lists none.
	list := map[string]any{"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": map[string]any{}}
	_, body = h.do("POST", a2a.RPCPath, "acme", list)
	if !strings.Contains(string(body), string(rc.RunID)) {
		t.Errorf("A2A ListTasks as acme: %s", body)
	}
	_, body = h.do("POST", a2a.RPCPath, "other", list)
	if strings.Contains(string(body), string(rc.RunID)) || !strings.Contains(string(body), `"result"`) {
		t.Errorf("A2A ListTasks as another tenant: %s", body)
	}
}

// TestServer_EmbeddedAGUI: an AG-UI run through the mounted handler runs
// as the hook's tenant.
func TestServer_EmbeddedAGUI(t *testing.T) {
	t.Parallel()
	h := newEmbedded(t, headerTenant)
	in := map[string]any{
		"threadId": "thread-1", "runId": "run-1", "state": map[string]any{}, "tools": []any{}, "context": []any{},
		"messages":       []any{map[string]any{"id": "u1", "role": "user", "content": "q"}},
		"forwardedProps": map[string]any{"scenario": map[string]any{"nodes": 1, "tokens": 2, "synthesis_tokens": 2}},
	}
	resp, body := h.do("POST", "/agui", "acme", in)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "RUN_FINISHED") {
		t.Fatalf("AG-UI as acme = %d:\n%s", resp.StatusCode, body)
	}
	runs, _, err := h.engine.Runs(context.Background(), runindex.Filter{Tenant: "acme", Limit: 10})
	if err != nil || len(runs) != 1 {
		t.Fatalf("acme's runs = %v, %v; want the AG-UI run", runs, err)
	}
}

// TestServer_EmbeddedNilAuthenticate: a nil Authenticate admits every
// caller as the local tenant.
func TestServer_EmbeddedNilAuthenticate(t *testing.T) {
	t.Parallel()
	h := newEmbedded(t, nil)
	resp, body := h.do("POST", "/api/v1/runs", "", smallRun)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST /api/v1/runs = %d %s", resp.StatusCode, body)
	}
	var rc messages.RunCreated
	if err := json.Unmarshal(body, &rc); err != nil {
		t.Fatal(err)
	}
	if _, err := h.engine.Run(messages.LocalTenant, rc.RunID); err != nil {
		t.Fatalf("the run is not the local tenant's: %v", err)
	}
}

// TestServer_EmbeddedShutdown: Server.Shutdown ends the streams the
// mounted handlers serve (an SSE stream that would stay open for ever),
// with their final frame (the run, parked on its plan, ends with the
// engine); goleak (TestMain) checks that nothing is left.
func TestServer_EmbeddedShutdown(t *testing.T) {
	t.Parallel()
	h := newEmbedded(t, headerTenant)
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Watchdog)
	defer cancel()
	ref, err := h.engine.StartRun(ctx, messages.StartRun{Tenant: "acme", Question: "q", HITL: messages.HITLPlan})
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequestWithContext(ctx, "GET", h.web.URL+"/events?session_id="+string(ref.SessionID), nil)
	req.Header.Set("X-Tenant", "acme")
	resp, err := h.web.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	// The stream delivers before the shutdown: one still starting while
	// the server shuts down may end without its final frame.
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("the stream ended before its first event: %v", err)
		}
		if strings.HasPrefix(line, "event: ") {
			break
		}
	}
	if err := h.engine.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := h.srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	rest, err := io.ReadAll(br) // ends: the server closed the stream
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(rest), "event: run_error\n") || !strings.Contains(string(rest), "event: stream_closed\n") {
		t.Errorf("the stream's end:\n%s", rest)
	}
}
