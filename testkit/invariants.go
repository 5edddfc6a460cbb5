package testkit

import (
	"fmt"
	"slices"
	"strconv"
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
	// director, synthesis, node:<id> under run or under its team's lane,
	// <parent>/sub:<k> for sub-agents, synthesis:<id>, debate turn and
	// judge lanes under their debate's lane, steering:<id> under run, a
	// team's waves on the team's lane), and every event of a stream
	// carries the same depth and parent as the event that opened it.
	RuleLaneShape = "lane-shape"
	// RulePlanGate: plan_approved or plan_rejected follows plan_proposed, at
	// most once per plan; replan_attempt, numbered 1, 2, …, only right after
	// plan_rejected, and the next plan is proposed on the lane
	// director:<attempt+1>; wave_started and node_started only after
	// plan_approved.
	RulePlanGate = "plan-gate"
	// RuleDAGOrder: node_started of X follows node_completed of every
	// dependency of X in X's graph (the run's plan or its team's); nodes
	// outside the plan never start or are skipped.
	RuleDAGOrder = "dag-order"
	// RuleWaveOrder: per graph (the run's, each team's), waves start at most
	// once in increasing order, nodes start inside their wave, a wave
	// completes after all its nodes ended, and a started wave completes
	// before the terminal event (a team's: before the team node's lane
	// closes).
	RuleWaveOrder = "wave-order"
	// RulePayloadConsistency: the envelope type matches its payload, ids in
	// payloads match the lane, and plan, wave, kind, round and count fields
	// agree.
	RulePayloadConsistency = "payload-consistency"
	// RuleCostEstimate: run_cost_estimate comes once per plan_proposed, after
	// it and before the plan is approved or rejected (and before any wave).
	RuleCostEstimate = "cost-estimate"
	// RuleTeamOrder: a team node's lane carries node_started{kind team},
	// team_started right after it, the team's waves and nested node lanes,
	// its synthesis lane synthesis:<T> after the waves, node_compacting when
	// its output is compacted, team_synthesized, then node_completed with
	// the compacted output.
	RuleTeamOrder = "team-order"
	// RuleDebateOrder: a debate node's lane carries rounds 1, 2, … (at most
	// the configured number, none after an early stop), each with one
	// sequential turn lane per agent in agent order then the judge's lane
	// when the debate has a judge (a round whose turn or judge closed with
	// restarted runs again after debate_round_restarted, as attempt 2, 3,
	// …); then one debate_stance_map, the synthesis lane synthesis:<D>, a
	// dissent per shifted or conceded agent, and node_completed.
	RuleDebateOrder = "debate-order"
	// RuleSpawn: subteam_spawned comes on the lane of its parent's graph
	// after the parent completed and its wave completed, before the wave it
	// applies at starts; it keeps the earlier waves, and the new plan has the
	// team node, depending on the parent.
	RuleSpawn = "spawn"
	// RuleSteering: a steering lane holds steering_received, the steerer's
	// output and one close; steering_rejected follows a warning with code
	// steering_rejected; steering_applied comes between
	// wave_completed{applied_at_wave-1} and wave_started{applied_at_wave}
	// of the run and keeps the earlier waves.
	RuleSteering = "steering"
	// RuleAdvisorOrder: an advisor halt (gate_halt or gate_budget) is
	// followed on its lane by escalation, then the lane's failure close;
	// escalation only follows such a halt.
	RuleAdvisorOrder = "advisor-escalation"
	// RuleCitations: citation_added numbers are 1, 2, 3, … with distinct
	// URLs, added between waves; run_finished.citations, when present, is
	// the list of citations added.
	RuleCitations = "citations"
	// RuleAbort: run_abort_requested comes at most once per run, on the run
	// lane, and the run's terminal event after it is run_error{code: aborted}.
	RuleAbort = "abort"
	// RuleSignatures: an interrupt raised with an approval rule (it needs
	// approvers' signatures) is never decided by a timer other than
	// rejected, and its answer (approve, revise, reject) follows at least
	// the rule's number of approval_signature_added of that decision, by
	// distinct approvers.
	RuleSignatures = "signatures"
	// RuleInterruptsClosed: every interrupt a run raises is resolved
	// (answered or cancelled) or expired before the run's terminal event: a
	// run that ended leaves no question open for anyone to answer.
	RuleInterruptsClosed = "interrupts-closed"
	// RuleRequestReceived: request_received comes at most once per run,
	// on the run lane, as the run's second event (right after
	// run_started).
	RuleRequestReceived = "request-received"
	// RuleToolProgress: tool_call_progress names a call of its lane whose
	// tool_call_started came earlier and whose tool_call_finished has not
	// come yet.
	RuleToolProgress = "tool-progress"
	// RuleSchema: every event validates against the catalogue's JSON Schema
	// (messages.EventSchema). ValidateSchema checks it, apart from Check:
	// a schema validation costs more than all the other rules together.
	RuleSchema = "schema"
)

// Rules lists every rule name in documentation order.
func Rules() []string {
	return []string{
		RuleSeqGapless, RuleSingleSession, RuleRunStartedFirst, RuleTerminalOnceLast,
		RuleStreamLifecycle, RuleStreamsClosed, RuleNestedLanes, RuleLaneDepth, RuleLaneShape,
		RulePlanGate, RuleDAGOrder, RuleWaveOrder, RulePayloadConsistency,
		RuleCostEstimate, RuleTeamOrder, RuleDebateOrder, RuleSpawn, RuleSteering, RuleAdvisorOrder, RuleCitations,
		RuleAbort, RuleSignatures, RuleInterruptsClosed, RuleRequestReceived, RuleToolProgress, RuleSchema,
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
// assumed open when first seen, the checks that need its plan are skipped
// until its plan_proposed is seen, and so are the checks of a team, debate,
// steering or advisor sequence that began before the window.
func CheckPartial(events []*messages.Envelope) []Violation {
	return check(events, true)
}

// maxListed bounds the violations AssertInvariants prints.
const maxListed = 20

// AssertInvariants fails t (without stopping it) when Check reports
// violations, listing up to 20 of them.
func AssertInvariants(t testing.TB, events []*messages.Envelope) {
	t.Helper()
	vs := append(Check(events), ValidateSchema(events)...)
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
// and inside a run per stream, per graph (scope) and per plan node, so each
// event costs O(1) apart from the events that visit their own children,
// waves, plan or stance map once.
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

	// top is the run's own graph; teams are the nested graphs of team
	// nodes by team id, from their team_started on.
	top      *scope
	teams    map[string]*scope
	approved bool
	rejected bool
	// replans counts replan_attempt: the current plan is on the lane
	// DirectorStreamOf(replans+1).
	replans int

	// costDue: plan_proposed was seen and its run_cost_estimate not yet.
	costDue bool
	// abortSeq is the seq of the run's run_abort_requested (0: none seen).
	abortSeq uint64

	// covered are the run's interrupts raised with an approval rule, by
	// id, until their outcome.
	covered map[string]*coveredInterrupt
	// open are the run's interrupts raised and not yet resolved or
	// expired: the seq each was raised at, by id.
	open map[string]uint64

	// events counts the run's events seen; requestSeq is the seq of its
	// request_received (0: none seen).
	events     int
	requestSeq uint64

	citations []messages.Citation
	// citeFirst is the number the first citation_added seen must have: 1,
	// or whatever it is in a run that began before the window; 0 before any.
	citeFirst int
	citeURLs  map[string]int
}

// scope is one graph of a run: the run's plan, or a team's nested plan
// (whose node ids are run-wide, "T/X"). Each has its own waves and node
// states; a steering diff or a spawn replaces its plan from a wave on.
type scope struct {
	team     string // "" for the run's own graph
	proposed bool   // the plan is known; nodes and waves are set
	nodes    map[string]*nodeState
	waves    []*waveState
	lastWave int // highest wave started, -1 before the first
}

func newScope(team string) *scope { return &scope{team: team, lastWave: -1} }

// what names the scope in reports.
func (sc *scope) what() string {
	if sc.team == "" {
		return "the run"
	}
	return fmt.Sprintf("team %q", sc.team)
}

// openWave returns the index of a wave that started and has not completed, or -1.
func (sc *scope) openWave() int {
	if sc.lastWave >= 0 && sc.lastWave < len(sc.waves) {
		if w := sc.waves[sc.lastWave]; w.started && !w.completed {
			return sc.lastWave
		}
	}
	return -1
}

type streamState struct {
	lane messages.Lane
	// laneKnown is false for a parent assumed open in a truncated run before
	// any event of its own was seen.
	laneKnown bool
	openSeq   uint64 // 0 when the stream was opened before the window
	closed    bool
	closeSeq  uint64
	closeType messages.EventType
	children  []*streamState
	// lastType is the type of the last event seen on the lane; "" when the
	// lane opened before the window and none of its events was seen yet.
	lastType messages.EventType
	// subagentID and subRound come from the subagent_started that opened a sub-agent lane.
	subagentID string
	subRound   int

	// The state of the council rules, set up by the event that opened the
	// lane: nil (or zero) when it opened before the window, and then the
	// rules that need it are skipped.
	team        *teamState   // a team node's lane
	debate      *debateState // a debate node's lane
	halt        haltState    // an agent lane after an advisor halt
	steerWarned bool         // a steering lane carried warning{code: steering_rejected}
	// calls are the tool calls of the lane by call id: true from their
	// tool_call_started to their tool_call_finished, false after.
	calls map[string]bool
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
	id     string
	deps   []string
	wave   int // index in the plan's waves, -1 if in none
	phase  nodePhase
	kind   messages.NodeKind      // never empty: leaf, team or debate
	debate *messages.DebateConfig // a debate node's configuration, if the plan gives one
}

type waveState struct {
	nodes     []string
	started   bool
	completed bool
	startSeq  uint64
}

type teamPhase uint8

const (
	teamAwaitStart  teamPhase = iota // node_started (or agent_restarted) seen; team_started comes next
	teamRunning                      // team_started seen: waves, nested lanes, synthesis
	teamSynthesized                  // team_synthesized seen; node_completed comes next
)

type teamState struct {
	id      string
	phase   teamPhase
	scope   *scope // set by team_started
	output  string // compacted_output of team_synthesized
	flagged bool   // an event before team_started was reported (once)
}

type debateState struct {
	id  string
	cfg *messages.DebateConfig // nil when the plan node is not known
	// round is the last round started (0 before the first); turns, agents
	// and judged are about it.
	round  int
	turns  int
	agents map[string]bool // agents that had a turn this round (only without cfg)
	judged bool
	cur    *streamState // the last turn or judge lane opened
	// stopped: a judge summary said early_stop; cancelled: a turn or the
	// judge was cancelled (the debate is stopping).
	stopped, cancelled bool
	// attempt is the current round's run (1 for the first); restartDue: a
	// turn or the judge closed with restarted, so debate_round_restarted
	// comes next on the debate's lane.
	attempt    int
	restartDue bool
	stanceMap  bool
	stances    map[string]messages.Stance // the stance map's final stances
	owed       map[string]bool            // shifted or conceded agents without a dissent yet
}

type haltState uint8

const (
	haltNone      haltState = iota
	haltAdvised             // advisor gate_halt or gate_budget: escalation comes next
	haltEscalated           // escalation: the lane's failure close comes next
)

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
	r.events++
	if r.ended {
		c.report(env.Seq, r.id, RuleTerminalOnceLast, "%s after the run's terminal event at seq %d", env.Type, r.endSeq)
		return
	}
	lane := c.laneShape(r, env)
	st := c.stream(r, env, lane)
	if st == nil {
		return // reported; the event's effects would only cascade
	}
	c.laneRules(r, env, st)
	c.payload(r, env, st)
	st.lastType = env.Type
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
	r = &runState{id: env.RunID, streams: make(map[messages.StreamID]*streamState), top: newScope(""), teams: make(map[string]*scope)}
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

// Lane names of the council and delegation events (docs/events.md, Lanes).
// The checker spells them out from the documentation instead of using
// messages' lane builders and ParseStreamID: it is the oracle the engine's
// streams are checked against, so it shares none of the code it checks.

func synthesisStreamOf(nodeID string) messages.StreamID {
	return messages.StreamID("synthesis:" + nodeID)
}

// debateTurnStream and judgeStream: "r<round>" for a round's first run,
// "r<round>.<attempt>" after debate_round_restarted (attempt 0 or 1: the
// first).
func debateTurnStream(nodeID string, round, attempt int, agentID string) messages.StreamID {
	return messages.StreamID("debate:" + nodeID + "/" + roundPart(round, attempt) + "/" + agentID)
}

func judgeStream(nodeID string, round, attempt int) messages.StreamID {
	return messages.StreamID("judge:" + nodeID + "/" + roundPart(round, attempt))
}

func roundPart(round, attempt int) string {
	if attempt <= 1 {
		return "r" + strconv.Itoa(round)
	}
	return "r" + strconv.Itoa(round) + "." + strconv.Itoa(attempt)
}

func steeringStream(id string) messages.StreamID { return messages.StreamID("steering:" + id) }

// graphStream is the lane of the graph node nodeID is in: the run's, or
// its team's node lane ("T/X" is in team T).
func graphStream(nodeID string) messages.StreamID {
	if i := strings.LastIndexByte(nodeID, '/'); i >= 0 {
		return messages.NodeStream(nodeID[:i])
	}
	return messages.RunStream
}

func isSubagentStream(id messages.StreamID) bool { return strings.Contains(string(id), "/sub:") }

// isAgentStream: a node's lane or a sub-agent's.
func isAgentStream(id messages.StreamID) bool {
	return strings.HasPrefix(string(id), "node:") || isSubagentStream(id)
}

func isSteeringStream(id messages.StreamID) bool { return strings.HasPrefix(string(id), "steering:") }

// laneShape checks the lane of events whose lane is fixed by their type and
// returns the lane to track the event under: the expected one for the run,
// director and synthesis lanes and a team's waves (so a misplaced event is
// reported once), the event's own lane otherwise.
func (c *checker) laneShape(r *runState, env *messages.Envelope) messages.Lane {
	runLane := messages.RunLane()
	var want messages.Lane
	switch p := env.Payload.(type) {
	case *messages.RunStartedPayload, *messages.RunFinishedPayload, *messages.RunErrorPayload,
		*messages.PlanApprovedPayload, *messages.PlanRejectedPayload, *messages.ReplanAttemptPayload,
		*messages.RunCostEstimatePayload, *messages.CitationAddedPayload, *messages.RunAbortRequestedPayload,
		*messages.RequestReceivedPayload:
		want = runLane
	case *messages.WaveStartedPayload:
		return c.waveLane(r, env, p.Team)
	case *messages.WaveCompletedPayload:
		return c.waveLane(r, env, p.Team)
	case *messages.PlanningStartedPayload, *messages.PlanProposedPayload, *messages.PlanningFailedPayload:
		if ps := messages.ParseStreamID(env.Lane.StreamID); r.truncated && ps.Kind == messages.LaneDirector && ps.Plan > r.replans+1 {
			r.replans = ps.Plan - 1 // its re-plans came before the window
		}
		want = runLane.Child(messages.DirectorStreamOf(r.replans + 1))
	case *messages.SynthesisStartedPayload, *messages.SynthesisCompletedPayload, *messages.SynthesisFailedPayload:
		if x, ok := strings.CutPrefix(string(env.Lane.StreamID), "synthesis:"); ok && x != "" {
			c.parentIs(r, env, messages.NodeStream(x)) // a team's or a debate's synthesis
			return env.Lane
		}
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
	case *messages.TeamStartedPayload:
		c.idLane(r, env, messages.NodeStream(p.TeamID), "team", p.TeamID)
	case *messages.TeamSynthesizedPayload:
		c.idLane(r, env, messages.NodeStream(p.TeamID), "team", p.TeamID)
	case *messages.NodeProgressPayload:
		c.nodeLane(r, env, p.NodeID)
	case *messages.NodeCompactingPayload:
		c.nodeLane(r, env, p.NodeID)
	case *messages.SynthesisProgressPayload:
		if k := messages.ParseStreamID(env.Lane.StreamID).Kind; k != messages.LaneSynthesis && k != messages.LaneNodeSynthesis {
			c.report(env.Seq, r.id, RuleLaneShape, "synthesis_progress on lane %q, which is no synthesis lane", env.Lane.StreamID)
		}
	case *messages.SubteamSpawnedPayload:
		if g := graphStream(p.ParentNodeID); env.Lane.StreamID != g {
			c.report(env.Seq, r.id, RuleLaneShape, "subteam_spawned for parent %q on lane %q, want %q (the lane of the graph the parent is in)",
				p.ParentNodeID, env.Lane.StreamID, g)
			return c.trackAs(r, env, g)
		}
	case *messages.SteeringReceivedPayload:
		c.steeringLane(r, env, p.SteeringID)
	case *messages.SteeringAppliedPayload:
		c.steeringLane(r, env, p.SteeringID)
	case *messages.SteeringRejectedPayload:
		c.steeringLane(r, env, p.SteeringID)
	case *messages.DebateRoundStartedPayload:
		c.idLane(r, env, messages.NodeStream(p.NodeID), "node", p.NodeID)
	case *messages.DebateRoundCompactedPayload:
		c.idLane(r, env, messages.NodeStream(p.NodeID), "node", p.NodeID)
	case *messages.DebateStanceMapPayload:
		c.idLane(r, env, messages.NodeStream(p.NodeID), "node", p.NodeID)
	case *messages.DebateTurnStartedPayload:
		c.debateSubLane(r, env, p.NodeID, debateTurnStream(p.NodeID, p.Round, p.Attempt, p.AgentID))
	case *messages.DebateTurnCompletedPayload:
		c.debateSubLane(r, env, p.NodeID, debateTurnStream(p.NodeID, p.Round, p.Attempt, p.AgentID))
	case *messages.DebateJudgeStartedPayload:
		c.debateSubLane(r, env, p.NodeID, judgeStream(p.NodeID, p.Round, p.Attempt))
	case *messages.DebateJudgeSummaryPayload:
		c.debateSubLane(r, env, p.NodeID, judgeStream(p.NodeID, p.Round, p.Attempt))
	case *messages.DebateRoundRestartedPayload:
		c.idLane(r, env, messages.NodeStream(p.NodeID), "node", p.NodeID)
	case *messages.AdvisorPayload, *messages.EscalationPayload:
		if !isAgentStream(env.Lane.StreamID) {
			c.report(env.Seq, r.id, RuleLaneShape, "%s on lane %q; it belongs on an agent's lane (node:<id> or a sub-agent lane)", env.Type, env.Lane.StreamID)
		}
	default:
		return env.Lane
	}
	if want.StreamID != "" && env.Lane != want {
		c.report(env.Seq, r.id, RuleLaneShape, "%s on lane %s, want %s", env.Type, fmtLane(env.Lane), fmtLane(want))
		return want
	}
	return env.Lane
}

// trackAs returns the lane of stream id as opened, to track a misplaced
// event under; the event's own lane when that stream is not known.
func (c *checker) trackAs(r *runState, env *messages.Envelope, id messages.StreamID) messages.Lane {
	if id == messages.RunStream {
		return messages.RunLane()
	}
	if st := r.streams[id]; st != nil && st.laneKnown {
		return st.lane
	}
	return env.Lane
}

// waveLane: the run's waves are on the run lane, a team's on the team node's lane.
func (c *checker) waveLane(r *runState, env *messages.Envelope, team string) messages.Lane {
	want := messages.RunStream
	if team != "" {
		want = messages.NodeStream(team)
	}
	if env.Lane.StreamID == want && (team != "" || env.Lane == messages.RunLane()) {
		return env.Lane // a team lane's depth and parent are checked against its opening event
	}
	if team == "" {
		c.report(env.Seq, r.id, RuleLaneShape, "%s on lane %s, want %s", env.Type, fmtLane(env.Lane), fmtLane(messages.RunLane()))
	} else {
		c.report(env.Seq, r.id, RuleLaneShape, "%s of team %q on lane %q, want %q", env.Type, team, env.Lane.StreamID, want)
	}
	return c.trackAs(r, env, want)
}

func (c *checker) nodeLane(r *runState, env *messages.Envelope, nodeID string) {
	if want := messages.NodeStream(nodeID); env.Lane.StreamID != want {
		c.report(env.Seq, r.id, RulePayloadConsistency, "%s for node %q on lane %q, want %q", env.Type, nodeID, env.Lane.StreamID, want)
	}
	if g := graphStream(nodeID); env.Lane.ParentStreamID != g {
		c.report(env.Seq, r.id, RuleLaneShape, "%s on lane %s; the lane of node %q is nested directly under %q", env.Type, fmtLane(env.Lane), nodeID, g)
	}
}

// idLane reports an event whose payload names another lane than its own.
func (c *checker) idLane(r *runState, env *messages.Envelope, want messages.StreamID, what, id string) {
	if env.Lane.StreamID != want {
		c.report(env.Seq, r.id, RulePayloadConsistency, "%s for %s %q on lane %q, want %q", env.Type, what, id, env.Lane.StreamID, want)
	}
}

func (c *checker) parentIs(r *runState, env *messages.Envelope, parent messages.StreamID) {
	if env.Lane.ParentStreamID != parent {
		c.report(env.Seq, r.id, RuleLaneShape, "%s on lane %s; its parent is %q", env.Type, fmtLane(env.Lane), parent)
	}
}

func (c *checker) debateSubLane(r *runState, env *messages.Envelope, nodeID string, want messages.StreamID) {
	c.idLane(r, env, want, "node", nodeID)
	c.parentIs(r, env, messages.NodeStream(nodeID))
}

func (c *checker) steeringLane(r *runState, env *messages.Envelope, id string) {
	c.idLane(r, env, steeringStream(id), "steering", id)
	c.parentIs(r, env, messages.RunStream)
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

// stream applies the event's messages.StreamRole to its stream and returns
// the stream, or nil when the event broke the stream's lifecycle.
func (c *checker) stream(r *runState, env *messages.Envelope, lane messages.Lane) *streamState {
	st := r.streams[lane.StreamID]
	switch role := env.Type.Role(); role {
	case messages.RoleOpens, messages.RolePoint:
		if st != nil {
			if st.closed {
				c.report(env.Seq, r.id, RuleStreamLifecycle, "%s on stream %q, which %s", env.Type, lane.StreamID, closedAt(st))
			} else {
				c.report(env.Seq, r.id, RuleStreamLifecycle, "%s on stream %q, which is already open%s", env.Type, lane.StreamID, openedAt(st))
			}
			return nil
		}
		st = &streamState{lane: lane, laneKnown: true, openSeq: env.Seq}
		c.attach(r, env, st)
		c.addStream(r, st)
		if role == messages.RolePoint {
			st.closed, st.closeSeq, st.closeType = true, env.Seq, env.Type
		}
		return st
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
			return nil
		case st.closed:
			c.report(env.Seq, r.id, RuleStreamLifecycle, "%s on stream %q, which %s", env.Type, lane.StreamID, closedAt(st))
			return nil
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
			st.closed, st.closeSeq, st.closeType = true, env.Seq, env.Type
		}
		return st
	default:
		c.report(env.Seq, r.id, RulePayloadConsistency, "%s has no stream role", env.Type)
		return nil
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

// laneRules checks what may come next on a lane given the lane's state:
// after an advisor halt, on a team's lane before team_started or after
// team_synthesized, and on a steering lane.
func (c *checker) laneRules(r *runState, env *messages.Envelope, st *streamState) {
	c.advisorOrder(r, env, st)
	if t := st.team; t != nil {
		switch {
		case t.phase == teamAwaitStart && env.Type != messages.TeamStarted && env.Type != messages.NodeFailed &&
			env.Type != messages.NodeCancelled && env.Type != messages.AgentRestarted && !t.flagged:
			// agent_restarted: a crash (or a panic) between the team's
			// node_started and its team_started; the team starts again.
			t.flagged = true
			c.report(env.Seq, r.id, RuleTeamOrder, "%s on the lane of team %q before its team_started, which comes right after node_started", env.Type, t.id)
		case t.phase == teamSynthesized && env.Type != messages.NodeCompleted:
			c.report(env.Seq, r.id, RuleTeamOrder, "%s on the lane of team %q after team_synthesized; node_completed comes next", env.Type, t.id)
		}
	}
	if isSteeringStream(st.lane.StreamID) {
		switch env.Type {
		case messages.SteeringReceived, messages.SteeringApplied, messages.SteeringRejected,
			messages.TurnStarted, messages.TextDelta, messages.ReasoningDelta, messages.TokenUsage, messages.Warning:
		default:
			c.report(env.Seq, r.id, RuleSteering, "%s on steering lane %q, which carries only steering_*, turn_started, text_delta, reasoning_delta, token_usage and warning",
				env.Type, st.lane.StreamID)
		}
	}
}

// advisorOrder: gate_halt or gate_budget, then escalation, then the
// lane's failure close, as consecutive events of the lane.
func (c *checker) advisorOrder(r *runState, env *messages.Envelope, st *streamState) {
	switch st.halt {
	case haltAdvised:
		st.halt = haltNone
		if env.Type == messages.Escalation {
			st.halt = haltEscalated
			return
		}
		c.report(env.Seq, r.id, RuleAdvisorOrder, "%s on lane %q right after an advisor halt; escalation comes next", env.Type, st.lane.StreamID)
	case haltEscalated:
		st.halt = haltNone
		if !failureClose(env) {
			c.report(env.Seq, r.id, RuleAdvisorOrder, "%s on lane %q after escalation; the lane's failure close (node_failed, or subagent_finished with outcome failed) comes next",
				env.Type, st.lane.StreamID)
		}
	default:
		// In a window that began after the lane opened, the halt may precede it.
		if env.Type == messages.Escalation && (st.openSeq != 0 || st.lastType != "") {
			c.report(env.Seq, r.id, RuleAdvisorOrder, "escalation on lane %q without an advisor halt (gate_halt or gate_budget) right before it", st.lane.StreamID)
		}
	}
	if p, ok := env.Payload.(*messages.AdvisorPayload); ok && (p.Kind == messages.AdvisorHalt || p.Kind == messages.AdvisorBudget) {
		st.halt = haltAdvised
	}
}

func failureClose(env *messages.Envelope) bool {
	switch p := env.Payload.(type) {
	case *messages.NodeFailedPayload:
		return true
	case *messages.SubagentFinishedPayload:
		return p.Outcome == messages.OutcomeFailed
	}
	return false
}

// call records that tool call id of the lane is running (or ended).
func (st *streamState) call(id string, running bool) {
	if st.calls == nil {
		st.calls = make(map[string]bool)
	}
	st.calls[id] = running
}

// payload applies the event's meaning for the run: plan, waves, nodes,
// teams, debates, steering, citations, terminal. st is the event's stream.
func (c *checker) payload(r *runState, env *messages.Envelope, st *streamState) {
	switch p := env.Payload.(type) {
	case *messages.PlanProposedPayload:
		c.planProposed(r, env, p.Plan, p.Waves)
		r.costDue = true
	case *messages.RequestReceivedPayload:
		switch {
		case r.requestSeq != 0:
			c.report(env.Seq, r.id, RuleRequestReceived, "request_received again; the run's was at seq %d", r.requestSeq)
		case !r.truncated && r.events != 2:
			c.report(env.Seq, r.id, RuleRequestReceived, "request_received is event %d of the run; it comes right after run_started", r.events)
		}
		r.requestSeq = env.Seq
	case *messages.ToolCallStartedPayload:
		st.call(p.CallID, true)
	case *messages.ToolCallFinishedPayload:
		st.call(p.CallID, false)
	case *messages.ToolCallProgressPayload:
		// A lane opened before the window may have started the call there.
		if running, seen := st.calls[p.CallID]; !running && (seen || st.openSeq != 0) {
			what := "before its tool_call_started"
			if seen {
				what = "after its tool_call_finished"
			}
			c.report(env.Seq, r.id, RuleToolProgress, "tool_call_progress of call %q on lane %q %s", p.CallID, st.lane.StreamID, what)
		}
	case *messages.RunRewoundPayload:
		// A rewound run starts from its source's plan, already approved,
		// with the nodes of earlier waves completed (they have no lanes here).
		c.planProposed(r, env, p.Plan, p.Waves)
		r.approved = true
		for _, n := range p.Reused {
			if ns := r.top.nodes[n.NodeID]; ns != nil {
				ns.phase = phaseCompleted
			}
		}
		for i := 0; i < p.Wave && i < len(r.top.waves); i++ {
			r.top.waves[i].started, r.top.waves[i].completed = true, true // ran in the source run
		}
	case *messages.RunCostEstimatePayload:
		if !r.costDue && !(r.truncated && !r.top.proposed) {
			c.report(env.Seq, r.id, RuleCostEstimate, "run_cost_estimate that follows no plan_proposed awaiting one (one per plan_proposed, before the plan is approved or rejected)")
		}
		r.costDue = false
	case *messages.PlanApprovedPayload:
		c.planDecision(r, env)
		c.costBefore(r, env)
		if p.Plan != nil { // a human approved an edited plan: it is the one that runs
			c.setPlan(r, r.top, env, *p.Plan, p.Waves, 0)
		}
		r.approved = true
	case *messages.PlanRejectedPayload:
		c.planDecision(r, env)
		c.costBefore(r, env)
		r.rejected = true
	case *messages.ReplanAttemptPayload:
		switch {
		case r.truncated && !r.rejected && st.lastType == "":
			// A window that starts right after the plan_rejected: what
			// came before is not in it.
			r.replans = p.Attempt - 1
		case r.truncated && r.replans == 0 && st.lastType == messages.PlanRejected:
			// The run's earlier attempts may be before the window.
			r.replans = p.Attempt - 1
		case !r.rejected || st.lastType != messages.PlanRejected:
			c.report(env.Seq, r.id, RulePlanGate, "replan_attempt not right after plan_rejected on the run lane")
		case p.Attempt != r.replans+1 || p.MaxAttempts < p.Attempt:
			c.report(env.Seq, r.id, RulePlanGate, "replan_attempt %d of %d; want attempt %d, at most max_attempts", p.Attempt, p.MaxAttempts, r.replans+1)
		}
		// The director plans again: a new plan, gated again.
		r.replans++
		r.rejected, r.costDue = false, false
		r.top = newScope("")
	case *messages.WaveStartedPayload:
		c.waveStarted(r, env, p)
	case *messages.WaveCompletedPayload:
		c.waveCompleted(r, env, p)
	case *messages.NodeStartedPayload:
		c.nodeStarted(r, env, st, p)
	case *messages.NodeCompletedPayload:
		c.nodeClosed(r, env, st, p.NodeID, phaseCompleted, p.Output)
	case *messages.NodeFailedPayload:
		c.nodeClosed(r, env, st, p.NodeID, phaseFailed, "")
	case *messages.NodeCancelledPayload:
		c.nodeClosed(r, env, st, p.NodeID, phaseCancelled, "")
	case *messages.NodeSkippedPayload:
		c.nodeSkipped(r, env, p)
	case *messages.AgentRestartedPayload:
		c.restarted(r, st)
	case *messages.SubagentStartedPayload:
		st.subagentID, st.subRound = p.SubagentID, p.Round
		c.subagentRound(r, env, st, p.Round)
	case *messages.SynthesisStartedPayload:
		if x, ok := strings.CutPrefix(string(st.lane.StreamID), "synthesis:"); ok && x != "" {
			c.nestedSynthesis(r, env, x)
		}
	case *messages.WarningPayload:
		if p.Code == messages.WarnSteeringRejected {
			st.steerWarned = true
		}
	case *messages.TeamStartedPayload:
		c.teamStarted(r, env, st, p)
	case *messages.TeamSynthesizedPayload:
		c.teamSynthesized(r, env, st, p)
	case *messages.NodeCompactingPayload:
		c.nodeCompacting(r, env, st)
	case *messages.SubteamSpawnedPayload:
		c.subteamSpawned(r, env, p)
	case *messages.SteeringRejectedPayload:
		if !st.steerWarned && st.openSeq != 0 {
			c.report(env.Seq, r.id, RuleSteering, "steering_rejected of %q without a warning with code steering_rejected before it on its lane", p.SteeringID)
		}
	case *messages.SteeringAppliedPayload:
		c.steeringApplied(r, env, p)
	case *messages.DebateRoundStartedPayload:
		c.debateRound(r, env, st, p)
	case *messages.DebateTurnStartedPayload:
		c.debateTurn(r, env, st, p)
	case *messages.DebateTurnCompletedPayload:
		if d := r.debateAbove(st); d != nil && p.Cancelled {
			d.cancelled = true
		} else if d != nil && p.Restarted {
			d.restartDue = true
		}
	case *messages.DebateRoundRestartedPayload:
		c.debateRestarted(r, env, st, p)
	case *messages.DebateJudgeStartedPayload:
		c.debateJudge(r, env, st, p)
	case *messages.DebateJudgeSummaryPayload:
		c.debateJudgeSummary(r, env, st, p)
	case *messages.DebateRoundCompactedPayload:
		c.debateCompacted(r, env, st, p)
	case *messages.DebateStanceMapPayload:
		c.debateStanceMap(r, env, st, p)
	case *messages.DissentPayload:
		c.dissent(r, env, st, p)
	case *messages.CitationAddedPayload:
		c.citationAdded(r, env, p)
	case *messages.InterruptRaisedPayload:
		if r.open == nil {
			r.open = map[string]uint64{}
		}
		r.open[p.InterruptID] = env.Seq
		if p.Approval != nil {
			if r.covered == nil {
				r.covered = map[string]*coveredInterrupt{}
			}
			r.covered[p.InterruptID] = &coveredInterrupt{rule: *p.Approval, signers: map[messages.Decision]map[string]bool{}}
		}
	case *messages.ApprovalSignatureAddedPayload:
		if ci := r.covered[p.InterruptID]; ci != nil {
			ci.signed(p.Statement.Decision, p.Approver)
		}
	case *messages.InterruptExpiredPayload:
		delete(r.open, p.InterruptID)
		c.coveredExpired(r, env, p)
	case *messages.InterruptResolvedPayload:
		delete(r.open, p.InterruptID)
		c.coveredResolved(r, env, p)
	case *messages.RunAbortRequestedPayload:
		if r.abortSeq != 0 {
			c.report(env.Seq, r.id, RuleAbort, "a second run_abort_requested (the first at seq %d)", r.abortSeq)
		}
		r.abortSeq = env.Seq
	case *messages.RunFinishedPayload:
		if r.abortSeq != 0 {
			c.report(env.Seq, r.id, RuleAbort, "run_finished after the abort accepted at seq %d; want run_error{code: aborted}", r.abortSeq)
		}
		c.runCitations(r, env, p)
		c.terminal(r, env)
	case *messages.RunErrorPayload:
		if r.abortSeq != 0 && p.Code != messages.ErrCodeAborted {
			c.report(env.Seq, r.id, RuleAbort, "run_error{code: %s} after the abort accepted at seq %d; want code aborted", p.Code, r.abortSeq)
		}
		c.terminal(r, env)
	}
}

func (c *checker) planProposed(r *runState, env *messages.Envelope, plan messages.Plan, waves [][]string) {
	if r.top.proposed {
		return // a second plan_proposed already broke the director lane's lifecycle
	}
	c.setPlan(r, r.top, env, plan, waves, 0)
}

// setPlan makes plan and waves the plan of sc. Nodes that were already in
// sc's plan keep their phase, and the waves before keep keep their state:
// a steering diff or a spawn replaces a running graph's plan from wave
// keep on (the caller checks that the earlier waves are unchanged).
func (c *checker) setPlan(r *runState, sc *scope, env *messages.Envelope, plan messages.Plan, waves [][]string, keep int) {
	old, oldWaves := sc.nodes, sc.waves
	sc.proposed = true
	sc.nodes = make(map[string]*nodeState, len(plan.Nodes))
	for i := range plan.Nodes {
		pn := &plan.Nodes[i]
		if _, dup := sc.nodes[pn.ID]; dup {
			c.report(env.Seq, r.id, RulePayloadConsistency, "plan of %s lists node %q twice", sc.what(), pn.ID)
			continue
		}
		n := &nodeState{id: pn.ID, deps: pn.Deps, wave: -1, kind: kindOf(pn.Kind), debate: pn.Debate}
		if o := old[pn.ID]; o != nil {
			n.phase = o.phase
		}
		sc.nodes[pn.ID] = n
	}
	sc.waves = make([]*waveState, len(waves))
	for i, ids := range waves {
		w := &waveState{nodes: ids}
		if i < keep && i < len(oldWaves) {
			o := oldWaves[i]
			w.started, w.completed, w.startSeq = o.started, o.completed, o.startSeq
		}
		sc.waves[i] = w
		for _, id := range ids {
			switch n := sc.nodes[id]; {
			case n == nil:
				c.report(env.Seq, r.id, RulePayloadConsistency, "wave %d of %s lists %q, which is not in the plan", i, sc.what(), id)
			case n.wave >= 0:
				c.report(env.Seq, r.id, RulePayloadConsistency, "node %q is listed in waves %d and %d", id, n.wave, i)
			default:
				n.wave = i
			}
		}
	}
	for i := range plan.Nodes {
		n := sc.nodes[plan.Nodes[i].ID]
		if n.wave < 0 {
			c.report(env.Seq, r.id, RulePayloadConsistency, "node %q is in no wave", n.id)
		}
		for _, d := range n.deps {
			switch dn := sc.nodes[d]; {
			case dn == nil:
				c.report(env.Seq, r.id, RulePayloadConsistency, "node %q depends on %q, which is not in the plan", n.id, d)
			case n.wave >= 0 && dn.wave >= n.wave:
				c.report(env.Seq, r.id, RulePayloadConsistency, "node %q (wave %d) depends on %q (wave %d); dependencies are in earlier waves", n.id, n.wave, d, dn.wave)
			}
		}
	}
}

func kindOf(k messages.NodeKind) messages.NodeKind {
	if k == "" {
		return messages.KindLeaf
	}
	return k
}

// replacePlan applies a steering diff's or a spawn's new plan to sc from
// wave at on, reporting under rule a change to an earlier wave.
func (c *checker) replacePlan(r *runState, sc *scope, env *messages.Envelope, rule string, at int, plan messages.Plan, waves [][]string) {
	for i := 0; i < at && i < len(sc.waves); i++ {
		if i >= len(waves) || !slices.Equal(waves[i], sc.waves[i].nodes) {
			var got []string
			if i < len(waves) {
				got = waves[i]
			}
			c.report(env.Seq, r.id, rule, "%s changes wave %d of %s from %v to %v; waves before applied_at_wave %d stay as they are",
				env.Type, i, sc.what(), sc.waves[i].nodes, got, at)
		}
	}
	c.setPlan(r, sc, env, plan, waves, at)
}

func (c *checker) planDecision(r *runState, env *messages.Envelope) {
	switch {
	case r.approved || r.rejected:
		c.report(env.Seq, r.id, RulePlanGate, "%s after the plan was already %s", env.Type, decided(r))
	case !r.top.proposed && !r.truncated:
		c.report(env.Seq, r.id, RulePlanGate, "%s before plan_proposed", env.Type)
	}
}

// costBefore reports an event that must follow the run_cost_estimate of
// the plan_proposed before it.
func (c *checker) costBefore(r *runState, env *messages.Envelope) {
	if r.costDue {
		c.report(env.Seq, r.id, RuleCostEstimate, "%s before run_cost_estimate; the estimate follows plan_proposed before the plan is decided", env.Type)
		r.costDue = false
	}
}

// gate reports wave and node starts that the plan gate has not let through.
func (c *checker) gate(r *runState, env *messages.Envelope) {
	switch {
	case r.approved:
	case r.rejected:
		c.report(env.Seq, r.id, RulePlanGate, "%s after plan_rejected", env.Type)
	case r.truncated && !r.top.proposed:
		// The approval may precede the window.
	default:
		c.report(env.Seq, r.id, RulePlanGate, "%s before plan_approved", env.Type)
	}
}

// waveScope returns the graph a wave event is about, or nil when it is
// not known (reported unless the team began before the window).
func (c *checker) waveScope(r *runState, env *messages.Envelope, team string) *scope {
	if team == "" {
		return r.top
	}
	if sc := r.teams[team]; sc != nil {
		return sc
	}
	if !r.truncated {
		c.report(env.Seq, r.id, RuleTeamOrder, "%s of team %q, which has no team_started", env.Type, team)
	}
	return nil
}

func (c *checker) waveStarted(r *runState, env *messages.Envelope, p *messages.WaveStartedPayload) {
	sc := c.waveScope(r, env, p.Team)
	if sc == nil {
		return
	}
	if sc == r.top {
		c.gate(r, env)
		c.costBefore(r, env)
	}
	if !sc.proposed {
		return
	}
	switch {
	case p.Wave < 0 || p.Wave >= len(sc.waves):
		c.report(env.Seq, r.id, RuleWaveOrder, "wave_started{%d} of %s, but the plan has %d waves", p.Wave, sc.what(), len(sc.waves))
		return
	case sc.waves[p.Wave].started:
		c.report(env.Seq, r.id, RuleWaveOrder, "wave_started{%d} of %s again (first at seq %d)", p.Wave, sc.what(), sc.waves[p.Wave].startSeq)
		return
	case p.Wave < sc.lastWave:
		c.report(env.Seq, r.id, RuleWaveOrder, "wave_started{%d} of %s after wave_started{%d}; waves start in increasing order", p.Wave, sc.what(), sc.lastWave)
		return
	}
	w := sc.waves[p.Wave]
	w.started, w.startSeq = true, env.Seq
	sc.lastWave = p.Wave
	if !slices.Equal(p.NodeIDs, w.nodes) {
		c.report(env.Seq, r.id, RulePayloadConsistency, "wave_started{%d} of %s lists %v, but its plan's wave %d is %v", p.Wave, sc.what(), p.NodeIDs, p.Wave, w.nodes)
	}
}

func (c *checker) waveCompleted(r *runState, env *messages.Envelope, p *messages.WaveCompletedPayload) {
	sc := c.waveScope(r, env, p.Team)
	if sc == nil || !sc.proposed {
		return
	}
	if p.Wave < 0 || p.Wave >= len(sc.waves) {
		c.report(env.Seq, r.id, RuleWaveOrder, "wave_completed{%d} of %s, but the plan has %d waves", p.Wave, sc.what(), len(sc.waves))
		return
	}
	w := sc.waves[p.Wave]
	switch {
	case !w.started:
		c.report(env.Seq, r.id, RuleWaveOrder, "wave_completed{%d} of %s without wave_started{%d}", p.Wave, sc.what(), p.Wave)
		return
	case w.completed:
		c.report(env.Seq, r.id, RuleWaveOrder, "wave_completed{%d} of %s again", p.Wave, sc.what())
		return
	}
	w.completed = true
	var got [phaseSkipped + 1]int
	allEnded := true
	for _, id := range w.nodes {
		n := sc.nodes[id]
		if n == nil {
			continue // reported with the plan
		}
		if !n.phase.ended() {
			c.report(env.Seq, r.id, RuleWaveOrder, "wave_completed{%d} of %s before node %q ended (it is %s)", p.Wave, sc.what(), id, n.phase)
			allEnded = false
		}
		got[n.phase]++
	}
	// The counts are only comparable once every node has ended.
	if allEnded && (got[phaseCompleted] != p.Completed || got[phaseFailed] != p.Failed || got[phaseCancelled] != p.Cancelled || got[phaseSkipped] != p.Skipped) {
		c.report(env.Seq, r.id, RulePayloadConsistency, "wave_completed{%d} of %s counts completed/failed/cancelled/skipped %d/%d/%d/%d, but the events say %d/%d/%d/%d",
			p.Wave, sc.what(), p.Completed, p.Failed, p.Cancelled, p.Skipped, got[phaseCompleted], got[phaseFailed], got[phaseCancelled], got[phaseSkipped])
	}
}

func (c *checker) nodeStarted(r *runState, env *messages.Envelope, st *streamState, p *messages.NodeStartedPayload) {
	if !strings.Contains(p.NodeID, "/") {
		c.gate(r, env) // a nested node starts inside its team, which passed the gate
	}
	kind := kindOf(p.Kind)
	var cfg *messages.DebateConfig
	if sc, n := c.planned(r, env, p.NodeID); n != nil {
		for _, d := range n.deps {
			dn := sc.nodes[d]
			switch {
			case dn == nil, dn.phase == phaseCompleted:
			case dn.phase.ended():
				c.report(env.Seq, r.id, RuleDAGOrder, "node_started of %q although its dependency %q %s; it may only be skipped", n.id, d, dn.phase)
			default:
				c.report(env.Seq, r.id, RuleDAGOrder, "node_started of %q before its dependency %q completed (it is %s)", n.id, d, dn.phase)
			}
		}
		if n.wave >= 0 {
			w := sc.waves[n.wave]
			switch {
			case !w.started:
				c.report(env.Seq, r.id, RuleWaveOrder, "node_started of %q before wave_started{%d} of %s", n.id, n.wave, sc.what())
			case w.completed:
				c.report(env.Seq, r.id, RuleWaveOrder, "node_started of %q after wave_completed{%d} of %s", n.id, n.wave, sc.what())
			}
			if p.Wave != n.wave {
				c.report(env.Seq, r.id, RulePayloadConsistency, "node_started of %q says wave %d, but its plan puts it in wave %d", n.id, p.Wave, n.wave)
			}
		}
		if kind != n.kind {
			c.report(env.Seq, r.id, RulePayloadConsistency, "node_started of %q says kind %s, but its plan says %s", n.id, kind, n.kind)
			kind = n.kind
		}
		cfg = n.debate
		n.phase = phaseRunning
	}
	switch kind {
	case messages.KindTeam:
		st.team = &teamState{id: p.NodeID}
	case messages.KindDebate:
		st.debate = &debateState{id: p.NodeID, cfg: cfg}
	}
}

// planned returns the node that env is about and its graph, or nil after
// reporting why there is none (no plan yet, or a node outside it).
func (c *checker) planned(r *runState, env *messages.Envelope, id string) (*scope, *nodeState) {
	sc := r.top
	if i := strings.LastIndexByte(id, '/'); i >= 0 {
		team := id[:i]
		if sc = r.teams[team]; sc == nil {
			switch ts := r.streams[messages.NodeStream(team)]; {
			case ts != nil && ts.team != nil:
				c.report(env.Seq, r.id, RuleTeamOrder, "%s of %q before team_started of team %q", env.Type, id, team)
			case r.truncated:
			default:
				c.report(env.Seq, r.id, RuleDAGOrder, "%s of %q, but %q is not a team that started (no team_started)", env.Type, id, team)
			}
			return nil, nil
		}
	}
	if !sc.proposed {
		if !r.truncated {
			c.report(env.Seq, r.id, RuleDAGOrder, "%s of %q, but no plan was proposed", env.Type, id)
		}
		return nil, nil
	}
	n := sc.nodes[id]
	if n == nil {
		c.report(env.Seq, r.id, RuleDAGOrder, "%s of %q, which is not in the plan of %s", env.Type, id, sc.what())
	}
	return sc, n
}

// nodeClosed ends a node: its phase, and the closing rules of team and
// debate nodes.
func (c *checker) nodeClosed(r *runState, env *messages.Envelope, st *streamState, id string, phase nodePhase, output string) {
	if sc := r.scopeOf(id); sc != nil {
		if n := sc.nodes[id]; n != nil {
			n.phase = phase
		}
	}
	if t := st.team; t != nil {
		switch {
		case phase != phaseCompleted:
		case t.phase != teamSynthesized:
			c.report(env.Seq, r.id, RuleTeamOrder, "node_completed of team %q without team_synthesized", t.id)
		case output != t.output:
			c.report(env.Seq, r.id, RulePayloadConsistency, "node_completed of team %q has output %q, but team_synthesized said %q", t.id, clip(output), clip(t.output))
		}
		if t.scope != nil {
			if i := t.scope.openWave(); i >= 0 {
				c.report(env.Seq, r.id, RuleWaveOrder, "%s while wave %d of team %q (started at seq %d) has no wave_completed", env.Type, i, t.id, t.scope.waves[i].startSeq)
			}
		}
	}
	if d := st.debate; d != nil && phase == phaseCompleted {
		synth := r.streams[synthesisStreamOf(d.id)]
		switch {
		case d.cancelled:
			c.report(env.Seq, r.id, RuleDebateOrder, "node_completed of debate %q after a turn or its judge was cancelled", d.id)
		case !d.stanceMap:
			c.report(env.Seq, r.id, RuleDebateOrder, "node_completed of debate %q without debate_stance_map", d.id)
		case synth == nil || synth.closeType != messages.SynthesisCompleted:
			c.report(env.Seq, r.id, RuleDebateOrder, "node_completed of debate %q before its synthesis lane %q completed", d.id, synthesisStreamOf(d.id))
		case len(d.owed) > 0:
			c.report(env.Seq, r.id, RuleDebateOrder, "node_completed of debate %q before the dissent of %v", d.id, sortedKeys(d.owed))
		}
	}
}

// scopeOf returns the graph node id is in, or nil when it is not known.
func (r *runState) scopeOf(id string) *scope {
	if i := strings.LastIndexByte(id, '/'); i >= 0 {
		return r.teams[id[:i]]
	}
	return r.top
}

func (c *checker) nodeSkipped(r *runState, env *messages.Envelope, p *messages.NodeSkippedPayload) {
	sc, n := c.planned(r, env, p.NodeID)
	if n == nil {
		return
	}
	if p.Dependency != "" {
		switch dn := sc.nodes[p.Dependency]; {
		case !slices.Contains(n.deps, p.Dependency):
			c.report(env.Seq, r.id, RulePayloadConsistency, "node_skipped of %q names dependency %q, which it does not depend on", n.id, p.Dependency)
		case dn != nil && dn.phase == phaseCompleted:
			c.report(env.Seq, r.id, RulePayloadConsistency, "node_skipped of %q names dependency %q, which completed", n.id, p.Dependency)
		}
	}
	n.phase = phaseSkipped
}

// restarted: a team or debate node's actor restarted after a panic and
// runs again from its start on the same lane (a team's team_started comes
// next, a debate's rounds start from 1).
func (c *checker) restarted(r *runState, st *streamState) {
	if t := st.team; t != nil {
		if t.scope != nil && r.teams[t.id] == t.scope {
			delete(r.teams, t.id)
		}
		st.team = &teamState{id: t.id}
	}
	if d := st.debate; d != nil {
		st.debate = &debateState{id: d.id, cfg: d.cfg}
	}
}

// subagentRound: a sub-agent's round is 1 under a node (or any agent that
// is not a sub-agent), its parent sub-agent's round + 1 under a sub-agent.
func (c *checker) subagentRound(r *runState, env *messages.Envelope, st *streamState, round int) {
	parent := r.streams[st.lane.ParentStreamID]
	want := 1
	switch {
	case parent == nil:
		return // reported by nested-lanes
	case parent.subRound > 0:
		want = parent.subRound + 1
	case isSubagentStream(parent.lane.StreamID):
		// Its round is unknown (it opened before the window) or was
		// reported as wrong already.
		if round < 2 {
			c.report(env.Seq, r.id, RulePayloadConsistency, "subagent_started of %q under sub-agent lane %q has round %d, want 2 or more", st.subagentID, parent.lane.StreamID, round)
		}
		return
	}
	if round != want {
		c.report(env.Seq, r.id, RulePayloadConsistency, "subagent_started of %q under %q has round %d, want %d", st.subagentID, parent.lane.StreamID, round, want)
	}
}

// nestedSynthesis checks synthesis_started on synthesis:<x>: x is a team
// whose waves are over, or a debate whose stance map was given.
func (c *checker) nestedSynthesis(r *runState, env *messages.Envelope, x string) {
	parent := r.streams[messages.NodeStream(x)]
	switch {
	case parent == nil:
		// Reported by nested-lanes.
	case parent.team != nil:
		t := parent.team
		switch t.phase {
		case teamAwaitStart:
			c.report(env.Seq, r.id, RuleTeamOrder, "synthesis_started of team %q before its team_started", x)
		case teamSynthesized:
			c.report(env.Seq, r.id, RuleTeamOrder, "synthesis_started of team %q after its team_synthesized", x)
		default:
			if i := wavesLeft(t.scope); i >= 0 {
				c.report(env.Seq, r.id, RuleTeamOrder, "synthesis_started of team %q before wave %d of the team completed; the synthesis follows the nested waves", x, i)
			}
		}
	case parent.debate != nil:
		if !parent.debate.stanceMap {
			c.report(env.Seq, r.id, RuleDebateOrder, "synthesis_started of debate %q before its debate_stance_map", x)
		}
	case parent.openSeq == 0:
		// The node opened before the window: its kind is not known.
	default:
		c.report(env.Seq, r.id, RuleLaneShape, "synthesis lane %q under node %q, which is neither a team nor a debate node", env.Lane.StreamID, x)
	}
}

// wavesLeft returns a wave of sc that is not over, or -1: every wave
// completed, or never started and all its nodes ended (skipped).
func wavesLeft(sc *scope) int {
	for i, w := range sc.waves {
		if w.completed {
			continue
		}
		if w.started {
			return i
		}
		for _, id := range w.nodes {
			if n := sc.nodes[id]; n != nil && !n.phase.ended() {
				return i
			}
		}
	}
	return -1
}

func (c *checker) teamStarted(r *runState, env *messages.Envelope, st *streamState, p *messages.TeamStartedPayload) {
	t := st.team
	if t == nil {
		id, isNode := strings.CutPrefix(string(st.lane.StreamID), "node:")
		if st.openSeq != 0 || !isNode {
			c.report(env.Seq, r.id, RuleTeamOrder, "team_started on lane %q, which is not a team node's (node_started with kind team)", st.lane.StreamID)
			return
		}
		t = &teamState{id: id} // its node_started came before the window
		st.team = t
	}
	switch {
	case t.phase != teamAwaitStart:
		c.report(env.Seq, r.id, RuleTeamOrder, "team_started of team %q again", t.id)
		return
	case t.flagged:
	case st.lastType != "" && st.lastType != messages.NodeStarted && st.lastType != messages.AgentRestarted:
		c.report(env.Seq, r.id, RuleTeamOrder, "team_started of team %q after %s; it comes right after the team's node_started", t.id, st.lastType)
	}
	if st.laneKnown && p.Depth != st.lane.Depth {
		c.report(env.Seq, r.id, RulePayloadConsistency, "team_started of team %q says depth %d, but its lane has depth %d", t.id, p.Depth, st.lane.Depth)
	}
	for _, n := range p.Plan.Nodes {
		if x, ok := strings.CutPrefix(n.ID, t.id+"/"); !ok || x == "" || strings.Contains(x, "/") {
			c.report(env.Seq, r.id, RulePayloadConsistency, "team_started of team %q lists node %q; the team's nodes are %q/<id>", t.id, n.ID, t.id)
		}
	}
	sc := newScope(t.id)
	c.setPlan(r, sc, env, p.Plan, p.Waves, 0)
	r.teams[t.id] = sc
	t.scope, t.phase = sc, teamRunning
}

func (c *checker) teamSynthesized(r *runState, env *messages.Envelope, st *streamState, p *messages.TeamSynthesizedPayload) {
	t := st.team
	switch {
	case t == nil && st.openSeq != 0:
		c.report(env.Seq, r.id, RuleTeamOrder, "team_synthesized on lane %q, which is not a team node's", st.lane.StreamID)
		return
	case t == nil, t.phase == teamAwaitStart:
		return // the node opened before the window, or reported by laneRules
	case t.phase == teamSynthesized:
		return // reported by laneRules
	}
	synth := r.streams[synthesisStreamOf(t.id)]
	switch {
	case synth == nil:
		c.report(env.Seq, r.id, RuleTeamOrder, "team_synthesized of team %q before its synthesis lane %q", t.id, synthesisStreamOf(t.id))
	case !synth.closed:
		c.report(env.Seq, r.id, RuleTeamOrder, "team_synthesized of team %q while its synthesis lane is open", t.id)
	case synth.closeType != messages.SynthesisCompleted:
		c.report(env.Seq, r.id, RuleTeamOrder, "team_synthesized of team %q after its synthesis ended with %s", t.id, synth.closeType)
	}
	t.phase, t.output = teamSynthesized, p.CompactedOutput
}

// nodeCompacting: a team's output is compacted after its synthesis
// completed, before team_synthesized.
func (c *checker) nodeCompacting(r *runState, env *messages.Envelope, st *streamState) {
	t := st.team
	switch {
	case t == nil && st.openSeq != 0:
		c.report(env.Seq, r.id, RuleTeamOrder, "node_compacting on lane %q, which is not a team node's", st.lane.StreamID)
	case t == nil || t.phase == teamAwaitStart || t.phase == teamSynthesized:
		// The node opened before the window, or reported by laneRules.
	default:
		if synth := r.streams[synthesisStreamOf(t.id)]; synth == nil || !synth.closed || synth.closeType != messages.SynthesisCompleted {
			c.report(env.Seq, r.id, RuleTeamOrder, "node_compacting of team %q before its synthesis completed", t.id)
		}
	}
}

func (c *checker) subteamSpawned(r *runState, env *messages.Envelope, p *messages.SubteamSpawnedPayload) {
	sc := r.scopeOf(p.ParentNodeID)
	if sc == nil || !sc.proposed {
		if !r.truncated {
			c.report(env.Seq, r.id, RuleSpawn, "subteam_spawned for parent %q, whose graph has no known plan", p.ParentNodeID)
		}
		return
	}
	n := sc.nodes[p.ParentNodeID]
	if n == nil {
		c.report(env.Seq, r.id, RuleSpawn, "subteam_spawned for parent %q, which is not in the plan of %s", p.ParentNodeID, sc.what())
		return
	}
	at := p.AppliedAtWave
	switch {
	case n.phase != phaseCompleted:
		c.report(env.Seq, r.id, RuleSpawn, "subteam_spawned for parent %q before its node_completed (it is %s)", n.id, n.phase)
	case n.wave >= 0 && !sc.waves[n.wave].completed:
		c.report(env.Seq, r.id, RuleSpawn, "subteam_spawned for parent %q before wave_completed{%d} of its wave", n.id, n.wave)
	}
	switch {
	case at <= n.wave || at > len(sc.waves):
		c.report(env.Seq, r.id, RuleSpawn, "subteam_spawned applied_at_wave %d; its parent %q is in wave %d of %s, which has %d waves",
			at, n.id, n.wave, sc.what(), len(sc.waves))
		return
	case sc.lastWave >= at:
		c.report(env.Seq, r.id, RuleSpawn, "subteam_spawned applied_at_wave %d after wave_started{%d} of %s", at, sc.lastWave, sc.what())
	case !sc.waves[at-1].completed:
		c.report(env.Seq, r.id, RuleSpawn, "subteam_spawned applied_at_wave %d before wave_completed{%d} of %s", at, at-1, sc.what())
	}
	c.replacePlan(r, sc, env, RuleSpawn, at, p.Plan, p.Waves)
	switch tn := sc.nodes[p.TeamID]; {
	case tn == nil:
		c.report(env.Seq, r.id, RuleSpawn, "subteam_spawned of team %q, which is not in the new plan", p.TeamID)
	case tn.kind != messages.KindTeam:
		c.report(env.Seq, r.id, RuleSpawn, "subteam_spawned of %q, which the new plan makes a %s node, not a team", p.TeamID, tn.kind)
	case !slices.Contains(tn.deps, p.ParentNodeID):
		c.report(env.Seq, r.id, RuleSpawn, "subteam_spawned of team %q, which does not depend on its parent %q", p.TeamID, p.ParentNodeID)
	}
}

func (c *checker) steeringApplied(r *runState, env *messages.Envelope, p *messages.SteeringAppliedPayload) {
	sc := r.top
	if !sc.proposed {
		if !r.truncated {
			c.report(env.Seq, r.id, RuleSteering, "steering_applied of %q before the run has a plan", p.SteeringID)
		}
		return
	}
	at := p.AppliedAtWave
	switch {
	case at < 0 || at > len(sc.waves):
		c.report(env.Seq, r.id, RuleSteering, "steering_applied of %q at wave %d, but the run's plan has %d waves", p.SteeringID, at, len(sc.waves))
		return
	case sc.lastWave >= at:
		c.report(env.Seq, r.id, RuleSteering, "steering_applied of %q at wave %d after wave_started{%d}", p.SteeringID, at, sc.lastWave)
	case at > 0 && !sc.waves[at-1].completed:
		c.report(env.Seq, r.id, RuleSteering, "steering_applied of %q at wave %d before wave_completed{%d}", p.SteeringID, at, at-1)
	}
	c.replacePlan(r, sc, env, RuleSteering, at, p.Plan, p.Waves)
}

// debateOf returns the debate state of lane st, or nil after reporting an
// event that needs one on another lane (unless the lane opened before the
// window, when its kind is not known).
func (c *checker) debateOf(r *runState, env *messages.Envelope, st *streamState) *debateState {
	switch {
	case st == nil:
		return nil
	case st.debate != nil:
		return st.debate
	case st.openSeq != 0:
		c.report(env.Seq, r.id, RuleDebateOrder, "%s under lane %q, which is not a debate node's (node_started with kind debate)", env.Type, st.lane.StreamID)
	}
	return nil
}

// debateAbove returns the debate state of the lane st is nested under, if any.
func (r *runState) debateAbove(st *streamState) *debateState {
	if p := r.streams[st.lane.ParentStreamID]; p != nil {
		return p.debate
	}
	return nil
}

// debateOver reports an event of the rounds after the rounds ended.
func (c *checker) debateOver(r *runState, env *messages.Envelope, d *debateState) bool {
	switch {
	case d.stanceMap:
		c.report(env.Seq, r.id, RuleDebateOrder, "%s of debate %q after its debate_stance_map", env.Type, d.id)
	case d.cancelled:
		c.report(env.Seq, r.id, RuleDebateOrder, "%s of debate %q after a cancelled turn or judge", env.Type, d.id)
	case d.stopped:
		c.report(env.Seq, r.id, RuleDebateOrder, "%s of debate %q after the judge stopped it early (early_stop)", env.Type, d.id)
	default:
		return false
	}
	return true
}

// roundDone reports an event that needs the turns of the current round of d
// to be over: its lanes closed, every agent's turn taken, and with judge,
// the judge heard (when the debate has one).
func (c *checker) roundDone(r *runState, env *messages.Envelope, d *debateState, judge bool) {
	switch {
	case d.cur != nil && !d.cur.closed:
		c.report(env.Seq, r.id, RuleDebateOrder, "%s of debate %q while lane %q is open", env.Type, d.id, d.cur.lane.StreamID)
	case d.cfg != nil && d.turns < len(d.cfg.Agents):
		c.report(env.Seq, r.id, RuleDebateOrder, "%s of debate %q after %d of the %d turns of round %d", env.Type, d.id, d.turns, len(d.cfg.Agents), d.round)
	case d.turns == 0:
		c.report(env.Seq, r.id, RuleDebateOrder, "%s of debate %q after round %d had no turn", env.Type, d.id, d.round)
	case judge && d.cfg != nil && d.cfg.Judge && !d.judged:
		c.report(env.Seq, r.id, RuleDebateOrder, "%s of debate %q before the judge of round %d", env.Type, d.id, d.round)
	}
}

func (c *checker) debateRound(r *runState, env *messages.Envelope, st *streamState, p *messages.DebateRoundStartedPayload) {
	d := c.debateOf(r, env, st)
	if d == nil {
		return
	}
	over := c.debateOver(r, env, d)
	switch {
	case over:
	case p.Round != d.round+1:
		c.report(env.Seq, r.id, RuleDebateOrder, "debate_round_started{%d} of debate %q after round %d; rounds are 1, 2, … in order", p.Round, d.id, d.round)
	case d.cfg != nil && d.cfg.Rounds > 0 && p.Round > d.cfg.Rounds:
		c.report(env.Seq, r.id, RuleDebateOrder, "debate_round_started{%d} of debate %q, which is configured for %d rounds", p.Round, d.id, d.cfg.Rounds)
	}
	if d.round > 0 && !over {
		c.roundDone(r, env, d, true)
	}
	d.round, d.turns, d.agents, d.judged, d.attempt = p.Round, 0, nil, false, 1
}

// debateRestarted: a round starts again after a turn or the judge closed
// with restarted, as its next attempt, from its first speaker.
func (c *checker) debateRestarted(r *runState, env *messages.Envelope, st *streamState, p *messages.DebateRoundRestartedPayload) {
	d := c.debateOf(r, env, st)
	if d == nil {
		return
	}
	switch {
	case c.debateOver(r, env, d):
	case !d.restartDue:
		c.report(env.Seq, r.id, RuleDebateOrder, "debate_round_restarted of debate %q without a turn or judge closed with restarted before it", d.id)
	case p.Round != d.round || p.Attempt != max(d.attempt, 1)+1:
		c.report(env.Seq, r.id, RuleDebateOrder, "debate_round_restarted{round %d, attempt %d} of debate %q during round %d, attempt %d", p.Round, p.Attempt, d.id, d.round, max(d.attempt, 1))
	}
	d.restartDue = false
	d.turns, d.agents, d.judged, d.attempt = 0, nil, false, p.Attempt
}

func (c *checker) debateTurn(r *runState, env *messages.Envelope, st *streamState, p *messages.DebateTurnStartedPayload) {
	d := c.debateOf(r, env, r.streams[st.lane.ParentStreamID])
	if d == nil {
		return
	}
	switch {
	case c.debateOver(r, env, d):
	case d.round == 0:
		c.report(env.Seq, r.id, RuleDebateOrder, "debate_turn_started of %q in debate %q before debate_round_started", p.AgentID, d.id)
	case p.Round != d.round:
		c.report(env.Seq, r.id, RuleDebateOrder, "debate_turn_started of %q for round %d during round %d of debate %q", p.AgentID, p.Round, d.round, d.id)
	case d.restartDue:
		c.report(env.Seq, r.id, RuleDebateOrder, "debate_turn_started of %q before the debate_round_restarted its restarted turn calls for", p.AgentID)
	case max(p.Attempt, 1) != max(d.attempt, 1):
		c.report(env.Seq, r.id, RuleDebateOrder, "debate_turn_started of %q for attempt %d of round %d, which is at attempt %d", p.AgentID, max(p.Attempt, 1), d.round, max(d.attempt, 1))
	case d.cur != nil && !d.cur.closed:
		c.report(env.Seq, r.id, RuleDebateOrder, "debate_turn_started of %q while lane %q is open; turns are one at a time", p.AgentID, d.cur.lane.StreamID)
	case d.judged:
		c.report(env.Seq, r.id, RuleDebateOrder, "debate_turn_started of %q after the judge of round %d", p.AgentID, d.round)
	case d.cfg != nil && d.turns >= len(d.cfg.Agents):
		c.report(env.Seq, r.id, RuleDebateOrder, "debate_turn_started of %q: round %d of debate %q already had a turn from each of its %d agents", p.AgentID, d.round, d.id, len(d.cfg.Agents))
	case d.cfg != nil && d.cfg.Agents[d.turns].ID != p.AgentID:
		c.report(env.Seq, r.id, RuleDebateOrder, "debate_turn_started of %q as turn %d of round %d, want %q (agent order)", p.AgentID, d.turns+1, d.round, d.cfg.Agents[d.turns].ID)
	case d.cfg == nil && d.agents[p.AgentID]:
		c.report(env.Seq, r.id, RuleDebateOrder, "debate_turn_started of %q again in round %d of debate %q", p.AgentID, d.round, d.id)
	}
	if d.cfg == nil { // without the configuration, at least one turn per agent
		if d.agents == nil {
			d.agents = make(map[string]bool)
		}
		d.agents[p.AgentID] = true
	}
	d.turns++
	d.cur = st
}

func (c *checker) debateJudge(r *runState, env *messages.Envelope, st *streamState, p *messages.DebateJudgeStartedPayload) {
	d := c.debateOf(r, env, r.streams[st.lane.ParentStreamID])
	if d == nil {
		return
	}
	switch {
	case c.debateOver(r, env, d):
	case d.cfg != nil && !d.cfg.Judge:
		c.report(env.Seq, r.id, RuleDebateOrder, "debate_judge_started in debate %q, which has no judge", d.id)
	case p.Round != d.round:
		c.report(env.Seq, r.id, RuleDebateOrder, "debate_judge_started for round %d during round %d of debate %q", p.Round, d.round, d.id)
	case max(p.Attempt, 1) != max(d.attempt, 1):
		c.report(env.Seq, r.id, RuleDebateOrder, "debate_judge_started for attempt %d of round %d, which is at attempt %d", max(p.Attempt, 1), d.round, max(d.attempt, 1))
	case d.judged:
		c.report(env.Seq, r.id, RuleDebateOrder, "debate_judge_started again in round %d of debate %q", d.round, d.id)
	default:
		c.roundDone(r, env, d, false)
	}
	d.judged = true
	d.cur = st
}

func (c *checker) debateJudgeSummary(r *runState, env *messages.Envelope, st *streamState, p *messages.DebateJudgeSummaryPayload) {
	d := r.debateAbove(st) // a lane that is not a debate's was reported when it opened
	if d == nil {
		return
	}
	if p.Cancelled {
		d.cancelled = true
		return
	}
	if p.Restarted {
		d.restartDue = true
		return
	}
	if p.EarlyStop {
		if !p.Consensus || (d.cfg != nil && p.Round < d.cfg.EffectiveMinRounds()) {
			c.report(env.Seq, r.id, RulePayloadConsistency, "debate_judge_summary of round %d of debate %q stops early without consensus at or after min_rounds", p.Round, d.id)
		}
		d.stopped = true
	}
}

func (c *checker) debateCompacted(r *runState, env *messages.Envelope, st *streamState, p *messages.DebateRoundCompactedPayload) {
	d := c.debateOf(r, env, st)
	if d == nil || c.debateOver(r, env, d) {
		return
	}
	switch {
	case p.Round < 1 || p.Round > d.round:
		c.report(env.Seq, r.id, RuleDebateOrder, "debate_round_compacted of round %d during round %d of debate %q; only a past round is compacted", p.Round, d.round, d.id)
	case d.cur != nil && !d.cur.closed:
		c.report(env.Seq, r.id, RuleDebateOrder, "debate_round_compacted of debate %q while lane %q is open; compaction is between rounds", d.id, d.cur.lane.StreamID)
	}
}

func (c *checker) debateStanceMap(r *runState, env *messages.Envelope, st *streamState, p *messages.DebateStanceMapPayload) {
	d := c.debateOf(r, env, st)
	if d == nil {
		return
	}
	switch {
	case d.stanceMap:
		c.report(env.Seq, r.id, RuleDebateOrder, "debate_stance_map of debate %q again", d.id)
		return
	case d.cancelled:
		c.report(env.Seq, r.id, RuleDebateOrder, "debate_stance_map of debate %q after a cancelled turn or judge", d.id)
	case d.round == 0:
		c.report(env.Seq, r.id, RuleDebateOrder, "debate_stance_map of debate %q before any round", d.id)
	default:
		c.roundDone(r, env, d, true)
		if d.cfg != nil && d.cfg.Rounds > 0 && !d.stopped && d.round < d.cfg.Rounds {
			c.report(env.Seq, r.id, RuleDebateOrder, "debate_stance_map of debate %q after round %d of %d, without an early stop", d.id, d.round, d.cfg.Rounds)
		}
	}
	if p.Rounds != d.round {
		c.report(env.Seq, r.id, RulePayloadConsistency, "debate_stance_map of debate %q says %d rounds, but %d were held", d.id, p.Rounds, d.round)
	}
	d.stanceMap = true
	d.stances = make(map[string]messages.Stance, len(p.Stances))
	d.owed = make(map[string]bool)
	for _, s := range p.Stances {
		if _, dup := d.stances[s.AgentID]; dup {
			c.report(env.Seq, r.id, RulePayloadConsistency, "debate_stance_map of debate %q lists agent %q twice", d.id, s.AgentID)
		}
		if d.cfg != nil && !slices.ContainsFunc(d.cfg.Agents, func(a messages.DebateAgent) bool { return a.ID == s.AgentID }) {
			c.report(env.Seq, r.id, RulePayloadConsistency, "debate_stance_map of debate %q lists %q, who is not one of its agents", d.id, s.AgentID)
		}
		d.stances[s.AgentID] = s.Stance
		if s.Stance == messages.StanceShifted || s.Stance == messages.StanceConceded {
			d.owed[s.AgentID] = true
		}
	}
	if d.cfg != nil && len(d.stances) != len(d.cfg.Agents) {
		c.report(env.Seq, r.id, RulePayloadConsistency, "debate_stance_map of debate %q lists %d agents, but the debate has %d", d.id, len(d.stances), len(d.cfg.Agents))
	}
}

func (c *checker) dissent(r *runState, env *messages.Envelope, st *streamState, p *messages.DissentPayload) {
	d := c.debateOf(r, env, st)
	if d == nil {
		return
	}
	if synth := r.streams[synthesisStreamOf(d.id)]; !d.stanceMap || synth == nil || !synth.closed {
		c.report(env.Seq, r.id, RuleDebateOrder, "dissent of %q in debate %q before the debate's synthesis lane closed", p.DissentingAgentID, d.id)
		return
	}
	a := p.DissentingAgentID
	switch s, listed := d.stances[a]; {
	case !listed:
		c.report(env.Seq, r.id, RuleDebateOrder, "dissent of %q, who is not in the stance map of debate %q", a, d.id)
	case s != messages.StanceShifted && s != messages.StanceConceded:
		c.report(env.Seq, r.id, RuleDebateOrder, "dissent of %q, whose final stance in debate %q is %s; only shifted or conceded agents dissent", a, d.id, s)
	case !d.owed[a]:
		c.report(env.Seq, r.id, RuleDebateOrder, "dissent of %q again in debate %q", a, d.id)
	default:
		if p.Stance != s {
			c.report(env.Seq, r.id, RulePayloadConsistency, "dissent of %q says stance %s, but the stance map of debate %q says %s", a, p.Stance, d.id, s)
		}
		delete(d.owed, a)
	}
}

func (c *checker) citationAdded(r *runState, env *messages.Envelope, p *messages.CitationAddedPayload) {
	if r.citeFirst == 0 {
		r.citeFirst, r.citeURLs = 1, make(map[string]int)
		if r.truncated {
			r.citeFirst = p.Number // the earlier ones may precede the window
		}
	}
	if want := r.citeFirst + len(r.citations); p.Number != want {
		c.report(env.Seq, r.id, RuleCitations, "citation_added number %d, want %d: citations are numbered 1, 2, 3, … in order", p.Number, want)
	}
	if n, dup := r.citeURLs[p.URL]; dup {
		c.report(env.Seq, r.id, RuleCitations, "citation_added number %d repeats the url of citation %d (%s)", p.Number, n, p.URL)
	} else {
		r.citeURLs[p.URL] = p.Number
	}
	if i := r.top.openWave(); i >= 0 {
		c.report(env.Seq, r.id, RuleCitations, "citation_added while wave %d runs; citations are added between waves", i)
	}
	r.citations = append(r.citations, p.Citation)
}

func (c *checker) runCitations(r *runState, env *messages.Envelope, p *messages.RunFinishedPayload) {
	if len(p.Citations) == 0 {
		return
	}
	first := r.citeFirst
	if first == 0 {
		if r.truncated {
			return // citations may have been added before the window
		}
		first = 1
	}
	got := p.Citations
	if first > 1 {
		got = got[min(first-1, len(got)):]
	}
	if !slices.Equal(got, r.citations) {
		i := 0
		for i < len(got) && i < len(r.citations) && got[i] == r.citations[i] {
			i++
		}
		c.report(env.Seq, r.id, RuleCitations, "run_finished lists %d citations, but citation_added gave %d; they differ from number %d on",
			len(p.Citations), first-1+len(r.citations), first+i)
	}
}

func (c *checker) terminal(r *runState, env *messages.Envelope) {
	for _, st := range r.streamOrder {
		if !st.closed && st.lane.StreamID != messages.RunStream {
			c.report(env.Seq, r.id, RuleStreamsClosed, "%s while stream %q%s is still open", env.Type, st.lane.StreamID, openedAt(st))
		}
	}
	for i, w := range r.top.waves {
		if w.started && !w.completed {
			c.report(env.Seq, r.id, RuleWaveOrder, "%s while wave %d (started at seq %d) has no wave_completed", env.Type, i, w.startSeq)
		}
	}
	for _, id := range sortedKeys(r.open) {
		c.report(env.Seq, r.id, RuleInterruptsClosed, "%s while interrupt %s (raised at seq %d) is neither resolved nor expired", env.Type, id, r.open[id])
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

// clip shortens s for a report.
func clip(s string) string {
	if len(s) <= 40 {
		return s
	}
	return s[:40] + "…"
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// ValidateSchema checks every event of events against the catalogue's JSON
// Schema (rule schema): the events as they go on the wire, encoded again.
func ValidateSchema(events []*messages.Envelope) []Violation {
	var vs []Violation
	for _, env := range events {
		b, err := env.AppendJSON(nil)
		if err == nil {
			err = messages.ValidateEventJSON(b)
		}
		if err != nil {
			detail := fmt.Sprintf("%s: %v", env.Type, err)
			if len(detail) > 400 { // the validator quotes the offending value
				detail = detail[:400] + "…"
			}
			vs = append(vs, Violation{Seq: env.Seq, RunID: env.RunID, Rule: RuleSchema, Detail: detail})
		}
	}
	return vs
}

// coveredInterrupt is an interrupt that needs approvers' signatures
// (RuleSignatures): its rule and who signed each decision so far.
type coveredInterrupt struct {
	rule    messages.ApprovalRequirement
	signers map[messages.Decision]map[string]bool
}

func (ci *coveredInterrupt) signed(d messages.Decision, approver string) {
	if ci.signers[d] == nil {
		ci.signers[d] = map[string]bool{}
	}
	ci.signers[d][approver] = true
}

// coveredExpired: a timer only ever rejects a covered interrupt. (In a
// window that starts after its interrupt_raised, nothing is known of it.)
func (c *checker) coveredExpired(r *runState, env *messages.Envelope, p *messages.InterruptExpiredPayload) {
	if ci := r.covered[p.InterruptID]; ci != nil {
		delete(r.covered, p.InterruptID)
		if p.Action != messages.DecisionReject {
			c.report(env.Seq, r.id, RuleSignatures, "interrupt %s needs %d approvers' signatures and expired with action %s: a timer may only reject it",
				p.InterruptID, ci.rule.Required, p.Action)
		}
	}
}

// coveredResolved: a covered interrupt's answer has the signatures its
// decision needs (a cancellation needs none).
func (c *checker) coveredResolved(r *runState, env *messages.Envelope, p *messages.InterruptResolvedPayload) {
	ci := r.covered[p.InterruptID]
	if ci == nil {
		return
	}
	delete(r.covered, p.InterruptID)
	need := ci.rule.Required
	switch p.Decision {
	case messages.DecisionCancel:
		return
	case messages.DecisionReject:
		need = max(ci.rule.RejectRequired, 1)
	}
	if got := len(ci.signers[p.Decision]); got < need {
		c.report(env.Seq, r.id, RuleSignatures, "interrupt %s resolved %s with %d of the %d approvers' signatures it needs",
			p.InterruptID, p.Decision, got, need)
	}
}
