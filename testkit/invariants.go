package testkit

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/conclave-ai/conclave/messages"
)

// Rule names reported in Violation.Rule. They are stable: tests match on
// them and docs/events.md lists every one next to the guarantee it checks.
const (
	// RuleSeqGapless: seqs are 1, 2, 3, … (CheckPartial: contiguous from the first one).
	RuleSeqGapless = "seq-gapless"
	// RuleSingleSession: every event carries the session_id of the first one.
	RuleSingleSession = "single-session"
	// RuleRunStartedFirst: run_started is the first event of its run, exactly once.
	RuleRunStartedFirst = "run-started-first"
	// RuleTerminalOnceLast: exactly one terminal event per run (CheckPartial: at
	// most one), and nothing of that run after it.
	RuleTerminalOnceLast = "terminal-once-last"
	// RuleStreamLifecycle: per (run_id, stream_id), events follow their
	// messages.StreamRole: opens first and once, within while open, closes
	// once, nothing after close, a point event is its whole stream.
	RuleStreamLifecycle = "stream-lifecycle"
	// RuleStreamsClosed: every stream of a run is closed before the run's terminal event.
	RuleStreamsClosed = "streams-closed-before-terminal"
	// RuleNestedLanes: a lane opens while its parent lane is open and closes
	// before it; every lane but "run" has a parent.
	RuleNestedLanes = "nested-lanes"
	// RuleLaneDepth: the run lane has depth 0, every other lane its parent's
	// depth + 1; sub-agent lanes have depth >= 2.
	RuleLaneDepth = "lane-depth"
	// RuleLaneShape: events that belong to a fixed lane are on it (run,
	// director, synthesis, node:<id> under run, <parent>/sub:<k> for
	// sub-agents), and every event of a stream carries the same depth and
	// parent as the event that opened it.
	RuleLaneShape = "lane-shape"
	// RulePlanGate: plan_approved or plan_rejected follows plan_proposed, at
	// most once; wave_started and node_started only after plan_approved.
	RulePlanGate = "plan-gate"
	// RuleDAGOrder: node_started of X follows node_completed of every
	// dependency of X; nodes outside the plan never start or are skipped.
	RuleDAGOrder = "dag-order"
	// RuleWaveOrder: waves start at most once in increasing order, nodes start
	// inside their wave, a wave completes after all its nodes ended, and a
	// started wave completes before the terminal event.
	RuleWaveOrder = "wave-order"
	// RulePayloadConsistency: the envelope type matches its payload, ids in
	// payloads match the lane, and plan, wave and count fields agree.
	RulePayloadConsistency = "payload-consistency"
)

// Rules lists every rule name in documentation order.
func Rules() []string {
	return []string{
		RuleSeqGapless, RuleSingleSession, RuleRunStartedFirst, RuleTerminalOnceLast,
		RuleStreamLifecycle, RuleStreamsClosed, RuleNestedLanes, RuleLaneDepth, RuleLaneShape,
		RulePlanGate, RuleDAGOrder, RuleWaveOrder, RulePayloadConsistency,
	}
}

// Violation is one broken guarantee, pointing at the offending event.
type Violation struct {
	// Seq is the seq of the offending event (for a run that never ended, its last event).
	Seq    uint64
	RunID  messages.RunID
	Rule   string
	Detail string
}

func (v Violation) String() string {
	if v.RunID == "" {
		return fmt.Sprintf("seq %d: %s: %s", v.Seq, v.Rule, v.Detail)
	}
	return fmt.Sprintf("seq %d run %s: %s: %s", v.Seq, v.RunID, v.Rule, v.Detail)
}

// Check verifies every ordering guarantee of docs/events.md over the events
// of ONE session, in seq order as received. Every run that started must
// have ended. It returns nil when the stream is valid.
func Check(events []*messages.Envelope) []Violation {
	return check(events, false)
}

// CheckPartial is Check for a window of a session's stream, for example a
// subscription resumed after a cursor or cut before the end: seqs must be
// contiguous but may start above 1, and runs may still be open. When the
// window starts above seq 1, a run whose first visible event is not
// run_started is taken to have begun before the window: its streams are
// assumed open when first seen and the checks that need its plan are skipped
// until its plan_proposed is seen.
func CheckPartial(events []*messages.Envelope) []Violation {
	return check(events, true)
}

// maxListed bounds the violations AssertInvariants prints.
const maxListed = 20

// AssertInvariants fails t (without stopping it) when Check reports
// violations, listing up to 20 of them.
func AssertInvariants(t testing.TB, events []*messages.Envelope) {
	t.Helper()
	vs := Check(events)
	if len(vs) == 0 {
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "testkit: %d invariant violation(s) in %d events:", len(vs), len(events))
	for i, v := range vs {
		if i == maxListed {
			fmt.Fprintf(&b, "\n\t… and %d more", len(vs)-i)
			break
		}
		b.WriteString("\n\t")
		b.WriteString(v.String())
	}
	t.Errorf("%s", b.String())
}

func check(events []*messages.Envelope, partial bool) []Violation {
	c := &checker{partial: partial, runs: make(map[messages.RunID]*runState)}
	for _, env := range events {
		c.event(env)
	}
	if !partial {
		for _, r := range c.order {
			if !r.ended {
				c.report(r.lastSeq, r.id, RuleTerminalOnceLast, "run never ended: no run_finished or run_error")
			}
		}
	}
	return c.out
}

// checker is a single pass over one session's events. All state is per run,
// and inside a run per stream and per plan node, so each event costs O(1)
// apart from the closing events that visit their own children, waves or
// streams once.
type checker struct {
	partial bool
	out     []Violation

	seen    bool // an event was seen; session and lastSeq are set
	session messages.SessionID
	lastSeq uint64
	// joinedLate: the window starts above seq 1, so a run may have begun before it.
	joinedLate bool

	runs  map[messages.RunID]*runState
	order []*runState // runs by first appearance, for deterministic reports
}

type runState struct {
	id messages.RunID
	// truncated: the run began before the window (or, in Check, its first
	// event was not run_started, which was reported once); its streams are
	// assumed open when first seen.
	truncated bool
	lastSeq   uint64
	ended     bool
	endSeq    uint64

	streams     map[messages.StreamID]*streamState
	streamOrder []*streamState

	proposed bool // plan_proposed seen; nodes and waves are set
	nodes    map[string]*nodeState
	waves    []*waveState
	lastWave int // highest wave started, -1 before the first
	approved bool
	rejected bool
}

type streamState struct {
	lane messages.Lane
	// laneKnown is false for a parent assumed open in a truncated run before
	// any event of its own was seen.
	laneKnown bool
	openSeq   uint64 // 0 when the stream was opened before the window
	closed    bool
	closeSeq  uint64
	children  []*streamState
	// subagentID is the subagent_id of the subagent_started that opened a sub-agent lane.
	subagentID string
}

type nodePhase uint8

const (
	phasePending nodePhase = iota
	phaseRunning
	phaseCompleted
	phaseFailed
	phaseCancelled
	phaseSkipped
)

func (p nodePhase) String() string {
	return [...]string{"pending", "running", "completed", "failed", "cancelled", "skipped"}[p]
}

func (p nodePhase) ended() bool { return p >= phaseCompleted }

type nodeState struct {
	id    string
	deps  []string
	wave  int // index in the plan's waves, -1 if in none
	phase nodePhase
}

type waveState struct {
	nodes     []string
	started   bool
	completed bool
	startSeq  uint64
}

func (c *checker) report(seq uint64, run messages.RunID, rule, format string, args ...any) {
	c.out = append(c.out, Violation{Seq: seq, RunID: run, Rule: rule, Detail: fmt.Sprintf(format, args...)})
}

func (c *checker) event(env *messages.Envelope) {
	if env == nil {
		c.report(c.lastSeq, "", RulePayloadConsistency, "nil envelope after seq %d", c.lastSeq)
		return
	}
	c.sequence(env)
	switch {
	case env.Payload == nil:
		c.report(env.Seq, env.RunID, RulePayloadConsistency, "%s event without payload", env.Type)
		return
	case !env.Type.Known():
		c.report(env.Seq, env.RunID, RulePayloadConsistency, "unknown event type %q", env.Type)
		return
	case env.Payload.EventType() != env.Type:
		c.report(env.Seq, env.RunID, RulePayloadConsistency, "envelope type %s carries a %s payload", env.Type, env.Payload.EventType())
		return
	case env.Type.Role() == messages.RoleSession:
		// About the subscriber's view of the session (replay_truncated),
		// not about a run: only the seq rules apply.
		if env.RunID != "" || env.Lane.StreamID != messages.SessionStream {
			c.report(env.Seq, env.RunID, RulePayloadConsistency, "%s must have no run and lane %q", env.Type, messages.SessionStream)
		}
		return
	}
	r := c.run(env)
	if r == nil {
		return
	}
	r.lastSeq = env.Seq
	if r.ended {
		c.report(env.Seq, r.id, RuleTerminalOnceLast, "%s after the run's terminal event at seq %d", env.Type, r.endSeq)
		return
	}
	lane := c.laneShape(r, env)
	if !c.stream(r, env, lane) {
		return // reported; the event's effects would only cascade
	}
	c.payload(r, env)
}

func (c *checker) sequence(env *messages.Envelope) {
	if !c.seen {
		c.seen = true
		c.session = env.SessionID
		switch {
		case env.Seq == 0:
			c.report(env.Seq, env.RunID, RuleSeqGapless, "seq 0; seqs start at 1")
		case !c.partial && env.Seq != 1:
			c.report(env.Seq, env.RunID, RuleSeqGapless, "first seq is %d, want 1", env.Seq)
		}
		c.joinedLate = c.partial && env.Seq > 1
	} else {
		if env.Seq != c.lastSeq+1 {
			c.report(env.Seq, env.RunID, RuleSeqGapless, "seq %d follows seq %d, want %d", env.Seq, c.lastSeq, c.lastSeq+1)
		}
		if env.SessionID != c.session {
			c.report(env.Seq, env.RunID, RuleSingleSession, "session_id %q, but the stream is session %q", env.SessionID, c.session)
		}
	}
	c.lastSeq = env.Seq
}

// run returns the state of env's run, creating it on its first event. It
// returns nil when the event must be ignored (a repeated run_started).
func (c *checker) run(env *messages.Envelope) *runState {
	r := c.runs[env.RunID]
	if r != nil {
		if env.Type == messages.RunStarted {
			c.report(env.Seq, r.id, RuleRunStartedFirst, "run_started again; the run's first event was earlier")
			return nil
		}
		return r
	}
	r = &runState{id: env.RunID, streams: make(map[messages.StreamID]*streamState), lastWave: -1}
	c.runs[env.RunID] = r
	c.order = append(c.order, r)
	if env.Type != messages.RunStarted {
		if !c.joinedLate {
			c.report(env.Seq, r.id, RuleRunStartedFirst, "first event of the run is %s, not run_started", env.Type)
		}
		// Either way, check the rest of the run as if it began before
		// these events, so one missing run_started is one violation.
		r.truncated = true
		c.addStream(r, &streamState{lane: messages.RunLane(), laneKnown: true})
	}
	return r
}

func (c *checker) addStream(r *runState, st *streamState) {
	r.streams[st.lane.StreamID] = st
	r.streamOrder = append(r.streamOrder, st)
}

// laneShape checks the lane of events whose lane is fixed by their type and
// returns the lane to track the event under: the expected one for the run,
// director and synthesis lanes (so a misplaced event is reported once), the
// event's own lane otherwise.
func (c *checker) laneShape(r *runState, env *messages.Envelope) messages.Lane {
	runLane := messages.RunLane()
	var want messages.Lane
	switch p := env.Payload.(type) {
	case *messages.RunStartedPayload, *messages.RunFinishedPayload, *messages.RunErrorPayload,
		*messages.PlanApprovedPayload, *messages.PlanRejectedPayload,
		*messages.WaveStartedPayload, *messages.WaveCompletedPayload:
		want = runLane
	case *messages.PlanningStartedPayload, *messages.PlanProposedPayload, *messages.PlanningFailedPayload:
		want = runLane.Child(messages.DirectorStream)
	case *messages.SynthesisStartedPayload, *messages.SynthesisCompletedPayload, *messages.SynthesisFailedPayload:
		want = runLane.Child(messages.SynthesisStream)
	case *messages.NodeStartedPayload:
		c.nodeLane(r, env, p.NodeID)
	case *messages.NodeCompletedPayload:
		c.nodeLane(r, env, p.NodeID)
	case *messages.NodeFailedPayload:
		c.nodeLane(r, env, p.NodeID)
	case *messages.NodeCancelledPayload:
		c.nodeLane(r, env, p.NodeID)
	case *messages.NodeSkippedPayload:
		c.nodeLane(r, env, p.NodeID)
	case *messages.SubagentStartedPayload:
		c.subagentLane(r, env, p.SubagentID)
	case *messages.SubagentFinishedPayload:
		c.subagentLane(r, env, p.SubagentID)
	default:
		return env.Lane
	}
	if want.StreamID != "" && env.Lane != want {
		c.report(env.Seq, r.id, RuleLaneShape, "%s on lane %s, want %s", env.Type, fmtLane(env.Lane), fmtLane(want))
		return want
	}
	return env.Lane
}

func (c *checker) nodeLane(r *runState, env *messages.Envelope, nodeID string) {
	if want := messages.NodeStream(nodeID); env.Lane.StreamID != want {
		c.report(env.Seq, r.id, RulePayloadConsistency, "%s for node %q on lane %q, want %q", env.Type, nodeID, env.Lane.StreamID, want)
	}
	if env.Lane.ParentStreamID != messages.RunStream {
		c.report(env.Seq, r.id, RuleLaneShape, "%s on lane %s; node lanes are nested directly under %q", env.Type, fmtLane(env.Lane), messages.RunStream)
	}
}

func (c *checker) subagentLane(r *runState, env *messages.Envelope, subagentID string) {
	k, ok := strings.CutPrefix(string(env.Lane.StreamID), string(env.Lane.ParentStreamID)+"/sub:")
	if env.Lane.ParentStreamID == "" || !ok || k == "" || strings.Contains(k, "/") {
		c.report(env.Seq, r.id, RuleLaneShape, "%s on lane %s; sub-agent lanes are <parent_stream_id>/sub:<k>", env.Type, fmtLane(env.Lane))
	}
	if env.Lane.Depth < 2 {
		c.report(env.Seq, r.id, RuleLaneDepth, "%s on lane %s; sub-agent lanes have depth >= 2", env.Type, fmtLane(env.Lane))
	}
	if subagentID == "" {
		c.report(env.Seq, r.id, RulePayloadConsistency, "%s without subagent_id", env.Type)
	}
	if env.Type == messages.SubagentFinished {
		if st := r.streams[env.Lane.StreamID]; st != nil && st.subagentID != "" && st.subagentID != subagentID {
			c.report(env.Seq, r.id, RulePayloadConsistency, "subagent_finished of %q on the lane of sub-agent %q", subagentID, st.subagentID)
		}
	}
}

// stream applies the event's messages.StreamRole to its stream. It reports
// false when the event broke the stream's lifecycle.
func (c *checker) stream(r *runState, env *messages.Envelope, lane messages.Lane) bool {
	st := r.streams[lane.StreamID]
	switch role := env.Type.Role(); role {
	case messages.RoleOpens, messages.RolePoint:
		if st != nil {
			if st.closed {
				c.report(env.Seq, r.id, RuleStreamLifecycle, "%s on stream %q, which %s", env.Type, lane.StreamID, closedAt(st))
			} else {
				c.report(env.Seq, r.id, RuleStreamLifecycle, "%s on stream %q, which is already open%s", env.Type, lane.StreamID, openedAt(st))
			}
			return false
		}
		st = &streamState{lane: lane, laneKnown: true, openSeq: env.Seq}
		c.attach(r, env, st)
		c.addStream(r, st)
		if role == messages.RolePoint {
			st.closed, st.closeSeq = true, env.Seq
		}
		return true
	case messages.RoleWithin, messages.RoleCloses:
		switch {
		case st == nil && r.truncated:
			st = &streamState{lane: lane, laneKnown: true}
			if p := r.streams[lane.ParentStreamID]; p != nil && lane.ParentStreamID != "" {
				p.children = append(p.children, st)
			}
			c.addStream(r, st)
		case st == nil:
			c.report(env.Seq, r.id, RuleStreamLifecycle, "%s before stream %q was opened", env.Type, lane.StreamID)
			return false
		case st.closed:
			c.report(env.Seq, r.id, RuleStreamLifecycle, "%s on stream %q, which %s", env.Type, lane.StreamID, closedAt(st))
			return false
		case !st.laneKnown:
			st.lane, st.laneKnown = lane, true
		case lane != st.lane:
			c.report(env.Seq, r.id, RuleLaneShape, "%s on lane %s, but the stream opened as %s", env.Type, fmtLane(lane), fmtLane(st.lane))
		}
		if role == messages.RoleCloses {
			// The run lane's children are checked by terminal, under their own rule.
			if lane.StreamID != messages.RunStream {
				for _, ch := range st.children {
					if !ch.closed {
						c.report(env.Seq, r.id, RuleNestedLanes, "%s closes stream %q while its child %q%s is still open",
							env.Type, lane.StreamID, ch.lane.StreamID, openedAt(ch))
					}
				}
			}
			st.closed, st.closeSeq = true, env.Seq
		}
		return true
	default:
		c.report(env.Seq, r.id, RulePayloadConsistency, "%s has no stream role", env.Type)
		return false
	}
}

// attach links a newly opened stream to its parent, checking nesting and depth.
func (c *checker) attach(r *runState, env *messages.Envelope, st *streamState) {
	lane := st.lane
	if lane.StreamID == messages.RunStream {
		if lane.Depth != 0 {
			c.report(env.Seq, r.id, RuleLaneDepth, "run lane has depth %d, want 0", lane.Depth)
		}
		if lane.ParentStreamID != "" {
			c.report(env.Seq, r.id, RuleNestedLanes, "run lane has parent %q; it is the root", lane.ParentStreamID)
		}
		return
	}
	if lane.ParentStreamID == "" || lane.ParentStreamID == lane.StreamID {
		c.report(env.Seq, r.id, RuleNestedLanes, "stream %q has parent %q; every lane but %q nests under another", lane.StreamID, lane.ParentStreamID, messages.RunStream)
		return
	}
	p := r.streams[lane.ParentStreamID]
	switch {
	case p == nil && r.truncated:
		p = &streamState{lane: messages.Lane{StreamID: lane.ParentStreamID}}
		c.addStream(r, p)
	case p == nil:
		c.report(env.Seq, r.id, RuleNestedLanes, "%s opens stream %q under %q, which was never opened", env.Type, lane.StreamID, lane.ParentStreamID)
		return
	case p.closed:
		c.report(env.Seq, r.id, RuleNestedLanes, "%s opens stream %q under %q, which %s", env.Type, lane.StreamID, lane.ParentStreamID, closedAt(p))
		return
	}
	if p.laneKnown && lane.Depth != p.lane.Depth+1 {
		c.report(env.Seq, r.id, RuleLaneDepth, "stream %q has depth %d, want %d (its parent %q has depth %d)",
			lane.StreamID, lane.Depth, p.lane.Depth+1, p.lane.StreamID, p.lane.Depth)
	}
	p.children = append(p.children, st)
}

// payload applies the event's meaning for the run: plan, waves, nodes, terminal.
func (c *checker) payload(r *runState, env *messages.Envelope) {
	switch p := env.Payload.(type) {
	case *messages.PlanProposedPayload:
		c.planProposed(r, env, p.Plan, p.Waves)
	case *messages.RunRewoundPayload:
		// A rewound run starts from its source's plan, already approved,
		// with the nodes of earlier waves completed (they have no lanes here).
		c.planProposed(r, env, p.Plan, p.Waves)
		r.approved = true
		for _, n := range p.Reused {
			c.nodeEnded(r, n.NodeID, phaseCompleted)
		}
		for i := 0; i < p.Wave && i < len(r.waves); i++ {
			r.waves[i].started, r.waves[i].completed = true, true // ran in the source run
		}
	case *messages.PlanApprovedPayload:
		c.planDecision(r, env)
		if p.Plan != nil { // a human approved an edited plan: it is the one that runs
			r.proposed = false
			c.planProposed(r, env, *p.Plan, p.Waves)
		}
		r.approved = true
	case *messages.PlanRejectedPayload:
		c.planDecision(r, env)
		r.rejected = true
	case *messages.WaveStartedPayload:
		c.waveStarted(r, env, p)
	case *messages.WaveCompletedPayload:
		c.waveCompleted(r, env, p)
	case *messages.NodeStartedPayload:
		c.nodeStarted(r, env, p)
	case *messages.NodeCompletedPayload:
		c.nodeEnded(r, p.NodeID, phaseCompleted)
	case *messages.NodeFailedPayload:
		c.nodeEnded(r, p.NodeID, phaseFailed)
	case *messages.NodeCancelledPayload:
		c.nodeEnded(r, p.NodeID, phaseCancelled)
	case *messages.NodeSkippedPayload:
		c.nodeSkipped(r, env, p)
	case *messages.SubagentStartedPayload:
		r.streams[env.Lane.StreamID].subagentID = p.SubagentID
	case *messages.RunFinishedPayload, *messages.RunErrorPayload:
		c.terminal(r, env)
	}
}

func (c *checker) planProposed(r *runState, env *messages.Envelope, plan messages.Plan, waves [][]string) {
	if r.proposed {
		return // a second plan_proposed already broke the director lane's lifecycle
	}
	r.proposed = true
	r.nodes = make(map[string]*nodeState, len(plan.Nodes))
	for _, n := range plan.Nodes {
		if _, dup := r.nodes[n.ID]; dup {
			c.report(env.Seq, r.id, RulePayloadConsistency, "plan lists node %q twice", n.ID)
			continue
		}
		r.nodes[n.ID] = &nodeState{id: n.ID, deps: n.Deps, wave: -1}
	}
	r.waves = make([]*waveState, len(waves))
	for i, ids := range waves {
		r.waves[i] = &waveState{nodes: ids}
		for _, id := range ids {
			switch n := r.nodes[id]; {
			case n == nil:
				c.report(env.Seq, r.id, RulePayloadConsistency, "wave %d lists %q, which is not in the plan", i, id)
			case n.wave >= 0:
				c.report(env.Seq, r.id, RulePayloadConsistency, "node %q is listed in waves %d and %d", id, n.wave, i)
			default:
				n.wave = i
			}
		}
	}
	for _, pn := range plan.Nodes {
		n := r.nodes[pn.ID]
		if n.wave < 0 {
			c.report(env.Seq, r.id, RulePayloadConsistency, "node %q is in no wave", n.id)
		}
		for _, d := range n.deps {
			switch dn := r.nodes[d]; {
			case dn == nil:
				c.report(env.Seq, r.id, RulePayloadConsistency, "node %q depends on %q, which is not in the plan", n.id, d)
			case n.wave >= 0 && dn.wave >= n.wave:
				c.report(env.Seq, r.id, RulePayloadConsistency, "node %q (wave %d) depends on %q (wave %d); dependencies are in earlier waves", n.id, n.wave, d, dn.wave)
			}
		}
	}
}

func (c *checker) planDecision(r *runState, env *messages.Envelope) {
	switch {
	case r.approved || r.rejected:
		c.report(env.Seq, r.id, RulePlanGate, "%s after the plan was already %s", env.Type, decided(r))
	case !r.proposed && !r.truncated:
		c.report(env.Seq, r.id, RulePlanGate, "%s before plan_proposed", env.Type)
	}
}

// gate reports wave and node starts that the plan gate has not let through.
func (c *checker) gate(r *runState, env *messages.Envelope) {
	switch {
	case r.approved:
	case r.rejected:
		c.report(env.Seq, r.id, RulePlanGate, "%s after plan_rejected", env.Type)
	case r.truncated && !r.proposed:
		// The approval may precede the window.
	default:
		c.report(env.Seq, r.id, RulePlanGate, "%s before plan_approved", env.Type)
	}
}

func (c *checker) waveStarted(r *runState, env *messages.Envelope, p *messages.WaveStartedPayload) {
	c.gate(r, env)
	if !r.proposed {
		return
	}
	switch {
	case p.Wave < 0 || p.Wave >= len(r.waves):
		c.report(env.Seq, r.id, RuleWaveOrder, "wave_started{%d}, but the plan has %d waves", p.Wave, len(r.waves))
		return
	case r.waves[p.Wave].started:
		c.report(env.Seq, r.id, RuleWaveOrder, "wave_started{%d} again (first at seq %d)", p.Wave, r.waves[p.Wave].startSeq)
		return
	case p.Wave < r.lastWave:
		c.report(env.Seq, r.id, RuleWaveOrder, "wave_started{%d} after wave_started{%d}; waves start in increasing order", p.Wave, r.lastWave)
		return
	}
	w := r.waves[p.Wave]
	w.started, w.startSeq = true, env.Seq
	r.lastWave = p.Wave
	if !slices.Equal(p.NodeIDs, w.nodes) {
		c.report(env.Seq, r.id, RulePayloadConsistency, "wave_started{%d} lists %v, but plan_proposed wave %d is %v", p.Wave, p.NodeIDs, p.Wave, w.nodes)
	}
}

func (c *checker) waveCompleted(r *runState, env *messages.Envelope, p *messages.WaveCompletedPayload) {
	if !r.proposed {
		return
	}
	if p.Wave < 0 || p.Wave >= len(r.waves) {
		c.report(env.Seq, r.id, RuleWaveOrder, "wave_completed{%d}, but the plan has %d waves", p.Wave, len(r.waves))
		return
	}
	w := r.waves[p.Wave]
	switch {
	case !w.started:
		c.report(env.Seq, r.id, RuleWaveOrder, "wave_completed{%d} without wave_started{%d}", p.Wave, p.Wave)
		return
	case w.completed:
		c.report(env.Seq, r.id, RuleWaveOrder, "wave_completed{%d} again", p.Wave)
		return
	}
	w.completed = true
	var got [phaseSkipped + 1]int
	allEnded := true
	for _, id := range w.nodes {
		n := r.nodes[id]
		if n == nil {
			continue // reported at plan_proposed
		}
		if !n.phase.ended() {
			c.report(env.Seq, r.id, RuleWaveOrder, "wave_completed{%d} before node %q ended (it is %s)", p.Wave, id, n.phase)
			allEnded = false
		}
		got[n.phase]++
	}
	// The counts are only comparable once every node has ended.
	if allEnded && (got[phaseCompleted] != p.Completed || got[phaseFailed] != p.Failed || got[phaseCancelled] != p.Cancelled || got[phaseSkipped] != p.Skipped) {
		c.report(env.Seq, r.id, RulePayloadConsistency, "wave_completed{%d} counts completed/failed/cancelled/skipped %d/%d/%d/%d, but the events say %d/%d/%d/%d",
			p.Wave, p.Completed, p.Failed, p.Cancelled, p.Skipped, got[phaseCompleted], got[phaseFailed], got[phaseCancelled], got[phaseSkipped])
	}
}

func (c *checker) nodeStarted(r *runState, env *messages.Envelope, p *messages.NodeStartedPayload) {
	c.gate(r, env)
	n := c.planned(r, env, p.NodeID)
	if n == nil {
		return
	}
	for _, d := range n.deps {
		dn := r.nodes[d]
		switch {
		case dn == nil, dn.phase == phaseCompleted:
		case dn.phase.ended():
			c.report(env.Seq, r.id, RuleDAGOrder, "node_started of %q although its dependency %q %s; it may only be skipped", n.id, d, dn.phase)
		default:
			c.report(env.Seq, r.id, RuleDAGOrder, "node_started of %q before its dependency %q completed (it is %s)", n.id, d, dn.phase)
		}
	}
	if n.wave >= 0 {
		w := r.waves[n.wave]
		switch {
		case !w.started:
			c.report(env.Seq, r.id, RuleWaveOrder, "node_started of %q before wave_started{%d}", n.id, n.wave)
		case w.completed:
			c.report(env.Seq, r.id, RuleWaveOrder, "node_started of %q after wave_completed{%d}", n.id, n.wave)
		}
		if p.Wave != n.wave {
			c.report(env.Seq, r.id, RulePayloadConsistency, "node_started of %q says wave %d, but plan_proposed puts it in wave %d", n.id, p.Wave, n.wave)
		}
	}
	n.phase = phaseRunning
}

// planned returns the plan's node that env is about, or nil after
// reporting why there is none (no plan yet, or a node outside it).
func (c *checker) planned(r *runState, env *messages.Envelope, id string) *nodeState {
	if !r.proposed {
		if !r.truncated {
			c.report(env.Seq, r.id, RuleDAGOrder, "%s of %q, but no plan was proposed", env.Type, id)
		}
		return nil
	}
	n := r.nodes[id]
	if n == nil {
		c.report(env.Seq, r.id, RuleDAGOrder, "%s of %q, which is not in the plan", env.Type, id)
	}
	return n
}

func (c *checker) nodeEnded(r *runState, id string, phase nodePhase) {
	if n := r.nodes[id]; n != nil {
		n.phase = phase
	}
}

func (c *checker) nodeSkipped(r *runState, env *messages.Envelope, p *messages.NodeSkippedPayload) {
	n := c.planned(r, env, p.NodeID)
	if n == nil {
		return
	}
	if p.Dependency != "" {
		switch dn := r.nodes[p.Dependency]; {
		case !slices.Contains(n.deps, p.Dependency):
			c.report(env.Seq, r.id, RulePayloadConsistency, "node_skipped of %q names dependency %q, which it does not depend on", n.id, p.Dependency)
		case dn != nil && dn.phase == phaseCompleted:
			c.report(env.Seq, r.id, RulePayloadConsistency, "node_skipped of %q names dependency %q, which completed", n.id, p.Dependency)
		}
	}
	n.phase = phaseSkipped
}

func (c *checker) terminal(r *runState, env *messages.Envelope) {
	for _, st := range r.streamOrder {
		if !st.closed && st.lane.StreamID != messages.RunStream {
			c.report(env.Seq, r.id, RuleStreamsClosed, "%s while stream %q%s is still open", env.Type, st.lane.StreamID, openedAt(st))
		}
	}
	for i, w := range r.waves {
		if w.started && !w.completed {
			c.report(env.Seq, r.id, RuleWaveOrder, "%s while wave %d (started at seq %d) has no wave_completed", env.Type, i, w.startSeq)
		}
	}
	r.ended, r.endSeq = true, env.Seq
}

func decided(r *runState) string {
	if r.approved {
		return "approved"
	}
	return "rejected"
}

func openedAt(st *streamState) string {
	if st.openSeq == 0 {
		return ""
	}
	return fmt.Sprintf(" (opened at seq %d)", st.openSeq)
}

func closedAt(st *streamState) string {
	if st.openSeq != 0 && st.closeSeq == st.openSeq {
		return fmt.Sprintf("was a single-event stream at seq %d", st.closeSeq)
	}
	return fmt.Sprintf("closed at seq %d", st.closeSeq)
}

func fmtLane(l messages.Lane) string {
	if l.ParentStreamID == "" {
		return fmt.Sprintf("{%s depth %d}", l.StreamID, l.Depth)
	}
	return fmt.Sprintf("{%s depth %d parent %s}", l.StreamID, l.Depth, l.ParentStreamID)
}
