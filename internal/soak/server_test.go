package soak

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestServerConfig_ServeArgs(t *testing.T) {
	t.Parallel()
	got := ServerConfig{DataDir: "/tmp/d", ConcurrentRuns: 32, HubIdleAfter: 10 * time.Second, Heartbeat: time.Second}.ServeArgs()
	want := []string{"serve", "--data", "/tmp/d", "--addr", "127.0.0.1:0", "--log-level", "info",
		"--runs-per-second", "-1", "--concurrent-runs", "32", "--hub-idle-after", "10s", "--journal-idle-after", "50s", "--heartbeat", "1s"}
	if !slices.Equal(got, want) {
		t.Errorf("args %q\nwant %q", got, want)
	}
}

func TestServerLog(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	l := &serverLog{out: &out}
	addr := make(chan string, 1)
	log := strings.Join([]string{
		`time=2026-01-01T00:00:00Z level=INFO msg="durable journal" dir=/tmp/d/journal`,
		`time=2026-01-01T00:00:00Z level=WARN msg="no tokens configured: authentication is off"`,
		`time=2026-01-01T00:00:00Z level=INFO msg="conclave listening" addr=127.0.0.1:4242 url=http://127.0.0.1:4242`,
		`time=2026-01-01T00:00:01Z level=ERROR msg="hub: journal append failed; closing subscribers" session=s1`,
		`time=2026-01-01T00:00:02Z level=WARN msg="journal: disk slow" path=x`,
		`time=2026-01-01T00:00:03Z level=INFO msg="conclave listening" addr=127.0.0.1:9999`,
	}, "\n") + "\n"
	l.scan(strings.NewReader(log), addr)
	if got := <-addr; got != "127.0.0.1:4242" {
		t.Errorf("addr %q", got)
	}
	n, first := l.problems()
	if n != 2 || len(first) != 2 || !strings.Contains(first[0], "journal append failed") {
		t.Errorf("problems %d %q; want the ERROR and the WARN, not the no-tokens warning", n, first)
	}
	if got := strings.Count(out.String(), "server: "); got != 2 {
		t.Errorf("copied %d lines to stderr, want 2:\n%s", got, out.String())
	}
	if !strings.Contains(l.tail(), "9999") {
		t.Errorf("tail lacks the last line:\n%s", l.tail())
	}
}

func TestLogField(t *testing.T) {
	t.Parallel()
	line := `time=x level=INFO msg="conclave listening" addr=127.0.0.1:80 url=http://127.0.0.1:80`
	if got := logField(line, "addr"); got != "127.0.0.1:80" {
		t.Errorf("addr %q", got)
	}
	if got := logField(line, "port"); got != "" {
		t.Errorf("port %q", got)
	}
}
