package main

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/conclave-ai/conclave/messages"
)

// TestServe_DataDirRemoved (issue 27 item 7): the data directory of a
// running `conclave serve` is removed while a run streams. The stream must
// end with an error frame, GET /readyz must answer 503 naming the journal
// (GET /healthz, liveness, stays 200), and the process must exit 1 with a
// clear log line: no crash ("fatal error: sync: unlock of unlocked
// mutex"), no spinning with /healthz ok, no log line per dropped token.
func TestServe_DataDirRemoved(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	argv := serveArgv(t, []string{"--data", dir, "--runs-per-second", "-1"})
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), crashChildEnv+"=1")
	srv := startChild(t, cmd, "")
	t.Cleanup(func() {
		if !srv.exited {
			_ = cmd.Process.Kill()
			srv.reap()
		}
	})
	a := newHardenAPI(t, srv, "")
	if code, _, b := a.call(t, http.MethodGet, "/readyz", ""); code != http.StatusOK {
		t.Fatalf("GET /readyz before = %d %s", code, b)
	}
	rc := a.mustStartRun(t, `{"question":"q","scenario":{"nodes":4,"waves":2,"tokens":4000,"token_delay_ms":2}}`)
	s := a.mustStream(t, rc.SessionID, 0)
	for range 5 {
		if _, err := s.next(); err != nil {
			t.Fatal(err)
		}
	}

	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	var ended error
	for ended == nil {
		_, ended = s.next()
	}
	if !strings.Contains(ended.Error(), "stream_closed") || !strings.Contains(ended.Error(), "session_gone") {
		t.Fatalf("the stream ended with %v; want a stream_closed frame with code session_gone", ended)
	}

	var rd messages.Readiness
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, _, b, err := a.do(http.MethodGet, "/readyz", "")
		if err == nil && code == http.StatusServiceUnavailable {
			if err := json.Unmarshal(b, &rd); err != nil {
				t.Fatalf("GET /readyz body %s: %v", b, err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET /readyz = %d %s (%v); want 503 once the journal failed", code, b, err)
		}
		time.Sleep(20 * time.Millisecond) // a poll of the server's state, with a deadline
	}
	if rd.Status != messages.NotReadyStatus || len(rd.NotReady) == 0 || rd.NotReady[0].Component != "journal" {
		t.Fatalf("GET /readyz = %+v; want the journal named", rd)
	}
	if code, _, b, err := a.do(http.MethodGet, "/healthz", ""); err == nil && code != http.StatusOK {
		t.Fatalf("GET /healthz during the grace = %d %s; liveness stays 200", code, b)
	}

	srv.reap() // it stops by itself after --fail-grace
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signaled() || ws.ExitStatus() != 1 {
		t.Fatalf("the server exited with %v; want exit status 1", cmd.ProcessState)
	}
	log := srv.log.tail(1 << 20)
	if !strings.Contains(log, "the journal failed") {
		t.Fatalf("no clear log line about the journal:\n%s", log)
	}
	// One line for the session's dropped events, not one per token.
	if n := strings.Count(log, "hub: journal failed; event"); n > 1 {
		t.Fatalf("the hub logged %d lines about dropped events of one session; want 1", n)
	}
	for _, line := range strings.Split(log, "\n") {
		if strings.HasPrefix(line, "panic:") || strings.HasPrefix(line, "fatal error:") || strings.HasPrefix(line, "goroutine ") || strings.Contains(line, "DATA RACE") {
			t.Fatalf("the server crashed: %s\n%s", line, log)
		}
	}
}
