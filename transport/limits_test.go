package transport_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/testkit"
	"github.com/conclave-ai/conclave/transport"
)

// rawGet sends a GET on a fresh connection and returns the answer and the
// connection (left open).
func rawRequest(t *testing.T, addr, req string) (*http.Response, net.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := io.WriteString(conn, req); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(testkit.Watchdog))
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	return resp, conn, br
}

func errorCode(t *testing.T, resp *http.Response) string {
	t.Helper()
	var eb messages.ErrorBody
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, &eb); err != nil {
		t.Fatalf("%d %s: %v", resp.StatusCode, b, err)
	}
	return eb.Error.Code
}

// waitClosed reads conn to its end; the server must close it.
func waitClosed(t *testing.T, conn net.Conn, r io.Reader, within time.Duration) {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(within))
	_, err := io.Copy(io.Discard, r)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the server kept the connection open for %v", within)
	}
}

func TestServer_ConnectionCapEvictsIdle(t *testing.T) {
	t.Parallel()
	h := newHarness(t, transport.Config{MaxConnections: 3, MaxStreams: -1})
	addr := strings.TrimPrefix(h.base, "http://")
	// Three connections that send nothing fill the cap.
	var idle []net.Conn
	for range 3 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		idle = append(idle, c)
	}
	// A health check still gets in: it evicts the oldest.
	resp, _, _ := rawRequest(t, addr, "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /healthz at the cap = %d", resp.StatusCode)
	}
	waitClosed(t, idle[0], idle[0], testkit.Watchdog)
}

func TestServer_ConnectionCapRefusesWhenAllBusy(t *testing.T) {
	t.Parallel()
	h := newHarness(t, transport.Config{MaxConnections: 2, MaxStreams: -1})
	rc := h.startRun(messages.StartRun{Question: "q", Scenario: scenario(1, 1)})
	h.client.CloseIdleConnections() // the POST's keep-alive connection would be evicted first
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for range 2 { // two streams: busy, not evictable
		resp, r := h.sse(ctx, "session_id="+string(rc.SessionID))
		defer resp.Body.Close()
		if _, err := r.Next(); err != nil {
			t.Fatal(err)
		}
	}
	resp, conn, br := rawRequest(t, strings.TrimPrefix(h.base, "http://"), "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || errorCode(t, resp) != "unavailable" {
		t.Fatalf("at the cap with every connection busy: %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	waitClosed(t, conn, br, testkit.Watchdog)
}

func TestServer_StreamCaps(t *testing.T) {
	t.Parallel()
	var tokens transport.Tokens
	for tok, tenant := range map[string]messages.TenantID{"token-aaaaaaaaaaaaaaaa": "acme", "token-bbbbbbbbbbbbbbbb": "bravo"} {
		if err := tokens.Add(tok, tenant); err != nil {
			t.Fatal(err)
		}
	}
	h := newHarness(t, transport.Config{Tokens: tokens, MaxStreams: 3,
		StreamLimit: func(t messages.TenantID) int {
			if t == "acme" {
				return 1
			}
			return 0
		}})
	auth := func(tok string) []string { return []string{"Authorization", "Bearer " + tok} }
	a := h.startRun(messages.StartRun{Question: "q", Scenario: scenario(1, 1)}, auth("token-aaaaaaaaaaaaaaaa")...)
	b := h.startRun(messages.StartRun{Question: "q", Scenario: scenario(1, 1)}, auth("token-bbbbbbbbbbbbbbbb")...)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	open := func(rc messages.RunCreated, tok string) *http.Response {
		t.Helper()
		resp, _ := h.sse(ctx, "session_id="+string(rc.SessionID), auth(tok)...)
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	if resp := open(a, "token-aaaaaaaaaaaaaaaa"); resp.StatusCode != http.StatusOK {
		t.Fatalf("acme's first stream: %d", resp.StatusCode)
	}
	resp := open(a, "token-aaaaaaaaaaaaaaaa")
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "5" || errorCode(t, resp) != "too_many_streams" {
		t.Fatalf("acme's second stream (its cap is 1): %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	for range 2 {
		if resp := open(b, "token-bbbbbbbbbbbbbbbb"); resp.StatusCode != http.StatusOK {
			t.Fatalf("bravo's stream: %d", resp.StatusCode)
		}
	}
	resp = open(b, "token-bbbbbbbbbbbbbbbb")
	if resp.StatusCode != http.StatusTooManyRequests || errorCode(t, resp) != "too_many_streams" {
		t.Fatalf("a fourth stream (the server's cap is 3): %d", resp.StatusCode)
	}
}

func TestServer_UnauthenticatedAnsweredAndClosedAtOnce(t *testing.T) {
	t.Parallel()
	var tokens transport.Tokens
	if err := tokens.Add("token-aaaaaaaaaaaaaaaa", "acme"); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, transport.Config{Tokens: tokens})
	addr := strings.TrimPrefix(h.base, "http://")
	for _, path := range []string{"/api/v1/runs", "/api/v1/agui", "/a2a"} {
		// A body is announced and never sent: the answer must not wait for it.
		resp, conn, br := rawRequest(t, addr, "POST "+path+" HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer token-wrong-wrong-wrong\r\n"+
			"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{")
		if resp.StatusCode != http.StatusUnauthorized || !resp.Close || resp.Header.Get("WWW-Authenticate") == "" {
			t.Fatalf("POST %s with a wrong token: %d, close %v", path, resp.StatusCode, resp.Close)
		}
		waitClosed(t, conn, br, 5*time.Second)
	}
}

func TestServer_AccessTokenOnlyOnStreams(t *testing.T) {
	t.Parallel()
	const tok = "token-aaaaaaaaaaaaaaaa"
	var tokens transport.Tokens
	if err := tokens.Add(tok, "acme"); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, transport.Config{Tokens: tokens})
	rc := h.startRun(messages.StartRun{Question: "q", Scenario: scenario(1, 1)}, "Authorization", "Bearer "+tok)
	resp, body := h.do("GET", "/api/v1/runs?access_token="+tok, nil)
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(body), "stream endpoints") {
		t.Fatalf("GET /api/v1/runs?access_token= = %d %s", resp.StatusCode, body)
	}
	resp, body = h.do("GET", "/api/v1/runs/"+string(rc.RunID)+"?access_token="+tok, nil, "Authorization", "Bearer "+tok)
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a header and ?access_token= on a non-stream endpoint = %d %s", resp.StatusCode, body)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sresp, r := h.sse(ctx, "session_id="+string(rc.SessionID)+"&access_token="+tok)
	defer sresp.Body.Close()
	if sresp.StatusCode != http.StatusOK {
		t.Fatalf("SSE with ?access_token= = %d", sresp.StatusCode)
	}
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
}

func TestServer_MetricsNeedAToken(t *testing.T) {
	t.Parallel()
	const tok = "token-aaaaaaaaaaaaaaaa"
	var tokens transport.Tokens
	if err := tokens.Add(tok, "acme"); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, transport.Config{Tokens: tokens})
	if resp, _ := h.do("GET", "/metrics", nil); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("GET /metrics without a token = %d", resp.StatusCode)
	}
	resp, body := h.do("GET", "/metrics", nil, "Authorization", "Bearer "+tok)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "conclave_connections_open") {
		t.Fatalf("GET /metrics with a token = %d", resp.StatusCode)
	}
	if resp, _ := h.do("GET", "/healthz", nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /healthz = %d (needs no token)", resp.StatusCode)
	}
}

// TestServer_Readyz: GET /readyz is 200 while Config.Ready lists nothing,
// and 503 naming each part that is not ready (a failed journal) while
// /healthz, liveness only, stays 200; neither needs a token.
func TestServer_Readyz(t *testing.T) {
	t.Parallel()
	var tokens transport.Tokens
	if err := tokens.Add("token-aaaaaaaaaaaaaaaa", "acme"); err != nil {
		t.Fatal(err)
	}
	var failed atomic.Bool
	h := newHarness(t, transport.Config{Tokens: tokens, Ready: func() []messages.NotReady {
		if failed.Load() {
			return []messages.NotReady{{Component: "journal", Reason: "journal: write failed: /data: gone"}}
		}
		return nil
	}})
	resp, body := h.do("GET", "/readyz", nil)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"status":"ready"`) {
		t.Fatalf("GET /readyz = %d %s", resp.StatusCode, body)
	}
	failed.Store(true)
	resp, body = h.do("GET", "/readyz", nil)
	var rd messages.Readiness
	if err := json.Unmarshal(body, &rd); err != nil || resp.StatusCode != http.StatusServiceUnavailable ||
		rd.Status != messages.NotReadyStatus || len(rd.NotReady) != 1 || rd.NotReady[0].Component != "journal" {
		t.Fatalf("GET /readyz with a failed journal = %d %s", resp.StatusCode, body)
	}
	if resp, _ := h.do("GET", "/healthz", nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /healthz = %d; liveness does not follow readiness", resp.StatusCode)
	}
}

func TestServer_RegistererWithoutGatherer(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	h := newHarness(t, transport.Config{Registry: prometheus.WrapRegistererWithPrefix("embedded_", reg)})
	if resp, _ := h.do("GET", "/metrics", nil); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("GET /metrics with a Registerer that is not a Gatherer = %d, want 404", resp.StatusCode)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, mf := range mfs {
		found = found || mf.GetName() == "embedded_conclave_connections_open"
	}
	if !found {
		t.Fatal("the embedder's registry lacks embedded_conclave_connections_open")
	}
	h2 := newHarness(t, transport.Config{Registry: prometheus.WrapRegistererWithPrefix("x_", prometheus.NewRegistry()), Gatherer: reg})
	if resp, _ := h2.do("GET", "/metrics", nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics with a Gatherer = %d", resp.StatusCode)
	}
}

// TestSSE_MaxLagCutsAStalledClient: a client that stops reading is cut
// once it is more than MaxLagEvents behind, counting the events in the
// server's socket buffer; the stream ends (close reason lagging).
func TestSSE_MaxLagCutsAStalledClient(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	h := newHarness(t, transport.Config{MaxLagEvents: 200, Heartbeat: 200 * time.Millisecond, Registry: reg})
	rc := h.startRun(messages.StartRun{Question: "q", Scenario: scenario(8, 500)})
	d := net.Dialer{Control: smallRcvBuf}
	conn, err := d.Dial("tcp", strings.TrimPrefix(h.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET /api/v1/events/stream?session_id="+string(rc.SessionID)+" HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	// The client reads nothing until the server has cut it.
	deadline := time.Now().Add(testkit.Watchdog)
	for lagging(t, reg) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the stalled stream was not cut")
		}
		runtime.Gosched()
	}
	tail := &strings.Builder{}
	waitClosed(t, conn, io.TeeReader(conn, &lastBytes{b: tail}), testkit.Watchdog)
	t.Logf("cut; the stream ends with %q", tail.String())
}

// lastBytes keeps the last 200 bytes written to it.
type lastBytes struct{ b *strings.Builder }

func (l *lastBytes) Write(p []byte) (int, error) {
	s := l.b.String() + string(p)
	if len(s) > 200 {
		s = s[len(s)-200:]
	}
	l.b.Reset()
	l.b.WriteString(s)
	return len(p), nil
}

func lagging(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "conclave_stream_ends_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" && l.GetValue() == "lagging" {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

func smallRcvBuf(_, _ string, c syscall.RawConn) error {
	var serr error
	if err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) }); err != nil {
		return err
	}
	return serr
}
