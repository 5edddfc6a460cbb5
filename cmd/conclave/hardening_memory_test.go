package main

import (
	"bufio"
	"encoding/json"
	"maps"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/conclave-ai/conclave/messages"
)

// Black-box tests of issue 11, items 7 (retention strands a parked run
// across kill -9) and 8 (memory that only grows), against a real
// `conclave serve --data` process.

// metric reads one unlabelled gauge or counter from GET /metrics (-1 when
// it is missing).
func (a *hardenAPI) metric(t *testing.T, name string) float64 {
	t.Helper()
	code, _, b := a.call(t, http.MethodGet, "/metrics", "")
	if code != http.StatusOK {
		t.Fatalf("GET /metrics = %d %s", code, b)
	}
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("metric %s: %v", name, err)
			}
			return f
		}
	}
	return -1
}

// waitMetric polls a metric until ok holds, failing after within.
func (a *hardenAPI) waitMetric(t *testing.T, name string, within time.Duration, ok func(float64) bool) float64 {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		v := a.metric(t, name)
		if ok(v) {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("metric %s is %v after %v", name, v, within)
		}
		time.Sleep(50 * time.Millisecond) // a poll of the server's state, with a deadline
	}
}

// logged reports whether the server logs a line containing substr
// within the given time.
func (c *crashChild) logged(substr string, within time.Duration) bool {
	deadline := time.Now().Add(within)
	for !strings.Contains(c.log.tail(1<<20), substr) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond) // a poll of the log, with a deadline
	}
	return true
}

// TestHarden_RetentionKeepsParkedRunAcrossKill (item 7): with
// --retention-events 5, a run parked on its node approvals keeps what its
// recovery needs; after kill -9 and a restart it is still parked on the
// same interrupts, resumable, and ends with its one terminal event. On
// 87615b9 (before issue 11) its interrupts were gone after the second
// restart (retention had trimmed its start).
func TestHarden_RetentionKeepsParkedRunAcrossKill(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	args := []string{"--data", dir, "--retention-events", "5", "--retention-interval", "50ms"}
	srv := startServe(t, 0, nil, args...)
	a := newHardenAPI(t, srv, "")
	// An ended run first, so retention has something to trim.
	done := a.mustStartRun(t, `{"question":"old","session_id":"ret","scenario":{"nodes":2,"tokens":20}}`)
	if _, _, err := a.waitRun(done.RunID, hardenWait, func(s messages.RunSummary) bool { return s.Status.Terminal() }); err != nil {
		t.Fatal(err)
	}
	parked := a.mustStartRun(t, `{"question":"q","session_id":"ret","hitl":"node","scenario":{"nodes":2,"waves":1,"tokens":3}}`)
	s := a.mustStream(t, "ret", 0)
	planGate := ""
	for planGate == "" {
		f, err := s.next()
		if err != nil {
			t.Fatal(err)
		}
		if f.typ == messages.InterruptRaised {
			env, err := f.env()
			if err != nil {
				t.Fatal(err)
			}
			if env.RunID == parked.RunID {
				planGate = env.Payload.(*messages.InterruptRaisedPayload).InterruptID
			}
		}
	}
	if code, _, b := a.call(t, http.MethodPost, "/api/v1/events/resume/"+url.PathEscape(planGate), `{"decision":"approve"}`); code != http.StatusOK {
		t.Fatalf("approve the plan = %d %s", code, b)
	}
	pending := func(a *hardenAPI) []messages.Interrupt {
		code, _, b := a.call(t, http.MethodGet, "/api/v1/interrupts?session_id=ret", "")
		if code != http.StatusOK {
			t.Fatalf("GET interrupts = %d %s", code, b)
		}
		var list messages.InterruptList
		if err := json.Unmarshal(b, &list); err != nil {
			t.Fatal(err)
		}
		return list.Interrupts
	}
	// Both node gates raised, as the stream shows them: journaled (the
	// interrupts API lists only those too: interrupts.Registry.Journaled).
	for gates := 0; gates < 2; {
		f, err := s.next()
		if err != nil {
			t.Fatal(err)
		}
		if f.typ != messages.InterruptRaised {
			continue
		}
		env, err := f.env()
		if err != nil {
			t.Fatal(err)
		}
		if env.RunID == parked.RunID && env.Payload.(*messages.InterruptRaisedPayload).Kind == messages.InterruptNodeApproval {
			gates++
		}
	}
	before := pending(a)
	if len(before) != 2 {
		t.Fatalf("node gates: %+v", before)
	}
	s.close()
	// kill -9, a restart (the recovered run is parked again; retention,
	// which runs at start and every 50 ms, trims the session), and kill -9
	// and a restart once more: this recovery reads the trimmed journal.
	trimmed := srv.logged("retention trimmed events", 2*time.Second)
	for range 2 {
		_ = srv.cmd.Process.Kill()
		srv.reap()
		srv = startServe(t, 0, nil, args...)
		if !trimmed {
			trimmed = srv.logged("retention trimmed events", hardenWait)
		}
	}
	if !trimmed {
		t.Fatal("retention never trimmed the session")
	}
	a = newHardenAPI(t, srv, "")
	after := pending(a)
	ids := func(l []messages.Interrupt) map[string]bool {
		m := map[string]bool{}
		for _, in := range l {
			m[in.InterruptID] = true
		}
		return m
	}
	if len(after) != 2 || !maps.Equal(ids(after), ids(before)) {
		t.Fatalf("after retention and kill -9: pending %+v, want the same two node gates as before: %+v", after, before)
	}
	if sum, err := a.runSummary(parked.RunID); err != nil || sum.Status != messages.StatusRunning {
		t.Fatalf("the parked run after the restart: %+v, %v", sum, err)
	}
	for _, in := range after {
		if code, _, b := a.call(t, http.MethodPost, "/api/v1/events/resume/"+url.PathEscape(in.InterruptID), `{"decision":"approve"}`); code != http.StatusOK {
			t.Fatalf("approve %s after the restart = %d %s", in.InterruptID, code, b)
		}
	}
	sum, _, err := a.waitRun(parked.RunID, hardenWait, func(s messages.RunSummary) bool { return s.Status.Terminal() })
	if err != nil || sum.Status != messages.StatusFinished || sum.Nodes.Completed != 2 {
		t.Fatalf("the parked run ended %+v, %v; want finished with both nodes", sum, err)
	}
	if old, err := a.runSummary(done.RunID); err != nil || old.Status != messages.StatusFinished {
		t.Fatalf("the trimmed, ended run reads %+v, %v", old, err)
	}
}

// TestHarden_MemoryDoesNotGrowWithRuns (item 8): after 300 runs, each in a
// session of its own, the sessions' hubs stop once idle and the runs
// leave memory, yet every run is still readable and listed; goroutines
// are back where they started. On 5191605 hubs were never stopped and
// every run stayed in the registries and the run index.
func TestHarden_MemoryDoesNotGrowWithRuns(t *testing.T) {
	t.Parallel()
	srv := startServe(t, 0, nil, "--data", t.TempDir(), "--hub-idle-after", "200ms", "--runs-per-second", "-1", "--heartbeat", "1s")
	a := newHardenAPI(t, srv, "")
	goroutines := a.metric(t, "go_goroutines")
	const runs = 300
	ids := make([]messages.RunID, 0, runs)
	for i := range runs {
		rc := a.mustStartRun(t, `{"question":"q`+strconv.Itoa(i)+`","scenario":{"nodes":2,"tokens":3,"synthesis_tokens":3}}`)
		ids = append(ids, rc.RunID)
		if _, _, err := a.waitRun(rc.RunID, hardenWait, func(s messages.RunSummary) bool { return s.Status.Terminal() }); err != nil {
			t.Fatal(err)
		}
	}
	a.waitMetric(t, "conclave_runs_live", hardenWait, func(v float64) bool { return v == 0 })
	hubs := a.waitMetric(t, "conclave_hubs", hardenWait, func(v float64) bool { return v == 0 })
	t.Logf("%d runs: hubs %v once idle", runs, hubs)
	for _, id := range ids {
		sum, err := a.runSummary(id)
		if err != nil || sum.Status != messages.StatusFinished {
			t.Fatalf("run %s after it left memory: %+v, %v", id, sum, err)
		}
	}
	code, _, b := a.call(t, http.MethodGet, "/api/v1/runs?limit=200", "")
	var list messages.RunList
	if err := json.Unmarshal(b, &list); code != http.StatusOK || err != nil || len(list.Runs) != 200 || list.Runs[0].RunID != ids[0] || list.NextCursor == "" {
		t.Fatalf("list = %d, %d runs (first %v), next %q, %v", code, len(list.Runs), list.Runs, list.NextCursor, err)
	}
	// A session that went idle streams again from the journal.
	first, err := a.runSummary(ids[0])
	if err != nil {
		t.Fatal(err)
	}
	s := a.mustStream(t, first.SessionID, 0)
	if env, n, err := s.untilTerminal(); err != nil || env.RunID != ids[0] || uint64(n) != first.LastSeq {
		t.Fatalf("replay of an idle session: %d events, %v, %v", n, env, err)
	}
	s.close()
	a.waitMetric(t, "go_goroutines", hardenWait, func(v float64) bool { return v <= goroutines+2 })
}
