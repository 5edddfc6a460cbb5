package telemetry

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/conclave-ai/conclave/internal/telemetry/spanid"
	"github.com/conclave-ai/conclave/messages"
)

// Attribute keys: the OpenTelemetry GenAI semantic conventions where they
// say something (gen_ai.*, error.type), conclave.* for the rest.
const (
	attrOperation     = "gen_ai.operation.name"
	attrAgentName     = "gen_ai.agent.name"
	attrRequestModel  = "gen_ai.request.model"
	attrResponseModel = "gen_ai.response.model"
	attrFinishReasons = "gen_ai.response.finish_reasons"
	attrInputTokens   = "gen_ai.usage.input_tokens"
	attrOutputTokens  = "gen_ai.usage.output_tokens"
	attrCacheRead     = "gen_ai.usage.cache_read.input_tokens"
	attrCacheCreate   = "gen_ai.usage.cache_creation.input_tokens"
	// attrTTFT is the time from the turn's start to its first text or
	// reasoning chunk, in seconds.
	attrTTFT          = "gen_ai.response.time_to_first_chunk"
	attrOutput        = "gen_ai.output.messages"
	attrInput         = "gen_ai.input.messages"
	attrToolName      = "gen_ai.tool.name"
	attrToolCallID    = "gen_ai.tool.call.id"
	attrToolArgs      = "gen_ai.tool.call.arguments"
	attrToolResult    = "gen_ai.tool.call.result"
	attrErrorType     = "error.type"
	attrConversation  = "gen_ai.conversation.id"
	attrRunID         = "conclave.run_id"
	attrTenant        = "conclave.tenant"
	attrRequestID     = "conclave.request_id"
	attrStream        = "conclave.stream_id"
	attrAgentID       = "conclave.agent_id"
	attrRole          = "conclave.role"
	attrTurn          = "conclave.turn"
	attrAttempt       = "conclave.attempt"
	attrNodeID        = "conclave.node.id"
	attrNodeKind      = "conclave.node.kind"
	attrOutcome       = "conclave.outcome"
	attrWave          = "conclave.wave"
	attrTeam          = "conclave.team"
	attrRisk          = "conclave.tool.risk"
	attrAwaits        = "conclave.tool.awaits_approval"
	attrInterruptID   = "conclave.interrupt.id"
	attrInterruptKind = "conclave.interrupt.kind"
	attrDecision      = "conclave.interrupt.decision"
	attrWaitSeconds   = "conclave.interrupt.wait_seconds"
	attrExpired       = "conclave.interrupt.expired"
	attrAsync         = "conclave.subagent.async"
	attrResumed       = "conclave.resumed"
)

// maxContent bounds the text of one content attribute (ProjectorConfig.Content).
const maxContent = 16 << 10

// ProjectorConfig configures a Projector. The zero value (with a Tracer)
// is valid.
type ProjectorConfig struct {
	// Tracer starts the spans. Its provider must use NewIDGenerator for
	// the spans to carry the ids the engine hands to model and tool
	// requests.
	Tracer trace.Tracer
	// Content records prompt and completion text, tool arguments and
	// results on the spans (they may hold private data). Default off.
	Content bool
	// Risk names a tool's risk level ("" when unknown).
	Risk func(tool string) string
}

// Projector builds the spans of runs from their events, as transport/agui
// projects them to AG-UI: every event is applied once, in seq order per
// session. The span tree: run → planning, wave N → node → chat turns,
// execute_tool calls (→ invoke_agent sub-agents, interrupts); a node's
// nested lanes (a team's waves and nodes, a debate's turns and judges, a
// synthesis) under the node. A span starts and ends at its events'
// timestamps.
//
// A Projector is not safe for concurrent use: one goroutine applies (Tracer).
type Projector struct {
	cfg     ProjectorConfig
	runs    map[messages.RunID]*runSpans
	resumed map[messages.RunID]*messages.RunStartedPayload
}

// NewProjector returns a Projector.
func NewProjector(cfg ProjectorConfig) *Projector {
	return &Projector{cfg: cfg, runs: map[messages.RunID]*runSpans{}, resumed: map[messages.RunID]*messages.RunStartedPayload{}}
}

// runSpans is what the projector holds of one live run.
type runSpans struct {
	id      messages.RunID
	traceID trace.TraceID
	root    trace.Span
	lanes   map[messages.StreamID]*laneSpan
	waves   map[waveKey]trace.Span
	tools   map[toolKey]*toolSpan
	// calls are the span contexts of the run's tool calls, ended too: a
	// sub-agent's span is its delegating call's child.
	calls      map[toolKey]trace.SpanContext
	interrupts map[string]*interruptSpan
}

type waveKey struct {
	stream messages.StreamID
	wave   int
}

type toolKey struct {
	stream messages.StreamID
	callID string
}

type toolSpan struct {
	span     trace.Span
	rejected bool // its approval was rejected
}

type interruptSpan struct {
	span   trace.Span
	raised time.Time
	call   toolKey
}

// laneSpan is a lane's span and what its next chat span needs.
type laneSpan struct {
	span    trace.Span
	attempt int // of the lane's agent (agent_restarted)
	// turn and turnAttempt are the lane agent's last reported turn: the
	// turn whose tool calls follow.
	turn, turnAttempt int
	// mark is when the lane's next model turn started: the last event
	// on the lane that was not streamed output.
	mark time.Time
	// first is the current turn's first text or reasoning chunk (zero:
	// none yet).
	first time.Time
	text  strings.Builder // the current turn's text (Content)
	// pending is the last chat span, ended once the next event says why
	// the turn finished (tool calls or not).
	pending    trace.Span
	pendingEnd time.Time
}

// Resumed tells the projector that run, which started before this
// process, goes on working: its next events are spans of a new root,
// "run (resumed)", in the run's trace, linked to its first root.
func (p *Projector) Resumed(run messages.RunID, started *messages.RunStartedPayload) {
	if _, live := p.runs[run]; live || started == nil {
		return // woken from sleep in this process: its spans are still open
	}
	p.resumed[run] = started
}

// Live is how many runs have spans open.
func (p *Projector) Live() int { return len(p.runs) }

// Apply projects one event.
func (p *Projector) Apply(env *messages.Envelope) {
	if env.RunID == "" {
		return
	}
	if st, ok := env.Payload.(*messages.RunStartedPayload); ok {
		p.startRun(env, st)
		return
	}
	r := p.runs[env.RunID]
	if r == nil {
		st := p.resumed[env.RunID]
		if st == nil {
			return // a run this process did not see start, nor resume
		}
		delete(p.resumed, env.RunID)
		if r = p.resumeRun(env, st); r == nil {
			return
		}
	}
	ts := env.Timestamp
	if env.Type.Terminal() {
		p.endRun(r, env)
		return
	}
	var l *laneSpan
	if env.Lane.StreamID != messages.RunStream && env.Lane.StreamID != "" {
		l = p.lane(r, env)
		p.settle(l, env)
	}
	switch pl := env.Payload.(type) {
	case *messages.TextDeltaPayload:
		if l != nil {
			l.firstChunk(ts)
			if p.cfg.Content && l.text.Len() < maxContent {
				l.text.WriteString(pl.Delta)
			}
		}
		return // streamed output: not a turn boundary
	case *messages.ReasoningDeltaPayload:
		if l != nil {
			l.firstChunk(ts)
		}
		return
	case *messages.NodeProgressPayload, *messages.SynthesisProgressPayload:
		return
	case *messages.TokenUsagePayload:
		if l != nil {
			p.chat(r, l, env, pl)
		}
	case *messages.AgentRestartedPayload:
		if l != nil {
			l.attempt = pl.Attempt
			l.first = time.Time{}
			l.text.Reset()
		}
	case *messages.WaveStartedPayload:
		p.startWave(r, env, pl)
	case *messages.WaveCompletedPayload:
		k := waveKey{env.Lane.StreamID, pl.Wave}
		if s := r.waves[k]; s != nil {
			s.SetAttributes(attribute.Int("conclave.wave.completed", pl.Completed), attribute.Int("conclave.wave.failed", pl.Failed),
				attribute.Int("conclave.wave.cancelled", pl.Cancelled), attribute.Int("conclave.wave.skipped", pl.Skipped))
			s.End(trace.WithTimestamp(ts))
			delete(r.waves, k)
		}
	case *messages.ToolCallStartedPayload:
		p.startTool(r, l, env, pl)
	case *messages.ToolCallFinishedPayload:
		p.endTool(r, env, pl)
	case *messages.InterruptRaisedPayload:
		p.raise(r, l, env, pl)
	case *messages.InterruptResolvedPayload:
		p.decide(r, env, pl.InterruptID, pl.Decision, false, len(pl.Signers))
	case *messages.InterruptExpiredPayload:
		p.decide(r, env, pl.InterruptID, pl.Action, true, 0)
	}
	if l != nil {
		l.mark = ts
		if role := env.Type.Role(); role == messages.RoleCloses || role == messages.RolePoint {
			p.closeLane(r, env, l)
		}
	}
}

// startRun opens a run's root span: the child of the request's
// traceparent when it sent one, else the root of a new trace.
func (p *Projector) startRun(env *messages.Envelope, st *messages.RunStartedPayload) {
	tid, ok := spanid.RunTrace(st)
	if !ok {
		return // the engine gave it no trace: not traced
	}
	ctx := parentOf(st, tid)
	ctx = withIDs(ctx, tid, spanid.Run(env.RunID))
	attrs := []attribute.KeyValue{
		attribute.String(attrOperation, "invoke_agent"), attribute.String(attrAgentName, "council"),
		attribute.String(attrRunID, string(env.RunID)), attribute.String(attrConversation, string(env.SessionID)),
		attribute.String(attrTenant, string(st.Tenant)), attribute.String("conclave.hitl", string(st.HITL)),
	}
	if st.RequestID != "" {
		attrs = append(attrs, attribute.String(attrRequestID, st.RequestID))
	}
	if st.RewindOf != nil {
		attrs = append(attrs, attribute.String("conclave.rewind_of", string(st.RewindOf.RunID)))
	}
	if p.cfg.Content {
		attrs = append(attrs, attribute.String(attrInput, userMessage(st.Question)))
	}
	_, root := p.cfg.Tracer.Start(ctx, "run", trace.WithTimestamp(env.Timestamp), trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
	p.runs[env.RunID] = newRunSpans(env.RunID, tid, root)
}

// resumeRun opens the root of a run resumed in this process, at its first
// event since: linked to the run's first root, in the same trace.
func (p *Projector) resumeRun(env *messages.Envelope, st *messages.RunStartedPayload) *runSpans {
	tid, ok := spanid.RunTrace(st)
	if !ok {
		return nil
	}
	ctx := withIDs(parentOf(st, tid), tid, spanid.ResumedRun(env.RunID, env.Seq))
	link := trace.Link{SpanContext: spanid.SpanContext(tid, spanid.Run(env.RunID)), Attributes: []attribute.KeyValue{attribute.String("conclave.link", "resumed_from")}}
	_, root := p.cfg.Tracer.Start(ctx, "run (resumed)", trace.WithTimestamp(env.Timestamp), trace.WithSpanKind(trace.SpanKindServer),
		trace.WithLinks(link), trace.WithAttributes(
			attribute.String(attrOperation, "invoke_agent"), attribute.String(attrAgentName, "council"),
			attribute.String(attrRunID, string(env.RunID)), attribute.String(attrConversation, string(env.SessionID)),
			attribute.String(attrTenant, string(st.Tenant)), attribute.Bool(attrResumed, true)))
	r := newRunSpans(env.RunID, tid, root)
	p.runs[env.RunID] = r
	return r
}

func newRunSpans(id messages.RunID, tid trace.TraceID, root trace.Span) *runSpans {
	return &runSpans{id: id, traceID: tid, root: root, lanes: map[messages.StreamID]*laneSpan{}, waves: map[waveKey]trace.Span{},
		tools: map[toolKey]*toolSpan{}, calls: map[toolKey]trace.SpanContext{}, interrupts: map[string]*interruptSpan{}}
}

// parentOf is the context of a run's root span: the request's span when
// the run continued a traceparent.
func parentOf(st *messages.RunStartedPayload, tid trace.TraceID) context.Context {
	ctx := context.Background()
	if !messages.ValidTraceparent(st.TraceParent) {
		return ctx
	}
	sid, err := trace.SpanIDFromHex(st.TraceParent[36:52])
	flags, ferr := strconv.ParseUint(st.TraceParent[53:55], 16, 8)
	if err != nil || ferr != nil {
		return ctx
	}
	return trace.ContextWithRemoteSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: tid, SpanID: sid, TraceFlags: trace.TraceFlags(flags), Remote: true}))
}

// endRun ends every span the run still has open, then its root.
func (p *Projector) endRun(r *runSpans, env *messages.Envelope) {
	end := trace.WithTimestamp(env.Timestamp)
	for _, l := range r.lanes {
		p.finishPending(l, "stop")
	}
	for _, it := range r.interrupts {
		it.span.End(end)
	}
	for _, t := range r.tools {
		t.span.End(end)
	}
	for _, l := range r.lanes {
		l.span.End(end)
	}
	for _, w := range r.waves {
		w.End(end)
	}
	var usage messages.Usage
	switch pl := env.Payload.(type) {
	case *messages.RunFinishedPayload:
		usage = pl.Usage
		r.root.SetAttributes(attribute.String(attrOutcome, "finished"))
		if p.cfg.Content {
			r.root.SetAttributes(attribute.String(attrOutput, assistantMessage(pl.Answer)))
		}
	case *messages.RunErrorPayload:
		usage = pl.Usage
		r.root.SetAttributes(attribute.String(attrOutcome, "error"), attribute.String(attrErrorType, string(pl.Code)))
		r.root.SetStatus(codes.Error, pl.Message)
	}
	r.root.SetAttributes(attribute.Int64("conclave.usage.input_tokens", usage.InputTokens),
		attribute.Int64("conclave.usage.output_tokens", usage.OutputTokens))
	r.root.End(end)
	delete(p.runs, r.id)
}

// lane returns the span of env's lane, opening it at its first event:
// normally the lane's opening event; after a restart, whatever comes first.
func (p *Projector) lane(r *runSpans, env *messages.Envelope) *laneSpan {
	if l := r.lanes[env.Lane.StreamID]; l != nil {
		return l
	}
	name, parent := "lane "+string(env.Lane.StreamID), r.laneParent(env.Lane.ParentStreamID)
	attrs := []attribute.KeyValue{attribute.String(attrStream, string(env.Lane.StreamID)), attribute.String(attrAgentID, env.AgentID)}
	kind := trace.SpanKindInternal
	switch pl := env.Payload.(type) {
	case *messages.PlanningStartedPayload:
		name = "planning"
	case *messages.NodeStartedPayload:
		name = "node " + pl.NodeID
		if w := r.waves[waveKey{parentStream(env.Lane), pl.Wave}]; w != nil {
			parent = w.SpanContext()
		}
		nodeKind := pl.Kind
		if nodeKind == "" {
			nodeKind = messages.NodeKind("leaf")
		}
		attrs = append(attrs, attribute.String(attrOperation, "invoke_agent"), attribute.String(attrAgentName, pl.NodeID),
			attribute.String(attrNodeID, pl.NodeID), attribute.String(attrNodeKind, string(nodeKind)), attribute.Int(attrWave, pl.Wave))
		if pl.Role != "" {
			attrs = append(attrs, attribute.String(attrRole, pl.Role))
		}
	case *messages.NodeSkippedPayload:
		name = "node " + pl.NodeID
		attrs = append(attrs, attribute.String(attrNodeID, pl.NodeID), attribute.String(attrOutcome, "skipped"))
	case *messages.SubagentStartedPayload:
		name = "invoke_agent " + pl.SubagentID
		if sc, ok := r.calls[toolKey{parentStream(env.Lane), pl.CallID}]; ok {
			parent = sc
		}
		attrs = append(attrs, attribute.String(attrOperation, "invoke_agent"), attribute.String(attrAgentName, pl.SubagentID),
			attribute.Bool(attrAsync, pl.Async), attribute.String(attrToolCallID, pl.CallID))
	case *messages.SynthesisStartedPayload:
		name = "synthesis"
	case *messages.DebateTurnStartedPayload:
		name = "debate_turn " + env.AgentID
	case *messages.DebateJudgeStartedPayload:
		name = "judge"
	case *messages.SteeringReceivedPayload:
		name = "steering"
	default: // opened by a later event: its start was before a restart
		attrs = append(attrs, attribute.Bool(attrResumed, true))
		if id, ok := strings.CutPrefix(string(env.Lane.StreamID), "node:"); ok && !strings.Contains(id, "/sub:") {
			name = "node " + id
			attrs = append(attrs, attribute.String(attrOperation, "invoke_agent"), attribute.String(attrAgentName, id), attribute.String(attrNodeID, id))
		}
	}
	ctx := withIDs(trace.ContextWithSpanContext(context.Background(), parent), r.traceID, spanid.Lane(r.id, env.Lane.StreamID))
	_, s := p.cfg.Tracer.Start(ctx, name, trace.WithTimestamp(env.Timestamp), trace.WithSpanKind(kind), trace.WithAttributes(attrs...))
	l := &laneSpan{span: s, attempt: 1, mark: env.Timestamp}
	r.lanes[env.Lane.StreamID] = l
	return l
}

// parentStream is the stream of the lane l is nested in (the run's for a
// top-level lane).
func parentStream(l messages.Lane) messages.StreamID {
	if l.ParentStreamID == "" {
		return messages.RunStream
	}
	return l.ParentStreamID
}

// laneParent is the span context of the lane named stream: the run's root
// for the run lane or a lane the projector has not seen.
func (r *runSpans) laneParent(stream messages.StreamID) trace.SpanContext {
	if l := r.lanes[stream]; l != nil {
		return l.span.SpanContext()
	}
	return r.root.SpanContext()
}

// closeLane ends l's span with its closing event.
func (p *Projector) closeLane(r *runSpans, env *messages.Envelope, l *laneSpan) {
	p.finishPending(l, "stop")
	switch pl := env.Payload.(type) {
	case *messages.NodeCompletedPayload:
		l.span.SetAttributes(attribute.String(attrOutcome, "completed"), attribute.Int(attrAttempt, pl.Attempts),
			attribute.Int64(attrInputTokens, pl.Usage.InputTokens), attribute.Int64(attrOutputTokens, pl.Usage.OutputTokens))
	case *messages.NodeFailedPayload:
		code := string(pl.Code)
		if code == "" {
			code = "node_failed"
		}
		l.span.SetAttributes(attribute.String(attrOutcome, "failed"), attribute.String(attrErrorType, code))
		l.span.SetStatus(codes.Error, pl.Error)
	case *messages.NodeCancelledPayload:
		l.span.SetAttributes(attribute.String(attrOutcome, "cancelled"))
	case *messages.SubagentFinishedPayload:
		l.span.SetAttributes(attribute.String(attrOutcome, string(pl.Outcome)))
		if pl.Outcome == messages.OutcomeFailed {
			l.span.SetAttributes(attribute.String(attrErrorType, "subagent_failed"))
			l.span.SetStatus(codes.Error, pl.Error)
		}
	case *messages.PlanningFailedPayload:
		l.span.SetAttributes(attribute.String(attrErrorType, orString(string(pl.Code), "planning_failed")))
		l.span.SetStatus(codes.Error, pl.Error)
	case *messages.SynthesisFailedPayload:
		l.span.SetAttributes(attribute.String(attrErrorType, orString(string(pl.Code), "synthesis_failed")))
		l.span.SetStatus(codes.Error, pl.Error)
	}
	l.span.End(trace.WithTimestamp(env.Timestamp))
	delete(r.lanes, env.Lane.StreamID)
}

func orString(s, or string) string {
	if s == "" {
		return or
	}
	return s
}

// firstChunk notes the time of the turn's first streamed chunk.
func (l *laneSpan) firstChunk(ts time.Time) {
	if l.first.IsZero() {
		l.first = ts
	}
}

// settle ends the lane's pending chat span now that the next event of the
// lane says why its turn finished: it called tools, or it did not.
func (p *Projector) settle(l *laneSpan, env *messages.Envelope) {
	if l.pending == nil {
		return
	}
	if _, ok := env.Payload.(*messages.ToolCallStartedPayload); ok {
		p.finishPending(l, "tool_calls")
		return
	}
	p.finishPending(l, "stop")
}

func (p *Projector) finishPending(l *laneSpan, reason string) {
	if l.pending == nil {
		return
	}
	l.pending.SetAttributes(attribute.StringSlice(attrFinishReasons, []string{reason}))
	l.pending.End(trace.WithTimestamp(l.pendingEnd))
	l.pending = nil
}

// chat makes the span of the model turn whose token_usage env is: from the
// lane's mark (the end of what the turn waited for) to its usage report.
func (p *Projector) chat(r *runSpans, l *laneSpan, env *messages.Envelope, u *messages.TokenUsagePayload) {
	attempt := u.Attempt
	if attempt == 0 {
		attempt = l.attempt
	}
	start := l.mark
	if start.IsZero() || start.After(env.Timestamp) {
		start = env.Timestamp
	}
	attrs := []attribute.KeyValue{
		attribute.String(attrOperation, "chat"), attribute.String(attrRequestModel, u.Model), attribute.String(attrResponseModel, u.Model),
		attribute.Int64(attrInputTokens, u.InputTokens), attribute.Int64(attrOutputTokens, u.OutputTokens),
		attribute.Int(attrTurn, u.Turn), attribute.Int(attrAttempt, attempt), attribute.String(attrAgentID, env.AgentID),
		attribute.String(attrStream, string(env.Lane.StreamID)),
	}
	if u.CacheReadTokens > 0 {
		attrs = append(attrs, attribute.Int64(attrCacheRead, u.CacheReadTokens))
	}
	if u.CacheCreateTokens > 0 {
		attrs = append(attrs, attribute.Int64(attrCacheCreate, u.CacheCreateTokens))
	}
	if u.Role != "" {
		attrs = append(attrs, attribute.String(attrRole, u.Role))
	} else if !l.first.IsZero() && !l.first.Before(start) {
		attrs = append(attrs, attribute.Float64(attrTTFT, l.first.Sub(start).Seconds()))
	}
	if p.cfg.Content && u.Role == "" && l.text.Len() > 0 {
		attrs = append(attrs, attribute.String(attrOutput, assistantMessage(l.text.String())))
	}
	name := "chat"
	if u.Model != "" {
		name += " " + u.Model
	}
	ctx := withIDs(trace.ContextWithSpanContext(context.Background(), l.span.SpanContext()), r.traceID,
		spanid.Turn(r.id, env.Lane.StreamID, u.Role, attempt, u.Turn))
	_, s := p.cfg.Tracer.Start(ctx, name, trace.WithTimestamp(start), trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	if u.Role != "" { // a check made on the lane's behalf: it calls no tools
		s.SetAttributes(attribute.StringSlice(attrFinishReasons, []string{"stop"}))
		s.End(trace.WithTimestamp(env.Timestamp))
		return
	}
	l.pending, l.pendingEnd = s, env.Timestamp
	l.turn, l.turnAttempt = u.Turn, attempt
	l.first = time.Time{}
	l.text.Reset()
}

// startWave opens wave n on its lane (the run's, or a team node's).
func (p *Projector) startWave(r *runSpans, env *messages.Envelope, w *messages.WaveStartedPayload) {
	stream := env.Lane.StreamID
	if stream == "" {
		stream = messages.RunStream
	}
	attrs := []attribute.KeyValue{attribute.Int(attrWave, w.Wave), attribute.Int("conclave.wave.nodes", len(w.NodeIDs))}
	if w.Team != "" {
		attrs = append(attrs, attribute.String(attrTeam, w.Team))
	}
	ctx := withIDs(trace.ContextWithSpanContext(context.Background(), r.laneParent(stream)), r.traceID, spanid.Wave(r.id, stream, w.Wave))
	_, s := p.cfg.Tracer.Start(ctx, "wave "+strconv.Itoa(w.Wave), trace.WithTimestamp(env.Timestamp), trace.WithAttributes(attrs...))
	r.waves[waveKey{stream, w.Wave}] = s
}

// startTool opens a tool call's execute_tool span, under its agent's lane
// (beside the turn that asked for it, as the GenAI conventions nest them).
func (p *Projector) startTool(r *runSpans, l *laneSpan, env *messages.Envelope, c *messages.ToolCallStartedPayload) {
	turn, attempt := 0, 1
	if l != nil {
		turn, attempt = l.turn, l.turnAttempt
	}
	attrs := []attribute.KeyValue{
		attribute.String(attrOperation, "execute_tool"), attribute.String(attrToolName, c.Tool), attribute.String(attrToolCallID, c.CallID),
		attribute.String(attrAgentID, env.AgentID), attribute.Bool(attrAwaits, c.AwaitsApproval),
	}
	if p.cfg.Risk != nil {
		if risk := p.cfg.Risk(c.Tool); risk != "" {
			attrs = append(attrs, attribute.String(attrRisk, risk))
		}
	}
	if p.cfg.Content {
		attrs = append(attrs, attribute.String(attrToolArgs, clip(string(c.Args))))
	}
	k := toolKey{env.Lane.StreamID, c.CallID}
	ctx := withIDs(trace.ContextWithSpanContext(context.Background(), r.laneParent(env.Lane.StreamID)), r.traceID,
		spanid.Tool(r.id, env.Lane.StreamID, attempt, turn, c.CallID))
	_, s := p.cfg.Tracer.Start(ctx, "execute_tool "+c.Tool, trace.WithTimestamp(env.Timestamp), trace.WithAttributes(attrs...))
	if old := r.tools[k]; old != nil { // the same id again (a restarted agent's call): the old one is over
		old.span.End(trace.WithTimestamp(env.Timestamp))
	}
	r.tools[k] = &toolSpan{span: s}
	r.calls[k] = s.SpanContext()
}

func (p *Projector) endTool(r *runSpans, env *messages.Envelope, c *messages.ToolCallFinishedPayload) {
	k := toolKey{env.Lane.StreamID, c.CallID}
	t := r.tools[k]
	if t == nil {
		return
	}
	if c.IsError {
		typ := "tool_error"
		if t.rejected {
			typ = "rejected"
		}
		t.span.SetAttributes(attribute.String(attrErrorType, typ))
		t.span.SetStatus(codes.Error, clip(c.Result))
	}
	if p.cfg.Content {
		t.span.SetAttributes(attribute.String(attrToolResult, clip(c.Result)))
	}
	t.span.End(trace.WithTimestamp(env.Timestamp))
	delete(r.tools, k)
}

// raise opens an interrupt's span: under its tool call for a tool
// approval, else under the lane that raised it.
func (p *Projector) raise(r *runSpans, l *laneSpan, env *messages.Envelope, it *messages.InterruptRaisedPayload) {
	parent := r.root.SpanContext()
	if l != nil {
		parent = l.span.SpanContext()
	}
	k := toolKey{env.Lane.StreamID, it.CallID}
	if t := r.tools[k]; it.CallID != "" && t != nil {
		parent = t.span.SpanContext()
	}
	attrs := []attribute.KeyValue{attribute.String(attrInterruptID, it.InterruptID), attribute.String(attrInterruptKind, string(it.Kind)),
		attribute.Int("conclave.interrupt.timeout_seconds", it.TimeoutSeconds)}
	if it.NodeID != "" {
		attrs = append(attrs, attribute.String(attrNodeID, it.NodeID))
	}
	if it.ToolName != "" {
		attrs = append(attrs, attribute.String(attrToolName, it.ToolName), attribute.String(attrToolCallID, it.CallID))
	}
	if it.Evidence != nil && it.Evidence.RiskLevel != "" {
		attrs = append(attrs, attribute.String(attrRisk, string(it.Evidence.RiskLevel)))
	}
	ctx := withIDs(trace.ContextWithSpanContext(context.Background(), parent), r.traceID, spanid.Interrupt(r.id, it.InterruptID))
	_, s := p.cfg.Tracer.Start(ctx, "interrupt "+string(it.Kind), trace.WithTimestamp(env.Timestamp), trace.WithAttributes(attrs...))
	r.interrupts[it.InterruptID] = &interruptSpan{span: s, raised: env.Timestamp, call: k}
}

// decide ends an interrupt's span with its decision and how long it waited.
func (p *Projector) decide(r *runSpans, env *messages.Envelope, id string, d messages.Decision, expired bool, signers int) {
	it := r.interrupts[id]
	if it == nil {
		return
	}
	it.span.SetAttributes(attribute.String(attrDecision, string(d)), attribute.Bool(attrExpired, expired),
		attribute.Float64(attrWaitSeconds, env.Timestamp.Sub(it.raised).Seconds()))
	if signers > 0 {
		it.span.SetAttributes(attribute.Int("conclave.interrupt.signers", signers))
	}
	if d == messages.DecisionReject {
		if t := r.tools[it.call]; t != nil {
			t.rejected = true
		}
	}
	it.span.End(trace.WithTimestamp(env.Timestamp))
	delete(r.interrupts, id)
}

// clip bounds a content attribute at maxContent bytes (at a rune start).
func clip(s string) string {
	if len(s) <= maxContent {
		return s
	}
	i := maxContent
	for i > 0 && !utf8RuneStart(s[i]) {
		i--
	}
	return s[:i]
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }

// assistantMessage and userMessage are GenAI message lists of one text part.
func assistantMessage(text string) string { return messageJSON("assistant", clip(text)) }
func userMessage(text string) string      { return messageJSON("user", clip(text)) }

func messageJSON(role, text string) string {
	type part struct {
		Type    string `json:"type"`
		Content string `json:"content"`
	}
	type message struct {
		Role  string `json:"role"`
		Parts []part `json:"parts"`
	}
	b, _ := json.Marshal([]message{{Role: role, Parts: []part{{Type: "text", Content: text}}}})
	return string(b)
}
