package spanid_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/conclave-ai/conclave/internal/telemetry/spanid"
	"github.com/conclave-ai/conclave/messages"
)

// TestTurn_Distinct: the ids of a run's spans are valid, the same for the
// same facts, and differ when any fact differs (lane, role, attempt, turn,
// call, run).
func TestTurn_Distinct(t *testing.T) {
	t.Parallel()
	n1 := messages.NodeStream("n1")
	ids := map[trace.SpanID]string{}
	add := func(name string, id trace.SpanID) {
		t.Helper()
		if !id.IsValid() {
			t.Fatalf("%s: invalid id", name)
		}
		if other, dup := ids[id]; dup {
			t.Fatalf("%s and %s share id %s", name, other, id)
		}
		ids[id] = name
	}
	add("run", spanid.Run("r1"))
	add("other run", spanid.Run("r2"))
	add("resumed at 7", spanid.ResumedRun("r1", 7))
	add("resumed at 8", spanid.ResumedRun("r1", 8))
	add("lane", spanid.Lane("r1", n1))
	add("wave 0", spanid.Wave("r1", messages.RunStream, 0))
	add("team wave 0", spanid.Wave("r1", n1, 0))
	add("turn 1", spanid.Turn("r1", n1, "", 1, 1))
	add("turn 2", spanid.Turn("r1", n1, "", 1, 2))
	add("attempt 2 turn 1", spanid.Turn("r1", n1, "", 2, 1))
	add("advisor turn 1", spanid.Turn("r1", n1, "advisor", 1, 1))
	add("other lane turn 1", spanid.Turn("r1", messages.NodeStream("n2"), "", 1, 1))
	add("call c1", spanid.Tool("r1", n1, 1, 1, "c1"))
	add("call c1 turn 2", spanid.Tool("r1", n1, 1, 2, "c1"))
	add("interrupt", spanid.Interrupt("r1", "i1"))
	if spanid.Turn("r1", n1, "", 1, 1) != spanid.Turn("r1", n1, "", 1, 1) {
		t.Fatal("the same turn has two ids")
	}
}

func TestTraceparent(t *testing.T) {
	t.Parallel()
	if got := spanid.Traceparent(context.Background()); got != "" {
		t.Fatalf("no span context: %q", got)
	}
	tid, _ := trace.TraceIDFromHex("0af7651916cd43dd8448eb211c80319c")
	sid, _ := trace.SpanIDFromHex("b7ad6b7169203331")
	ctx := trace.ContextWithRemoteSpanContext(context.Background(), spanid.SpanContext(tid, sid))
	const want = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	if got := spanid.Traceparent(ctx); got != want || !messages.ValidTraceparent(got) {
		t.Fatalf("Traceparent = %q, want %q", got, want)
	}
}
