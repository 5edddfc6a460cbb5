package telemetry_test

import (
	"context"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/conclave-ai/conclave/internal/telemetry"
	"github.com/conclave-ai/conclave/internal/telemetry/spanid"
	"github.com/conclave-ai/conclave/messages"
)

const testTrace = "4bf92f3577b34da6a3ce929d0e0e4736"

// events makes a run's envelopes with consecutive seqs, a second apart.
type events struct {
	run messages.RunID
	seq uint64
	at  time.Time
}

func (e *events) next(stream messages.StreamID, p messages.Payload) *messages.Envelope {
	e.seq++
	e.at = e.at.Add(time.Second)
	lane := messages.RunLane()
	if stream != messages.RunStream {
		lane = messages.RunLane().Child(stream)
	}
	return &messages.Envelope{Seq: e.seq, Type: p.EventType(), Timestamp: e.at, SessionID: "s", RunID: e.run, AgentID: string(stream), Lane: lane, Payload: p}
}

func newTestProjector() (*telemetry.Projector, *tracetest.InMemoryExporter) {
	exp := tracetest.NewInMemoryExporter()
	provider := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithIDGenerator(telemetry.NewIDGenerator()))
	return telemetry.NewProjector(telemetry.ProjectorConfig{Tracer: provider.Tracer("test")}), exp
}

// TestProjector_Resumed: a run resumed in a new process (its first
// projector gone, as in a kill -9) goes on in its trace under a "run
// (resumed)" root linked to its first root, and its restarted agent's turn
// has the id the engine derives for that attempt.
func TestProjector_Resumed(t *testing.T) {
	t.Parallel()
	ev := &events{run: "r1", at: time.Unix(1_700_000_000, 0)}
	started := &messages.RunStartedPayload{Question: "q", TraceID: testTrace}
	before, exp1 := newTestProjector()
	before.Apply(ev.next(messages.RunStream, started))
	before.Apply(ev.next(messages.NodeStream("n1"), &messages.NodeStartedPayload{NodeID: "n1"}))
	if n := len(exp1.GetSpans()); n != 0 {
		t.Fatalf("%d spans ended before the crash, want none", n)
	}

	after, exp := newTestProjector()
	after.Apply(ev.next(messages.NodeStream("n2"), &messages.NodeStartedPayload{NodeID: "n2"})) // not resumed yet: unknown
	if after.Live() != 0 {
		t.Fatalf("a run neither started nor resumed here has spans")
	}
	after.Resumed("r1", started)
	first := ev.seq + 1
	after.Apply(ev.next(messages.NodeStream("n1"), &messages.AgentRestartedPayload{Attempt: 2, Reason: "server restarted"}))
	after.Apply(ev.next(messages.NodeStream("n1"), &messages.TokenUsagePayload{Model: "m", Turn: 1, Attempt: 2, Usage: messages.Usage{InputTokens: 5, OutputTokens: 7}}))
	after.Apply(ev.next(messages.NodeStream("n1"), &messages.NodeCompletedPayload{NodeID: "n1"}))
	after.Apply(ev.next(messages.RunStream, &messages.RunFinishedPayload{}))
	if after.Live() != 0 {
		t.Fatalf("%d runs still live after run_finished", after.Live())
	}

	tid, _ := trace.TraceIDFromHex(testTrace)
	names := map[string]tracetest.SpanStub{}
	for _, s := range exp.GetSpans() {
		if s.SpanContext.TraceID() != tid {
			t.Errorf("span %q is in trace %s", s.Name, s.SpanContext.TraceID())
		}
		names[s.Name] = s
	}
	root, ok := names["run (resumed)"]
	if !ok || root.Parent.IsValid() || root.SpanContext.SpanID() != spanid.ResumedRun("r1", first) {
		t.Fatalf("spans %v: want a root run (resumed) with its derived id", names)
	}
	if len(root.Links) != 1 || root.Links[0].SpanContext.SpanID() != spanid.Run("r1") || root.Links[0].SpanContext.TraceID() != tid {
		t.Fatalf("the resumed root's links %+v: want one to the run's first root", root.Links)
	}
	node := names["node n1"]
	if node.Parent.SpanID() != root.SpanContext.SpanID() {
		t.Errorf("node n1 is not under the resumed root")
	}
	chat := names["chat m"]
	if chat.SpanContext.SpanID() != spanid.Turn("r1", messages.NodeStream("n1"), "", 2, 1) || chat.Parent.SpanID() != node.SpanContext.SpanID() {
		t.Errorf("chat span %s under %s: want turn 1 of attempt 2's id under node n1", chat.SpanContext.SpanID(), chat.Parent.SpanID())
	}
}

// TestProjector_TurnTiming: a chat span starts when the lane's previous
// event that was not streamed output happened, ends at its token_usage,
// records the time to its first chunk, and finishes with tool_calls when
// tool calls follow it.
func TestProjector_TurnTiming(t *testing.T) {
	t.Parallel()
	p, exp := newTestProjector()
	ev := &events{run: "r1", at: time.Unix(1_700_000_000, 0)}
	lane := messages.NodeStream("n1")
	p.Apply(ev.next(messages.RunStream, &messages.RunStartedPayload{TraceID: testTrace}))
	p.Apply(ev.next(lane, &messages.NodeStartedPayload{NodeID: "n1"}))
	turnStart := ev.at
	p.Apply(ev.next(lane, &messages.NodeProgressPayload{NodeID: "n1"}))
	p.Apply(ev.next(lane, &messages.TextDeltaPayload{Delta: "a"})) // 2 s after the start
	p.Apply(ev.next(lane, &messages.TextDeltaPayload{Delta: "b"}))
	p.Apply(ev.next(lane, &messages.TokenUsagePayload{Model: "m", Turn: 1, Attempt: 1}))
	turnEnd := ev.at
	p.Apply(ev.next(lane, &messages.ToolCallStartedPayload{CallID: "c1", Tool: "search"}))
	p.Apply(ev.next(lane, &messages.ToolCallFinishedPayload{CallID: "c1", Tool: "search"}))
	second := ev.at
	p.Apply(ev.next(lane, &messages.TextDeltaPayload{Delta: "c"}))
	p.Apply(ev.next(lane, &messages.TokenUsagePayload{Model: "m", Turn: 2, Attempt: 1}))
	p.Apply(ev.next(lane, &messages.NodeCompletedPayload{NodeID: "n1"}))
	p.Apply(ev.next(messages.RunStream, &messages.RunFinishedPayload{}))

	var chats []tracetest.SpanStub
	var tool tracetest.SpanStub
	for _, s := range exp.GetSpans() {
		switch s.Name {
		case "chat m":
			chats = append(chats, s)
		case "execute_tool search":
			tool = s
		}
	}
	if len(chats) != 2 {
		t.Fatalf("%d chat spans, want 2", len(chats))
	}
	attr := func(s tracetest.SpanStub, key string) string {
		for _, kv := range s.Attributes {
			if string(kv.Key) == key {
				return kv.Value.Emit()
			}
		}
		return ""
	}
	c1, c2 := chats[0], chats[1]
	if attr(c1, "conclave.turn") != "1" {
		c1, c2 = c2, c1
	}
	if !c1.StartTime.Equal(turnStart) || !c1.EndTime.Equal(turnEnd) || attr(c1, "gen_ai.response.time_to_first_chunk") != "2" ||
		attr(c1, "gen_ai.response.finish_reasons") != `["tool_calls"]` {
		t.Errorf("turn 1: %v..%v ttft %s finish %s; want %v..%v, 2 s, tool_calls", c1.StartTime, c1.EndTime,
			attr(c1, "gen_ai.response.time_to_first_chunk"), attr(c1, "gen_ai.response.finish_reasons"), turnStart, turnEnd)
	}
	if !c2.StartTime.Equal(second) || attr(c2, "gen_ai.response.finish_reasons") != `["stop"]` {
		t.Errorf("turn 2 starts %v (want %v, its tool result), finishes %s (want stop)", c2.StartTime, second, attr(c2, "gen_ai.response.finish_reasons"))
	}
	if tool.SpanContext.SpanID() != spanid.Tool("r1", lane, 1, 1, "c1") {
		t.Errorf("the tool span's id is not the one the engine hands the call")
	}
}

// TestTracer_ShutdownIdempotent: Shutdown projects what was queued, a
// second one is a no-op, and Observe after it is ignored.
func TestTracer_ShutdownIdempotent(t *testing.T) {
	t.Parallel()
	var ended []string
	provider := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(endRecorder{&ended}), sdktrace.WithIDGenerator(telemetry.NewIDGenerator()))
	tr := telemetry.NewWithProvider(telemetry.Config{}, provider)
	ev := &events{run: "r1", at: time.Unix(1_700_000_000, 0)}
	tr.Observe("t", []*messages.Envelope{ev.next(messages.RunStream, &messages.RunStartedPayload{TraceID: testTrace}),
		ev.next(messages.RunStream, &messages.RunFinishedPayload{})})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tr.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if len(ended) != 1 || ended[0] != "run" {
		t.Fatalf("spans ended by Shutdown: %v, want the queued run's", ended)
	}
	if err := tr.Shutdown(ctx); err != nil {
		t.Fatalf("second Shutdown: %v", err)
	}
	tr.Observe("t", []*messages.Envelope{ev.next(messages.RunStream, &messages.RunStartedPayload{TraceID: testTrace})})
	select {
	case <-tr.Done():
	default:
		t.Fatal("Done is open after Shutdown")
	}
}

func TestConfig_Enabled(t *testing.T) {
	t.Parallel()
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	for _, tc := range []struct {
		cfg  telemetry.Config
		want bool
	}{
		{telemetry.Config{Getenv: env()}, false},
		{telemetry.Config{Getenv: env(), Endpoint: "http://c:4318"}, true},
		{telemetry.Config{Getenv: env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318")}, true},
		{telemetry.Config{Getenv: env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://c:4318/v1/traces")}, true},
		{telemetry.Config{Getenv: env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318", "OTEL_TRACES_EXPORTER", "none")}, false},
		{telemetry.Config{Getenv: env("OTEL_SDK_DISABLED", "true"), Endpoint: "http://c:4318"}, false},
	} {
		if got := tc.cfg.Enabled(); got != tc.want {
			t.Errorf("Enabled(%+v) = %v, want %v", tc.cfg.Endpoint, got, tc.want)
		}
	}
	tr, err := telemetry.New(context.Background(), telemetry.Config{Getenv: env()})
	if tr != nil || err != nil {
		t.Fatalf("New without an endpoint: %v, %v; want no tracer", tr, err)
	}
	_, err = telemetry.New(context.Background(), telemetry.Config{Endpoint: "http://127.0.0.1:1", Getenv: env("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")})
	if err == nil {
		t.Fatal("New with OTEL_EXPORTER_OTLP_PROTOCOL=grpc: no error")
	}
}

// endRecorder records the names of ended spans. The tracer's one goroutine
// ends them, and Shutdown waits for it before the test reads.
type endRecorder struct{ names *[]string }

func (r endRecorder) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (r endRecorder) OnEnd(s sdktrace.ReadOnlySpan)                   { *r.names = append(*r.names, s.Name()) }
func (r endRecorder) Shutdown(context.Context) error                  { return nil }
func (r endRecorder) ForceFlush(context.Context) error                { return nil }

// TestProjector_Content: prompt and completion text, tool arguments and
// results are on the spans only with Content.
func TestProjector_Content(t *testing.T) {
	t.Parallel()
	for _, content := range []bool{false, true} {
		exp := tracetest.NewInMemoryExporter()
		provider := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithIDGenerator(telemetry.NewIDGenerator()))
		p := telemetry.NewProjector(telemetry.ProjectorConfig{Tracer: provider.Tracer("test"), Content: content})
		ev := &events{run: "r1", at: time.Unix(1_700_000_000, 0)}
		lane := messages.NodeStream("n1")
		p.Apply(ev.next(messages.RunStream, &messages.RunStartedPayload{Question: "secret question", TraceID: testTrace}))
		p.Apply(ev.next(lane, &messages.NodeStartedPayload{NodeID: "n1"}))
		p.Apply(ev.next(lane, &messages.TextDeltaPayload{Delta: "secret answer"}))
		p.Apply(ev.next(lane, &messages.TokenUsagePayload{Model: "m", Turn: 1, Attempt: 1}))
		p.Apply(ev.next(lane, &messages.ToolCallStartedPayload{CallID: "c1", Tool: "search", Args: []byte(`{"query":"secret args"}`)}))
		p.Apply(ev.next(lane, &messages.ToolCallFinishedPayload{CallID: "c1", Tool: "search", Result: "secret result"}))
		p.Apply(ev.next(messages.RunStream, &messages.RunFinishedPayload{Answer: "secret final"}))
		found := map[string]bool{}
		for _, s := range exp.GetSpans() {
			for _, kv := range s.Attributes {
				for _, w := range []string{"secret question", "secret answer", "secret args", "secret result", "secret final"} {
					if strings.Contains(kv.Value.Emit(), w) {
						found[w] = true
					}
				}
			}
		}
		if want := map[bool]int{false: 0, true: 5}[content]; len(found) != want {
			t.Errorf("Content %v: the spans hold %v, want %d of the 5 texts", content, found, want)
		}
	}
}
