package transport_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/transport"
)

// logBuffer is a concurrency-safe buffer of JSON log lines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// lines decodes the lines whose msg is msg.
func (b *logBuffer) lines(t *testing.T, msg string) []map[string]any {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(b.buf.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// TestServer_LogsRefusedRequests: a request refused for the client's
// fault (no token, a malformed body) gets one WARN line with the status,
// code and reason; a 404 gets none. Before, nothing was logged.
func TestServer_LogsRefusedRequests(t *testing.T) {
	t.Parallel()
	var toks transport.Tokens
	if err := toks.Add("token-aaaaaaaaaaaaaaaa", "acme"); err != nil {
		t.Fatal(err)
	}
	var logs logBuffer
	h := newHarnessWith(t, actors.Config{}, transport.Config{Tokens: toks,
		Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))})
	acme := []string{"Authorization", "Bearer token-aaaaaaaaaaaaaaaa"}
	if resp, _ := h.do("GET", "/api/v1/runs", nil); resp.StatusCode != 401 {
		t.Fatalf("no token: %d", resp.StatusCode)
	}
	if resp, _ := h.do("POST", "/api/v1/runs", `{"question":`, acme...); resp.StatusCode != 400 {
		t.Fatalf("bad JSON: %d", resp.StatusCode)
	}
	if resp, _ := h.do("GET", "/api/v1/runs/no-such-run", nil, acme...); resp.StatusCode != 404 {
		t.Fatalf("unknown run: %d", resp.StatusCode)
	}
	got := logs.lines(t, "request refused")
	if len(got) != 2 {
		t.Fatalf("%d refusal lines, want 2: %v", len(got), got)
	}
	for i, want := range []struct {
		path, code string
		status     float64
	}{{"/api/v1/runs", "unauthorized", 401}, {"/api/v1/runs", "invalid_json", 400}} {
		l := got[i]
		if l["level"] != "WARN" || l["path"] != want.path || l["code"] != want.code || l["status"] != want.status || l["reason"] == "" {
			t.Errorf("line %d: %v, want WARN %s %v %s with a reason", i, l, want.path, want.status, want.code)
		}
	}
}

// TestServer_RefusalLinesBounded: past 20 refusal lines in a second the
// rest are counted, not logged, and the next line logged says how many
// were left out.
func TestServer_RefusalLinesBounded(t *testing.T) {
	t.Parallel()
	var toks transport.Tokens
	if err := toks.Add("token-aaaaaaaaaaaaaaaa", "acme"); err != nil {
		t.Fatal(err)
	}
	var logs logBuffer
	var now atomic.Int64
	now.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	h := newHarnessWith(t, actors.Config{}, transport.Config{Tokens: toks,
		Now:    func() time.Time { return time.Unix(0, now.Load()) },
		Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))})
	for range 25 {
		h.do("GET", "/api/v1/runs", nil)
	}
	if n := len(logs.lines(t, "request refused")); n != 20 {
		t.Fatalf("%d lines in one second, want 20", n)
	}
	now.Add(int64(time.Second))
	h.do("GET", "/api/v1/runs", nil)
	got := logs.lines(t, "request refused")
	if len(got) != 21 || got[20]["suppressed"] != float64(5) {
		t.Fatalf("%d lines, the last %v: want 21, the last with suppressed 5", len(got), got[len(got)-1])
	}
}
