package telemetry_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/internal/telemetry"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/model"
	"github.com/conclave-ai/conclave/model/scripted"
	"github.com/conclave-ai/conclave/testkit"
)

// recordingModel records the span context each model request carries.
type recordingModel struct {
	model.Model
	mu   sync.Mutex
	seen map[trace.SpanID]string // span id → agent and turn
}

func (m *recordingModel) Stream(ctx context.Context, req model.Request) (model.Stream, error) {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		m.mu.Lock()
		m.seen[sc.SpanID()] = fmt.Sprintf("%s turn %d", req.AgentID, req.Turn)
		m.mu.Unlock()
	}
	return m.Model.Stream(ctx, req)
}

// tracedEngine is an engine whose tracer exports to the returned
// in-memory exporter, and whose models record their requests' spans.
func tracedEngine(t *testing.T, content bool) (*actors.Engine, *telemetry.Tracer, *tracetest.InMemoryExporter, *recordingModel) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	provider := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithIDGenerator(telemetry.NewIDGenerator()))
	tr := telemetry.NewWithProvider(telemetry.Config{Content: content, Risk: func(tool string) string {
		if tool == model.ToolPublish {
			return "high"
		}
		return "low"
	}}, provider)
	rec := &recordingModel{seen: map[trace.SpanID]string{}}
	factory := scripted.NewFactory()
	e := testkit.NewEngine(t, actors.Config{Tracer: tr, Models: func(s messages.Scenario) (model.Model, error) {
		m, err := factory.Model(s)
		if err != nil {
			return nil, err
		}
		rec.Model = m
		return rec, nil
	}})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testkit.Watchdog)
		defer cancel()
		if err := tr.Shutdown(ctx); err != nil {
			t.Errorf("tracer shutdown: %v", err)
		}
	})
	return e, tr, exp, rec
}

// runApproving runs cmd, approving every interrupt, and returns its events.
func runApproving(t *testing.T, e *actors.Engine, cmd messages.StartRun) []*messages.Envelope {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Watchdog)
	defer cancel()
	ref, err := e.StartRun(ctx, cmd)
	if err != nil {
		t.Fatal(err)
	}
	p, err := testkit.NewProbe(ctx, e, ref.Tenant, ref.SessionID, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for {
		evs, err := p.Until(ctx, func(env *messages.Envelope) bool {
			return env.Type == messages.InterruptRaised || testkit.TerminalOf(ref.RunID)(env)
		})
		if err != nil {
			t.Fatal(err)
		}
		last := evs[len(evs)-1]
		if last.Type.Terminal() {
			return p.Seen()
		}
		raised := last.Payload.(*messages.InterruptRaisedPayload)
		res := messages.Resume{InterruptID: raised.InterruptID, Decision: messages.DecisionApprove}
		if raised.Kind == messages.InterruptInfoRequest {
			res = messages.Resume{InterruptID: raised.InterruptID, Response: "ok"}
		}
		if _, err := e.Resume(res); err != nil {
			t.Fatalf("resume %s: %v", raised.Kind, err)
		}
	}
}

// waitSpans waits until the tracer has projected the run's end: its root
// span is exported.
func waitSpans(t *testing.T, exp *tracetest.InMemoryExporter) tracetest.SpanStubs {
	t.Helper()
	var spans tracetest.SpanStubs
	testkit.Eventually(t, func() bool {
		spans = exp.GetSpans()
		for _, s := range spans {
			if !s.Parent.IsValid() || s.Parent.IsRemote() {
				return true
			}
		}
		return false
	})
	return spans
}

func TestTracer_CouncilSpanTree(t *testing.T) {
	t.Parallel()
	e, _, exp, rec := tracedEngine(t, false)
	sc := &messages.Scenario{Nodes: 4, Teams: 1, Debate: &messages.DebateScenario{Nodes: 1, Agents: 2, Rounds: 2, Judge: true},
		ToolsPerNode: 1, SubagentsPerNode: 1}
	events := runApproving(t, e, messages.StartRun{Question: "q", HITL: messages.HITLTools, Scenario: sc})
	spans := waitSpans(t, exp)

	var started *messages.RunStartedPayload
	var usage messages.Usage
	for _, env := range events {
		switch p := env.Payload.(type) {
		case *messages.RunStartedPayload:
			started = p
		case *messages.TokenUsagePayload:
			usage = usage.Add(p.Usage)
		}
	}
	if started == nil || len(started.TraceID) != 32 {
		t.Fatalf("run_started has no trace id: %+v", started)
	}
	byID := map[trace.SpanID]tracetest.SpanStub{}
	for _, s := range spans {
		if got := s.SpanContext.TraceID().String(); got != started.TraceID {
			t.Fatalf("span %q is in trace %s, not the run's %s", s.Name, got, started.TraceID)
		}
		if _, dup := byID[s.SpanContext.SpanID()]; dup {
			t.Fatalf("two spans have id %s (%s)", s.SpanContext.SpanID(), s.Name)
		}
		byID[s.SpanContext.SpanID()] = s
	}
	var roots int
	for _, s := range spans {
		if !s.Parent.IsValid() {
			roots++
			if s.Name != "run" {
				t.Errorf("root span %q, want run", s.Name)
			}
			continue
		}
		if _, ok := byID[s.Parent.SpanID()]; !ok {
			t.Errorf("span %q has a parent that was not exported", s.Name)
		}
		if s.EndTime.Before(s.StartTime) {
			t.Errorf("span %q ends before it starts", s.Name)
		}
	}
	if roots != 1 {
		t.Fatalf("%d root spans, want 1", roots)
	}
	parentName := func(s tracetest.SpanStub) string { return byID[s.Parent.SpanID()].Name }
	attr := func(s tracetest.SpanStub, key string) string {
		for _, kv := range s.Attributes {
			if string(kv.Key) == key {
				return kv.Value.Emit()
			}
		}
		return ""
	}
	// Every node, under its wave; every turn a chat span under its lane,
	// with the id the engine gave the model's request; every tool call
	// and interrupt.
	chats, tools, interrupts, nodes, subs := 0, 0, 0, 0, 0
	var in, out int64
	for _, s := range spans {
		switch op := attr(s, "gen_ai.operation.name"); {
		case op == "chat":
			chats++
			var n int64
			fmt.Sscan(attr(s, "gen_ai.usage.input_tokens"), &n)
			in += n
			fmt.Sscan(attr(s, "gen_ai.usage.output_tokens"), &n)
			out += n
			if attr(s, "gen_ai.request.model") != "scripted" || attr(s, "gen_ai.response.finish_reasons") == "" {
				t.Errorf("chat span %q lacks GenAI attributes: %v", s.Name, s.Attributes)
			}
			if _, ok := rec.seen[s.SpanContext.SpanID()]; !ok {
				t.Errorf("chat span %s (%s, turn %s) is no model request's span", s.SpanContext.SpanID(), attr(s, "conclave.stream_id"), attr(s, "conclave.turn"))
			}
		case op == "execute_tool":
			tools++
			if attr(s, "gen_ai.tool.name") == "" || attr(s, "gen_ai.tool.call.id") == "" || attr(s, "conclave.tool.risk") == "" {
				t.Errorf("tool span %q lacks attributes: %v", s.Name, s.Attributes)
			}
		case op == "invoke_agent" && attr(s, "conclave.node.id") != "":
			nodes++
			if p := parentName(s); len(p) < 5 || p[:5] != "wave " {
				t.Errorf("node span %q is under %q, not a wave", s.Name, p)
			}
		case op == "invoke_agent" && attr(s, "conclave.subagent.async") != "":
			subs++
			if p := parentName(s); p != "execute_tool delegate" && p != "execute_tool start_async_task" {
				t.Errorf("sub-agent span %q is under %q, not its delegating call", s.Name, p)
			}
		case len(s.Name) > 10 && s.Name[:10] == "interrupt ":
			interrupts++
			if attr(s, "conclave.interrupt.decision") != "approve" {
				t.Errorf("interrupt span %q: decision %q", s.Name, attr(s, "conclave.interrupt.decision"))
			}
			if attr(s, "conclave.interrupt.kind") == "tool_approval" && parentName(s)[:13] != "execute_tool " {
				t.Errorf("tool approval span is under %q", parentName(s))
			}
		}
	}
	want := map[string]int{"chat": testkit.Count(events, messages.TokenUsage), "execute_tool": testkit.Count(events, messages.ToolCallStarted),
		"interrupt": testkit.Count(events, messages.InterruptRaised), "node": testkit.Count(events, messages.NodeStarted),
		"subagent": testkit.Count(events, messages.SubagentStarted)}
	got := map[string]int{"chat": chats, "execute_tool": tools, "interrupt": interrupts, "node": nodes, "subagent": subs}
	for k, w := range want {
		if got[k] != w || w == 0 {
			t.Errorf("%s spans: %d, want %d (from the events)", k, got[k], w)
		}
	}
	if in != usage.InputTokens || out != usage.OutputTokens {
		t.Errorf("chat spans count %d in / %d out tokens, the run's token_usage %d / %d", in, out, usage.InputTokens, usage.OutputTokens)
	}
	if len(rec.seen) != chats {
		t.Errorf("%d model requests carried a span context, %d chat spans exported", len(rec.seen), chats)
	}
}
