package main

import (
	"bytes"
	"compress/gzip"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/conclave-ai/conclave/internal/telemetry/spanid"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/model/openai"
	"github.com/conclave-ai/conclave/model/openai/openaitest"
	"github.com/conclave-ai/conclave/testkit"
	"github.com/conclave-ai/conclave/tool/mcp"
)

// otlpReceiver is an in-process OTLP/HTTP trace receiver: it decodes each
// export with the official OTLP protobuf types and keeps the spans.
type otlpReceiver struct {
	URL string

	mu       sync.Mutex
	spans    []*tracepb.Span
	services map[string]bool // resource service.name values
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	r := &otlpReceiver{services: map[string]bool{}}
	ts := httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(ts.Close)
	r.URL = ts.URL
	return r
}

func (r *otlpReceiver) serve(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" {
		http.Error(w, "not an OTLP/HTTP traces export", http.StatusNotFound)
		return
	}
	if ct := req.Header.Get("Content-Type"); ct != "application/x-protobuf" {
		http.Error(w, "content type "+ct, http.StatusUnsupportedMediaType)
		return
	}
	var body io.Reader = http.MaxBytesReader(w, req.Body, 64<<20)
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	b, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var export collectortrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &export); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	for _, rs := range export.GetResourceSpans() {
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				r.services[kv.GetValue().GetStringValue()] = true
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			r.spans = append(r.spans, ss.GetSpans()...)
		}
	}
	r.mu.Unlock()
	out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// spansOf returns the spans received so far of trace tid.
func (r *otlpReceiver) spansOf(tid []byte) []*tracepb.Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*tracepb.Span
	for _, s := range r.spans {
		if bytes.Equal(s.GetTraceId(), tid) {
			out = append(out, s)
		}
	}
	return out
}

// spanAttr is a span's attribute as text ("" when it has none).
func spanAttr(s *tracepb.Span, key string) string {
	for _, kv := range s.GetAttributes() {
		if kv.GetKey() == key {
			return anyValueText(kv.GetValue())
		}
	}
	return ""
}

func anyValueText(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return strconv.FormatInt(x.IntValue, 10)
	case *commonpb.AnyValue_BoolValue:
		if x.BoolValue {
			return "true"
		}
		return "false"
	case *commonpb.AnyValue_DoubleValue:
		return strconv.FormatFloat(x.DoubleValue, 'g', -1, 64)
	case *commonpb.AnyValue_ArrayValue:
		var parts []string
		for _, e := range x.ArrayValue.GetValues() {
			parts = append(parts, anyValueText(e))
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	return ""
}

func spanAttrInt(s *tracepb.Span, key string) int64 {
	for _, kv := range s.GetAttributes() {
		if kv.GetKey() == key {
			return kv.GetValue().GetIntValue()
		}
	}
	return -1
}

// mcpTraceChildFlag is --mcp's value for this test binary as an MCP
// server named name with the "trace" tool (mcpChildTraceEnv).
func mcpTraceChildFlag(t *testing.T, name string) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	env, err := exec.LookPath("env")
	if err != nil {
		t.Skipf("no env(1): %v", err)
	}
	return name + "=" + mcp.JoinCommand([]string{env, mcpChildEnv + "=1", mcpChildTraceEnv + "=1", crashChildEnv + "=", exe, "-test.run=^$"})
}

// TestServe_Tracing is the acceptance test of tracing: `conclave serve
// --otlp URL --model openai` runs a council with a team, a debate,
// sub-agents, approvals of every tool call (hitl tools) and an MCP tool
// call, started by POST /api/v1/runs with a traceparent. An in-process
// OTLP/HTTP receiver gets one trace, the request's, whose root is the
// request span's child and whose tree mirrors the run: every node under its
// wave, every model turn a chat span with GenAI attributes (token totals
// equal to the run's token_usage sums), every tool call an execute_tool
// span, every interrupt a span with its decision (a tool approval under its
// call), sub-agents under their delegating calls. The OpenAI server got
// the traceparent of each turn's chat span; the MCP server got, in
// _meta, that of its call's execute_tool span. The trace id is in
// run_started and in the runs API.
func TestServe_Tracing(t *testing.T) {
	t.Parallel()
	sc := messages.Scenario{
		Nodes: 4, Waves: 2, Teams: 1, TeamSize: 2, Tokens: 4, SynthesisTokens: 4,
		Calls: []string{"kid.trace"}, SubagentsPerNode: 1,
		Debate: &messages.DebateScenario{Nodes: 1, Agents: 2, Rounds: 1},
	}
	rcv := newOTLPReceiver(t)
	llm := openaitest.NewServer(t, openaitest.Config{Council: &sc})
	srv := startServe(t, 0, []string{openai.EnvAPIKey + "=sk-tracing-0123456789", "OTEL_BSP_SCHEDULE_DELAY=50", "OTEL_SERVICE_NAME=conclave-acceptance"},
		"--model", "openai", "--model-url", llm.URL, "--model-name", "council-model", "--runs-per-second", "-1",
		"--mcp", mcpTraceChildFlag(t, "kid"), "--otlp", rcv.URL)
	a := newHardenAPI(t, srv, "")

	const parentTrace, parentSpan = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	body, err := json.Marshal(messages.StartRun{Question: "why is the sky blue", HITL: messages.HITLTools, Scenario: &sc})
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, a.base+"/api/v1/runs", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Traceparent", "00-"+parentTrace+"-"+parentSpan+"-01")
	resp, err := a.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusAccepted && resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /api/v1/runs = %d %s", resp.StatusCode, b)
	}
	var rc messages.RunCreated
	if err := json.Unmarshal(b, &rc); err != nil {
		t.Fatal(err)
	}

	// Follow the run, approving every interrupt (plan, nodes, tool calls).
	s := a.mustStream(t, rc.SessionID, 0)
	var events []*messages.Envelope
	for {
		env := s.mustEnv(t)
		events = append(events, env)
		if p, ok := env.Payload.(*messages.InterruptRaisedPayload); ok && env.RunID == rc.RunID {
			if code, _, b := a.call(t, http.MethodPost, "/api/v1/events/resume/"+url.PathEscape(p.InterruptID), `{"decision":"approve"}`); code != http.StatusOK {
				t.Fatalf("approve %s = %d %s", p.Kind, code, b)
			}
		}
		if env.RunID == rc.RunID && env.Type.Terminal() {
			break
		}
	}
	s.close()
	fin, ok := events[len(events)-1].Payload.(*messages.RunFinishedPayload)
	if !ok {
		t.Fatalf("the run ended with %s %+v", events[len(events)-1].Type, events[len(events)-1].Payload)
	}
	started := events[0].Payload.(*messages.RunStartedPayload)
	if started.TraceID != parentTrace || started.TraceParent != "00-"+parentTrace+"-"+parentSpan+"-01" {
		t.Fatalf("run_started trace_id %q trace_parent %q: want the request's", started.TraceID, started.TraceParent)
	}
	if sum, err := a.runSummary(rc.RunID); err != nil || sum.TraceID != parentTrace {
		t.Fatalf("GET /api/v1/runs/%s: trace_id %q (%v), want %s", rc.RunID, sum.TraceID, err, parentTrace)
	}

	tid, _ := hex.DecodeString(parentTrace)
	var spans []*tracepb.Span
	deadline := time.Now().Add(testkit.Watchdog)
	for root := false; !root; {
		if time.Now().After(deadline) {
			t.Fatalf("the run's root span was not exported within %v (%d spans of its trace so far)", testkit.Watchdog, len(spans))
		}
		time.Sleep(20 * time.Millisecond) // polling with a deadline: nothing signals an export
		spans = rcv.spansOf(tid)
		for _, sp := range spans {
			root = root || sp.GetName() == "run"
		}
	}
	rcv.mu.Lock()
	if !rcv.services["conclave-acceptance"] {
		t.Errorf("resource service.name %v, want OTEL_SERVICE_NAME's", rcv.services)
	}
	total := len(rcv.spans)
	rcv.mu.Unlock()
	if total != len(spans) {
		t.Errorf("%d spans exported, %d of them in the run's trace: want one trace", total, len(spans))
	}

	byID := map[string]*tracepb.Span{}
	for _, sp := range spans {
		byID[hex.EncodeToString(sp.GetSpanId())] = sp
	}
	if len(byID) != len(spans) {
		t.Fatalf("%d spans but %d distinct ids", len(spans), len(byID))
	}
	parentName := func(sp *tracepb.Span) string {
		if p := byID[hex.EncodeToString(sp.GetParentSpanId())]; p != nil {
			return p.GetName()
		}
		return ""
	}
	count := map[string]int{}
	var in, out int64
	chatIDs := map[string]bool{}
	toolSpan := map[string]string{} // call id → span id
	for _, sp := range spans {
		pid := hex.EncodeToString(sp.GetParentSpanId())
		if sp.GetName() == "run" {
			count["run"]++
			if pid != parentSpan {
				t.Errorf("the run span's parent is %s, want the request's span %s", pid, parentSpan)
			}
			continue
		}
		if byID[pid] == nil {
			t.Errorf("span %q: its parent %s was not exported", sp.GetName(), pid)
		}
		if sp.GetEndTimeUnixNano() < sp.GetStartTimeUnixNano() {
			t.Errorf("span %q ends before it starts", sp.GetName())
		}
		if spanAttr(sp, "gen_ai.output.messages") != "" || spanAttr(sp, "gen_ai.tool.call.arguments") != "" {
			t.Errorf("span %q holds content without --otel-content", sp.GetName())
		}
		switch op := spanAttr(sp, "gen_ai.operation.name"); {
		case op == "chat":
			count["chat"]++
			chatIDs[hex.EncodeToString(sp.GetSpanId())] = true
			in += spanAttrInt(sp, "gen_ai.usage.input_tokens")
			out += spanAttrInt(sp, "gen_ai.usage.output_tokens")
			if m := spanAttr(sp, "gen_ai.request.model"); m != "council-model" || spanAttr(sp, "gen_ai.response.model") != m ||
				spanAttr(sp, "gen_ai.response.finish_reasons") == "" || sp.GetKind() != tracepb.Span_SPAN_KIND_CLIENT {
				t.Errorf("chat span %q: model %q, finish reasons %q, kind %v", sp.GetName(), m, spanAttr(sp, "gen_ai.response.finish_reasons"), sp.GetKind())
			}
		case op == "execute_tool":
			count["execute_tool"]++
			toolSpan[spanAttr(sp, "gen_ai.tool.call.id")] = hex.EncodeToString(sp.GetSpanId())
			if spanAttr(sp, "gen_ai.tool.name") == "" || spanAttr(sp, "conclave.tool.risk") == "" {
				t.Errorf("execute_tool span %q lacks gen_ai.tool.name or its risk", sp.GetName())
			}
		case op == "invoke_agent" && spanAttr(sp, "conclave.node.id") != "":
			count["node"]++
			if !strings.HasPrefix(parentName(sp), "wave ") {
				t.Errorf("node span %q is under %q, not its wave", sp.GetName(), parentName(sp))
			}
		case op == "invoke_agent":
			count["subagent"]++
			if parentName(sp) != "execute_tool delegate" {
				t.Errorf("sub-agent span %q is under %q, not its delegate call", sp.GetName(), parentName(sp))
			}
		case strings.HasPrefix(sp.GetName(), "interrupt "):
			count["interrupt"]++
			if spanAttr(sp, "conclave.interrupt.decision") != "approve" {
				t.Errorf("interrupt span %q: decision %q", sp.GetName(), spanAttr(sp, "conclave.interrupt.decision"))
			}
			if spanAttr(sp, "conclave.interrupt.kind") == "tool_approval" && !strings.HasPrefix(parentName(sp), "execute_tool ") {
				t.Errorf("a tool approval's span is under %q, not its call", parentName(sp))
			}
		case strings.HasPrefix(sp.GetName(), "wave "):
			count["wave"]++
		case sp.GetName() == "planning":
			count["planning"]++
		}
	}
	var usage messages.Usage
	for _, env := range events {
		if p, ok := env.Payload.(*messages.TokenUsagePayload); ok && env.RunID == rc.RunID {
			usage = usage.Add(p.Usage)
		}
	}
	want := map[string]int{
		"run": 1, "planning": 1, "chat": testkit.Count(events, messages.TokenUsage), "execute_tool": testkit.Count(events, messages.ToolCallStarted),
		"node": testkit.Count(events, messages.NodeStarted), "subagent": testkit.Count(events, messages.SubagentStarted),
		"interrupt": testkit.Count(events, messages.InterruptRaised), "wave": testkit.Count(events, messages.WaveStarted),
	}
	for k, w := range want {
		if count[k] != w || w == 0 {
			t.Errorf("%d %s spans, want %d (the run's events)", count[k], k, w)
		}
	}
	if in != usage.InputTokens || out != usage.OutputTokens || in != fin.Usage.InputTokens {
		t.Errorf("chat spans count %d/%d tokens in/out; token_usage events %d/%d; run_finished %d/%d",
			in, out, usage.InputTokens, usage.OutputTokens, fin.Usage.InputTokens, fin.Usage.OutputTokens)
	}

	// The model's server saw each turn's chat span as its parent.
	seen := map[string]bool{}
	for _, r := range llm.Requests() {
		parts := strings.Split(r.Traceparent, "-")
		if len(parts) != 4 || parts[1] != parentTrace || !chatIDs[parts[2]] {
			t.Errorf("a model request's traceparent %q is no exported chat span's", r.Traceparent)
			continue
		}
		seen[parts[2]] = true
	}
	if len(seen) != len(chatIDs) {
		t.Errorf("the model's server saw %d of the %d chat spans", len(seen), len(chatIDs))
	}
	// The MCP server saw each call's execute_tool span in _meta.
	traced := 0
	for _, env := range events {
		p, ok := env.Payload.(*messages.ToolCallFinishedPayload)
		if !ok || p.Tool != "kid.trace" {
			continue
		}
		traced++
		if want := "traceparent=00-" + parentTrace + "-" + toolSpan[p.CallID] + "-01"; p.Result != want {
			t.Errorf("kid.trace %s answered %q, want %q (its execute_tool span)", p.CallID, p.Result, want)
		}
	}
	if traced == 0 {
		t.Error("no kid.trace call finished")
	}
}

// waitSpan polls the receiver until a span of trace tid satisfies ok.
func (r *otlpReceiver) waitSpan(t *testing.T, tid []byte, what string, ok func(*tracepb.Span) bool) *tracepb.Span {
	t.Helper()
	deadline := time.Now().Add(testkit.Watchdog)
	for {
		for _, sp := range r.spansOf(tid) {
			if ok(sp) {
				return sp
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s span exported within %v", what, testkit.Watchdog)
		}
		time.Sleep(20 * time.Millisecond) // polling with a deadline: nothing signals an export
	}
}

// TestServe_TracingAfterKill: a run working when its server is killed
// (kill -9) goes on after the restart in the same trace, under a "run
// (resumed)" root that links to the run's first root, the parent of the
// spans exported before the kill.
func TestServe_TracingAfterKill(t *testing.T) {
	t.Parallel()
	rcv := newOTLPReceiver(t)
	env := []string{"OTEL_BSP_SCHEDULE_DELAY=50"}
	args := []string{"--data", t.TempDir(), "--runs-per-second", "-1", "--otlp", rcv.URL}
	srv := startServe(t, 0, env, args...)
	a := newHardenAPI(t, srv, "")
	rc := a.mustStartRun(t, `{"question":"q","scenario":{"nodes":3,"waves":1,"tokens":200,"token_delay_ms":5}}`)
	a.waitStreamEvent(t, rc.RunID, func(env *messages.Envelope) bool { return env.Type == messages.TextDelta })
	sum, err := a.runSummary(rc.RunID)
	if err != nil || len(sum.TraceID) != 32 {
		t.Fatalf("the run's summary has trace_id %q (%v): a traced run without a traceparent gets a new trace", sum.TraceID, err)
	}
	tid, _ := hex.DecodeString(sum.TraceID)
	root := spanid.Run(rc.RunID)
	planning := rcv.waitSpan(t, tid, "planning", func(sp *tracepb.Span) bool { return sp.GetName() == "planning" })
	if !bytes.Equal(planning.GetParentSpanId(), root[:]) {
		t.Fatalf("planning's parent %x, want the run's root %s", planning.GetParentSpanId(), root)
	}
	_ = srv.cmd.Process.Kill() // kill -9: the run's root never ends in this process
	srv.reap()

	srv = startServe(t, 0, env, args...)
	a = newHardenAPI(t, srv, "")
	if _, _, err := a.waitRun(rc.RunID, hardenWait, func(s messages.RunSummary) bool { return s.Status.Terminal() }); err != nil {
		t.Fatal(err)
	}
	resumed := rcv.waitSpan(t, tid, "run (resumed)", func(sp *tracepb.Span) bool { return sp.GetName() == "run (resumed)" })
	if len(resumed.GetParentSpanId()) != 0 {
		t.Errorf("the resumed root has a parent %x", resumed.GetParentSpanId())
	}
	links := resumed.GetLinks()
	if len(links) != 1 || !bytes.Equal(links[0].GetTraceId(), tid) || !bytes.Equal(links[0].GetSpanId(), root[:]) {
		t.Fatalf("the resumed root's links %v: want one to the run's first root %s in trace %s", links, root, sum.TraceID)
	}
	// The nodes that were working when the server died end under it.
	node := rcv.waitSpan(t, tid, "resumed node", func(sp *tracepb.Span) bool {
		return strings.HasPrefix(sp.GetName(), "node ") && bytes.Equal(sp.GetParentSpanId(), resumed.GetSpanId())
	})
	if spanAttr(node, "conclave.outcome") != "completed" {
		t.Errorf("resumed node span %q: outcome %q", node.GetName(), spanAttr(node, "conclave.outcome"))
	}
}

// TestRun_Tracing: `conclave run --otlp URL` exports the run's trace
// before it exits, continuing the TRACEPARENT of the calling process.
func TestRun_Tracing(t *testing.T) {
	t.Parallel()
	const parentTrace, parentSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	rcv := newOTLPReceiver(t)
	env := map[string]string{"TRACEPARENT": "00-" + parentTrace + "-" + parentSpan + "-01"}
	r := runCLIWith(t, t.Context(), cliIO{getenv: func(k string) string { return env[k] }},
		"run", "why is the sky blue", "--json", "--nodes", "2", "--otlp", rcv.URL)
	if r.code != exitOK {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	events := decodeJSONL(t, r.stdout)
	if st := events[0].Payload.(*messages.RunStartedPayload); st.TraceID != parentTrace {
		t.Fatalf("run_started trace_id %q, want TRACEPARENT's %s", st.TraceID, parentTrace)
	}
	tid, _ := hex.DecodeString(parentTrace)
	spans := rcv.spansOf(tid) // exported before run exited: nothing to wait for
	nodes := 0
	for _, sp := range spans {
		switch {
		case sp.GetName() == "run" && hex.EncodeToString(sp.GetParentSpanId()) != parentSpan:
			t.Errorf("the run span's parent %x, want TRACEPARENT's span %s", sp.GetParentSpanId(), parentSpan)
		case strings.HasPrefix(sp.GetName(), "node "):
			nodes++
		}
	}
	if nodes != 2 {
		t.Fatalf("%d node spans among the %d exported, want 2", nodes, len(spans))
	}
}

// TestServe_TracingCollectorDown: with its collector unreachable the
// server runs as before; the failed exports are logged as warnings
// through its own log.
func TestServe_TracingCollectorDown(t *testing.T) {
	t.Parallel()
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close() // its port now refuses connections
	srv := startServe(t, 0, []string{"OTEL_BSP_SCHEDULE_DELAY=20", "OTEL_EXPORTER_OTLP_TIMEOUT=300"}, "--runs-per-second", "-1", "--otlp", dead.URL)
	a := newHardenAPI(t, srv, "")
	rc := a.mustStartRun(t, `{"question":"q","scenario":{"nodes":2}}`)
	events := a.runEvents(t, rc.SessionID, rc.RunID)
	if events[len(events)-1].Type != messages.RunFinished {
		t.Fatalf("the run ended with %s", events[len(events)-1].Type)
	}
	deadline := time.Now().Add(testkit.Watchdog)
	for !strings.Contains(srv.log.tail(1<<20), "level=WARN msg=\"telemetry: exporting spans failed\"") {
		if time.Now().After(deadline) {
			t.Fatalf("no warning of the failed export in the log:\n%s", srv.log.tail(8<<10))
		}
		time.Sleep(20 * time.Millisecond) // polling the log with a deadline
	}
}
