package runlog_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/conclave-ai/conclave/internal/runlog"
	"github.com/conclave-ai/conclave/messages"
)

func decode(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

// TestLog_Observe: a run's start and end are one INFO line each, with its
// run, session, tenant, and at the end its outcome, duration and tokens;
// a run whose run_started carries a trace id has it on both lines. Other
// events write nothing.
func TestLog_Observe(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	l := runlog.New(runlog.Config{Logger: slog.New(slog.NewJSONHandler(&buf, nil))})
	ev := func(run messages.RunID, p messages.Payload) *messages.Envelope {
		return &messages.Envelope{RunID: run, SessionID: "s1", Type: p.EventType(), Payload: p}
	}
	l.Observe("acme", []*messages.Envelope{
		ev("r1", &messages.RunStartedPayload{Question: "traced", HITL: messages.HITLPlan, TraceID: "4bf92f3577b34da6a3ce929d0e0e4736"}),
		ev("r1", &messages.TokenUsagePayload{Model: "m", Usage: messages.Usage{InputTokens: 5}}),
		ev("r2", &messages.RunStartedPayload{Question: "plain"}),
		ev("r1", &messages.RunFinishedPayload{DurationMS: 1234, Usage: messages.Usage{InputTokens: 100, OutputTokens: 40, CacheReadTokens: 10},
			Nodes: messages.NodeCounts{Total: 3, Completed: 3}}),
		ev("r2", &messages.RunErrorPayload{Code: messages.ErrCodeAborted, Message: "stop", DurationMS: 50}),
	})
	got := decode(t, &buf)
	if len(got) != 4 {
		t.Fatalf("%d lines, want 4:\n%s", len(got), buf.String())
	}
	want := []map[string]any{
		{"level": "INFO", "msg": "run started", "run": "r1", "session": "s1", "tenant": "acme", "hitl": "plan", "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736"},
		{"level": "INFO", "msg": "run started", "run": "r2", "tenant": "acme", "trace_id": nil},
		{"level": "INFO", "msg": "run ended", "run": "r1", "session": "s1", "tenant": "acme", "outcome": "finished", "duration_ms": 1234.0,
			"input_tokens": 100.0, "output_tokens": 40.0, "cache_read_tokens": 10.0, "nodes_completed": 3.0, "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736"},
		{"level": "INFO", "msg": "run ended", "run": "r2", "outcome": "aborted", "error": "stop", "duration_ms": 50.0, "trace_id": nil},
	}
	for i, w := range want {
		for k, v := range w {
			if got[i][k] != v {
				t.Errorf("line %d: %s = %v, want %v (%v)", i, k, got[i][k], v, got[i])
			}
		}
	}
}

// TestLog_Handler: a line naming a live run (on the line, or bound with
// With) gets the run's trace id; a line that has one, a run without a
// trace, and a run that ended get none added.
func TestLog_Handler(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	l := runlog.New(runlog.Config{})
	logger := slog.New(l.Handler(slog.NewJSONHandler(&buf, nil)))
	const trace = "4bf92f3577b34da6a3ce929d0e0e4736"
	ev := func(run messages.RunID, p messages.Payload) *messages.Envelope {
		return &messages.Envelope{RunID: run, SessionID: "s1", Type: p.EventType(), Payload: p}
	}
	l.Observe("acme", []*messages.Envelope{
		ev("r1", &messages.RunStartedPayload{Question: "traced", TraceID: trace}),
		ev("r2", &messages.RunStartedPayload{Question: "untraced"}),
	})
	logger.Warn("on the line", "run", messages.RunID("r1"))
	logger.With("run", "r1").Warn("bound with With")
	logger.Warn("already has one", "run", messages.RunID("r1"), "trace_id", "other")
	logger.Warn("no trace", "run", messages.RunID("r2"))
	logger.Warn("no run")
	l.Observe("acme", []*messages.Envelope{ev("r1", &messages.RunFinishedPayload{})})
	logger.Warn("ended", "run", messages.RunID("r1"))

	want := map[string]string{"on the line": trace, "bound with With": trace, "already has one": "other", "no trace": "", "no run": "", "ended": ""}
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var rec struct {
			Msg     string `json:"msg"`
			TraceID string `json:"trace_id"`
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatal(err)
		}
		if w, ok := want[rec.Msg]; !ok || rec.TraceID != w {
			t.Errorf("%q: trace_id %q, want %q", rec.Msg, rec.TraceID, w)
		}
		delete(want, rec.Msg)
	}
	if len(want) != 0 {
		t.Errorf("lines missing: %v", want)
	}
}
