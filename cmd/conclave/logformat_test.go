package main

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/conclave-ai/conclave/messages"
)

// jsonLines decodes every line the server logged; a line that is not a
// JSON object fails the test.
func jsonLines(t *testing.T, c *crashChild) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(c.log.tail(1<<22), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("a log line is not JSON: %q", line)
		}
		out = append(out, m)
	}
	return out
}

// waitLogLine waits until the server logged a JSON line with msg whose
// fields include want, and returns it.
func waitLogLine(t *testing.T, c *crashChild, msg string, want map[string]any) map[string]any {
	t.Helper()
	deadline := time.Now().Add(hardenWait)
	for {
	next:
		for _, l := range jsonLines(t, c) {
			if l["msg"] != msg {
				continue
			}
			for k, v := range want {
				if l[k] != v {
					continue next
				}
			}
			return l
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %q line with %v within %v:\n%s", msg, want, hardenWait, c.log.tail(16<<10))
		}
		time.Sleep(20 * time.Millisecond) // a poll of the log, with a deadline
	}
}

// TestServe_LogFormatJSON: with --log-format json every line the server
// writes is a JSON object — protoactor's included, through the same
// handler — and the server logs a run's start, a refused request (WARN,
// with its reason), the run resumed after a restart, and the run's end
// with its outcome, duration and tokens. Before, there was no
// --log-format and none of these lines.
func TestServe_LogFormatJSON(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv := startServe(t, 0, nil, "--data", dir, "--log-format", "json")
	a := newHardenAPI(t, srv, "")
	rc := a.mustStartRun(t, `{"question":"q","hitl":"plan","scenario":{"nodes":2}}`)
	s := a.mustStream(t, rc.SessionID, 0)
	if _, err := s.untilInterrupt(); err != nil {
		t.Fatal(err)
	}
	s.close()
	started := waitLogLine(t, srv, "run started", map[string]any{"run": string(rc.RunID)})
	if started["level"] != "INFO" || started["session"] != string(rc.SessionID) || started["tenant"] != "local" {
		t.Errorf("run started line %v", started)
	}
	if code, _, _ := a.call(t, http.MethodPost, "/api/v1/runs", `{"question":`); code != http.StatusBadRequest {
		t.Fatalf("bad JSON answered %d", code)
	}
	refused := waitLogLine(t, srv, "request refused", map[string]any{"code": "invalid_json"})
	if refused["level"] != "WARN" || refused["status"] != 400.0 || refused["reason"] == "" {
		t.Errorf("refusal line %v", refused)
	}
	waitLogLine(t, srv, "actor system started", map[string]any{"component": "protoactor", "level": "INFO"})
	srv.terminate()

	srv = startServe(t, 0, nil, "--data", dir, "--log-format", "json")
	a = newHardenAPI(t, srv, "")
	resumed := waitLogLine(t, srv, "run resumed", map[string]any{"run": string(rc.RunID)})
	if resumed["level"] != "INFO" || resumed["session"] != string(rc.SessionID) {
		t.Errorf("run resumed line %v", resumed)
	}
	code, _, b := a.call(t, http.MethodGet, "/api/v1/interrupts?session_id="+url.QueryEscape(string(rc.SessionID)), "")
	var list messages.InterruptList
	if code != http.StatusOK || json.Unmarshal(b, &list) != nil || len(list.Interrupts) != 1 {
		t.Fatalf("interrupts = %d %s", code, b)
	}
	if code, _, b := a.call(t, http.MethodPost, "/api/v1/interrupts/"+url.PathEscape(list.Interrupts[0].InterruptID)+"/resume", `{"decision":"approve"}`); code != http.StatusOK {
		t.Fatalf("approve = %d %s", code, b)
	}
	ended := waitLogLine(t, srv, "run ended", map[string]any{"run": string(rc.RunID)})
	if ended["level"] != "INFO" || ended["outcome"] != "finished" || ended["tenant"] != "local" {
		t.Errorf("run ended line %v", ended)
	}
	for _, k := range []string{"duration_ms", "input_tokens", "output_tokens"} {
		if v, ok := ended[k].(float64); !ok || v <= 0 {
			t.Errorf("run ended %s = %v, want > 0", k, ended[k])
		}
	}
	// An agent that panics is restarted by its supervisor: protoactor's
	// "[ACTOR] Recovering" is a JSON line of the server's handler too.
	a.mustStartRun(t, `{"question":"q","scenario":{"nodes":2,"waves":1,"panic_nodes":1}}`)
	waitLogLine(t, srv, "[ACTOR] Recovering", map[string]any{"component": "protoactor", "level": "INFO"})
}

// TestRun_LogFormatJSON: `conclave run --log-format json` logs JSON lines,
// among them the run's start and end; an unknown format is a usage error.
func TestRun_LogFormatJSON(t *testing.T) {
	t.Parallel()
	r := runCLI(t, t.Context(), nil, false, "run", "why", "--nodes", "2", "--json", "--log-level", "info", "--log-format", "json")
	if r.code != exitOK {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	msgs := map[any]bool{}
	for _, line := range strings.Split(strings.TrimSpace(r.stderr), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("a log line is not JSON: %q", line)
		}
		msgs[m["msg"]] = true
	}
	if !msgs["run started"] || !msgs["run ended"] {
		t.Errorf("log lines %v lack the run's start or end", msgs)
	}
	if r := runCLI(t, t.Context(), nil, false, "run", "why", "--log-format", "yaml"); r.code != exitUsage || !strings.Contains(r.stderr, "--log-format") {
		t.Errorf("--log-format yaml: exit %d, %s", r.code, r.stderr)
	}
}
