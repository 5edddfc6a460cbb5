package actors

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/model"
)

// replayRun is one run as its events in the journal describe it: enough
// to rebuild the run after a restart (see recover.go). It is filled by
// replayFold, in seq order, with no side effects.
type replayRun struct {
	runID     messages.RunID
	session   messages.SessionID
	tenant    messages.TenantID
	started   *messages.RunStartedPayload
	startedAt time.Time
	lastSeq   uint64
	events    int64 // events of the run in the journal (its outbox counts on from there)
	ended     bool

	plan        *messages.Plan
	waves       [][]string
	gateDecided bool // plan_approved or plan_rejected
	rejected    bool
	wave        int     // last wave started, -1 before the first
	waveDone    bool    // wave_completed{wave} seen
	synthesis   bool    // synthesis_started seen
	answer      *string // synthesis_completed seen: the answer
	laneFailed  string  // planning_failed or synthesis_failed seen: its error
	failing     bool    // a node failed or was cancelled: the run was ending
	failMsg     string
	unresumable string // set by recovery: why the run cannot go on (it ends with run_error internal)

	nodes         map[string]*replayNode
	lanes         map[messages.StreamID]*replayLane // lanes opened and not closed
	interrupts    map[string]*replayInterrupt       // raised and not ended
	usage         messages.Usage
	citations     []messages.Citation // citation_added, in order
	costEstimated bool                // run_cost_estimate seen

	// Team and debate nodes are not resumed: recovery closes the lanes
	// they had open below them and ends the run (recover.go).
	composite map[messages.StreamID]string             // lane of a running team or debate node → node id
	nested    map[messages.StreamID]*nestedLane        // open lanes inside them
	steering  map[messages.StreamID]*messages.Envelope // open steering lanes: their steering_received
	teamWaves map[messages.StreamID]*openTeamWave      // a running team's open wave, by the team's lane
}

// openTeamWave is a team's wave that had not completed.
type openTeamWave struct {
	lane    messages.Lane
	agent   string
	wave    *messages.WaveStartedPayload
	outcome map[string]nodeState // nested nodes with an event: running or how they ended
}

// nestedLane is an open lane inside a team or debate node.
type nestedLane struct {
	lane   messages.Lane
	agent  string
	opener messages.Payload
}

type replayNode struct {
	state  nodeState
	output string
	cites  []messages.Citation
}

// replayLane is an open agent lane: what its agent had done in its current
// attempt when the journal stopped.
type replayLane struct {
	lane     messages.Lane
	agentID  string
	attempts int
	subSeq   int // sub-agents it delegated to, all attempts

	text    strings.Builder
	usage   messages.Usage
	turn    int                // last model turn that ended (token_usage)
	calls   []model.ToolCall   // tool calls of that turn, as published
	callIDs []string           // their lane-unique ids
	results map[string]*string // finished calls: call id → result (error results prefixed)
	errs    map[string]bool
}

type replayInterrupt struct {
	raised    *messages.InterruptRaisedPayload
	lane      messages.Lane
	agentID   string
	raisedAt  time.Time
	expiresAt time.Time
}

func newReplayRun(id messages.RunID, session messages.SessionID) *replayRun {
	return &replayRun{runID: id, session: session, wave: -1, nodes: map[string]*replayNode{},
		lanes: map[messages.StreamID]*replayLane{}, interrupts: map[string]*replayInterrupt{}}
}

// apply folds one event of the run.
func (r *replayRun) apply(env *messages.Envelope) {
	r.lastSeq = env.Seq
	r.events++
	if r.applyNested(env) {
		return
	}
	lane := r.lanes[env.Lane.StreamID]
	switch p := env.Payload.(type) {
	case *messages.RunStartedPayload:
		r.started, r.startedAt, r.tenant = p, env.Timestamp, p.Tenant
	case *messages.RunFinishedPayload, *messages.RunErrorPayload:
		r.ended = true
	case *messages.PlanningStartedPayload, *messages.NodeStartedPayload, *messages.SubagentStartedPayload, *messages.SynthesisStartedPayload:
		r.lanes[env.Lane.StreamID] = &replayLane{lane: env.Lane, agentID: env.AgentID, attempts: 1}
		if np, ok := p.(*messages.NodeStartedPayload); ok {
			r.node(np.NodeID).state = nodeRunning
		}
		if _, ok := p.(*messages.SynthesisStartedPayload); ok {
			r.synthesis = true
		}
		if _, ok := p.(*messages.SubagentStartedPayload); ok {
			if parent := r.lanes[env.Lane.ParentStreamID]; parent != nil {
				parent.subSeq++
			}
		}
	case *messages.PlanProposedPayload:
		plan := p.Plan
		r.plan, r.waves = &plan, p.Waves
		delete(r.lanes, env.Lane.StreamID)
	case *messages.PlanningFailedPayload:
		r.laneFailed = "planning failed: " + p.Error
		delete(r.lanes, env.Lane.StreamID)
	case *messages.SynthesisFailedPayload:
		r.laneFailed = "synthesis failed: " + p.Error
		delete(r.lanes, env.Lane.StreamID)
	case *messages.SynthesisCompletedPayload:
		answer := p.Answer
		r.answer = &answer
		delete(r.lanes, env.Lane.StreamID)
	case *messages.SubagentFinishedPayload:
		delete(r.lanes, env.Lane.StreamID)
	case *messages.RunRewoundPayload:
		plan := p.Plan
		r.plan, r.waves, r.gateDecided = &plan, p.Waves, true
		r.wave, r.waveDone = p.Wave-1, true // the next wave to run is p.Wave
		for _, n := range p.Reused {
			rn := r.node(n.NodeID)
			rn.state, rn.output = nodeCompleted, n.Output
		}
	case *messages.PlanApprovedPayload:
		r.gateDecided = true
		if p.Plan != nil {
			r.plan, r.waves = p.Plan, p.Waves
		}
	case *messages.PlanRejectedPayload:
		r.gateDecided, r.rejected = true, true
	case *messages.WaveStartedPayload:
		r.wave, r.waveDone = p.Wave, false
	case *messages.WaveCompletedPayload:
		r.waveDone = true
	case *messages.NodeCompletedPayload:
		n := r.node(p.NodeID)
		n.state, n.output, n.cites = nodeCompleted, p.Output, p.Citations
		delete(r.lanes, env.Lane.StreamID)
	case *messages.SteeringAppliedPayload:
		delete(r.steering, env.Lane.StreamID)
		plan := p.Plan
		r.plan, r.waves = &plan, p.Waves
	case *messages.SubteamSpawnedPayload:
		if env.Lane.StreamID == messages.RunStream { // a team's spawns change only its own graph
			plan := p.Plan
			r.plan, r.waves = &plan, p.Waves
		}
	case *messages.RunCostEstimatePayload:
		r.costEstimated = true
	case *messages.SteeringReceivedPayload:
		if r.steering == nil {
			r.steering = map[messages.StreamID]*messages.Envelope{}
		}
		r.steering[env.Lane.StreamID] = env
	case *messages.SteeringRejectedPayload:
		delete(r.steering, env.Lane.StreamID)
	case *messages.CitationAddedPayload:
		r.citations = append(r.citations, p.Citation)
	case *messages.NodeFailedPayload:
		r.node(p.NodeID).state = nodeFailed
		r.failing, r.failMsg = true, "node "+p.NodeID+" failed: "+p.Error
		delete(r.lanes, env.Lane.StreamID)
	case *messages.NodeCancelledPayload:
		r.node(p.NodeID).state = nodeCancelled
		r.failing = true
		if r.failMsg == "" {
			r.failMsg = p.Reason
		}
		delete(r.lanes, env.Lane.StreamID)
	case *messages.NodeSkippedPayload:
		r.node(p.NodeID).state = nodeSkipped
	case *messages.AgentRestartedPayload:
		if lane != nil {
			sub := lane.subSeq
			*lane = replayLane{lane: lane.lane, agentID: lane.agentID, attempts: p.Attempt, subSeq: sub}
		}
	case *messages.TextDeltaPayload:
		if lane != nil {
			lane.text.WriteString(p.Delta)
		}
	case *messages.TokenUsagePayload:
		r.usage = r.usage.Add(p.Usage)
		if lane != nil && p.Role == "" { // an advisor's usage is not a turn of the lane's agent
			lane.usage = lane.usage.Add(p.Usage)
			lane.turn = p.Turn
			lane.calls, lane.callIDs, lane.results, lane.errs = nil, nil, nil, nil // the next calls are this turn's
		}
	case *messages.ToolCallStartedPayload:
		if lane != nil {
			id := p.CallID
			base, _, _ := strings.Cut(id, "#")
			lane.calls = append(lane.calls, model.ToolCall{ID: base, Name: p.Tool, Args: json.RawMessage(p.Args)})
			lane.callIDs = append(lane.callIDs, id)
		}
	case *messages.ToolCallFinishedPayload:
		if lane != nil {
			if lane.results == nil {
				lane.results, lane.errs = map[string]*string{}, map[string]bool{}
			}
			res := p.Result
			lane.results[p.CallID] = &res
			lane.errs[p.CallID] = p.IsError
		}
	case *messages.InterruptRaisedPayload:
		exp := p.ExpiresAt
		if exp.IsZero() {
			exp = env.Timestamp.Add(time.Duration(p.TimeoutSeconds) * time.Second)
		}
		r.interrupts[p.InterruptID] = &replayInterrupt{raised: p, lane: env.Lane, agentID: env.AgentID, raisedAt: env.Timestamp, expiresAt: exp}
	case *messages.InterruptResolvedPayload:
		delete(r.interrupts, p.InterruptID)
	case *messages.InterruptExpiredPayload:
		delete(r.interrupts, p.InterruptID)
	}
}

func (r *replayRun) node(id string) *replayNode {
	n := r.nodes[id]
	if n == nil {
		n = &replayNode{}
		r.nodes[id] = n
	}
	return n
}

// interruptOn returns the pending interrupt raised on a lane, if any.
func (r *replayRun) interruptOn(lane messages.StreamID) *replayInterrupt {
	for _, in := range r.interrupts {
		if in.lane.StreamID == lane {
			return in
		}
	}
	return nil
}

// pendingOfKind returns the pending interrupt of kind raised by agent on
// the run lane (plan and node approvals), if any.
func (r *replayRun) pendingOfKind(kind messages.InterruptKind, nodeID string) *replayInterrupt {
	for _, in := range r.interrupts {
		if in.raised.Kind == kind && in.raised.NodeID == nodeID && in.lane.StreamID == messages.RunStream {
			return in
		}
	}
	return nil
}

// applyNested folds the events inside a running team or debate node and
// reports whether env was one: their lanes are only tracked (to be closed
// at recovery), their usage counted. The node's own node_started and its
// closing event are the run's.
func (r *replayRun) applyNested(env *messages.Envelope) bool {
	if p, ok := env.Payload.(*messages.NodeStartedPayload); ok && env.Lane.Depth == 1 && (p.Kind == messages.KindTeam || p.Kind == messages.KindDebate) {
		if r.composite == nil {
			r.composite, r.nested = map[messages.StreamID]string{}, map[messages.StreamID]*nestedLane{}
		}
		r.composite[env.Lane.StreamID] = p.NodeID
		return false
	}
	id := env.Lane.StreamID
	if _, ok := r.composite[id]; ok { // on the node's own lane
		switch p := env.Payload.(type) {
		case *messages.WaveStartedPayload:
			if r.teamWaves == nil {
				r.teamWaves = map[messages.StreamID]*openTeamWave{}
			}
			r.teamWaves[id] = &openTeamWave{lane: env.Lane, agent: env.AgentID, wave: p, outcome: map[string]nodeState{}}
		case *messages.WaveCompletedPayload:
			delete(r.teamWaves, id)
		case *messages.NodeCompletedPayload, *messages.NodeFailedPayload, *messages.NodeCancelledPayload:
			delete(r.composite, id)
			return false
		case *messages.AgentRestartedPayload, *messages.InterruptRaisedPayload, *messages.InterruptResolvedPayload, *messages.InterruptExpiredPayload:
			return false
		}
		return true // team_started, its waves, debate rounds, dissent, …
	}
	_, underComposite := r.composite[env.Lane.ParentStreamID]
	_, underNested := r.nested[env.Lane.ParentStreamID]
	_, open := r.nested[id]
	if !underComposite && !underNested && !open {
		return false
	}
	switch p := env.Payload.(type) {
	case *messages.TokenUsagePayload:
		r.usage = r.usage.Add(p.Usage)
	case *messages.NodeStartedPayload:
		r.teamOutcome(env, p.NodeID, nodeRunning)
	case *messages.NodeCompletedPayload:
		r.teamOutcome(env, p.NodeID, nodeCompleted)
	case *messages.NodeFailedPayload:
		r.teamOutcome(env, p.NodeID, nodeFailed)
	case *messages.NodeCancelledPayload:
		r.teamOutcome(env, p.NodeID, nodeCancelled)
	case *messages.NodeSkippedPayload:
		r.teamOutcome(env, p.NodeID, nodeSkipped)
	}
	switch env.Type.Role() {
	case messages.RoleOpens:
		r.nested[id] = &nestedLane{lane: env.Lane, agent: env.AgentID, opener: env.Payload}
	case messages.RoleCloses, messages.RolePoint:
		delete(r.nested, id)
	}
	return true
}

// closingOf is the event that closes a nested lane lost in a restart.
func closingOf(l *nestedLane) messages.Payload {
	const lost = "lost in a server restart"
	switch o := l.opener.(type) {
	case *messages.NodeStartedPayload:
		return &messages.NodeCancelledPayload{NodeID: o.NodeID, Reason: lost}
	case *messages.SubagentStartedPayload:
		return &messages.SubagentFinishedPayload{SubagentID: o.SubagentID, Outcome: messages.OutcomeCancelled, Error: lost}
	case *messages.SynthesisStartedPayload:
		return &messages.SynthesisFailedPayload{Error: lost}
	case *messages.DebateTurnStartedPayload:
		return &messages.DebateTurnCompletedPayload{NodeID: o.NodeID, AgentID: o.AgentID, Round: o.Round, Stance: messages.StanceHeld, Cancelled: true}
	case *messages.DebateJudgeStartedPayload:
		return &messages.DebateJudgeSummaryPayload{NodeID: o.NodeID, Round: o.Round, Cancelled: true}
	}
	return nil
}

// teamOutcome records a nested node's state in its team's open wave.
func (r *replayRun) teamOutcome(env *messages.Envelope, id string, st nodeState) {
	if w := r.teamWaves[env.Lane.ParentStreamID]; w != nil {
		w.outcome[id] = st
	}
}
