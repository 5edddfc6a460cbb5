// Package runstate is the one definition of what a run's events mean: a
// pure reducer, Run.Apply, folds a run's events in seq order into its
// state — its plan and waves (and each running team's nested plan and
// waves), node states and outputs, open agent lanes and what their
// agents had done, debates, steering notes, pending interrupts,
// citations and usage. It does no I/O, knows no actor and reads no
// clock.
//
// The run supervisor applies the events it decides and the closing events
// its agents report; recovery folds the journal through the same Apply to
// put a run back where it was after a restart; rewind folds an ended run
// to reuse its plan and outputs; the run index keeps an outline state
// (NewOutline) per live run and projects its summaries from it
// (runindex.Summarize), as the runs API does for ended runs.
package runstate

import (
	"cmp"
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/model"
)

// NodeState is where a plan node is.
type NodeState int

// Node states.
const (
	Pending NodeState = iota
	Running
	Completed
	Failed
	Cancelled
	Skipped
)

// Ended reports whether the node will not run (again).
func (s NodeState) Ended() bool { return s >= Completed }

// Node is one plan node's progress.
type Node struct {
	State  NodeState
	Output string
	Cites  []messages.Citation // the sources it cited, handed up with its output
	// Spawn is the sub-team its worker asked for (node_completed.spawn),
	// until the graph's next wave boundary decides it (subteam_spawned,
	// or a spawn gate that did not approve it).
	Spawn *messages.SpawnRequest
	// SpawnApproved: a human approved Spawn at its gate, and the sub-team
	// is not spawned yet (a restart in between spawns it without asking
	// again).
	SpawnApproved bool
	// Team is the team node's nested graph, from its team_started.
	Team *Graph
	// Debate is the debate node's progress, from its node_started.
	Debate *Debate
}

// Graph is a plan being run: the run's, or a team node's nested plan.
type Graph struct {
	Lane messages.Lane // the run lane, or the team node's lane
	Team string        // the team node's id; "" for the run's graph
	Plan messages.Plan
	// Waves are the plan's waves; Wave is the last one started (-1 before
	// the first) and WaveDone whether it completed.
	Waves    [][]string
	Wave     int
	WaveDone bool
	Nodes    map[string]*Node
	// Failing: a node of the graph failed or was cancelled, so the graph
	// is ending.
	Failing bool
	FailMsg string
	// Synthesis is the graph's synthesiser: started, its answer once
	// written, or why it failed.
	Synthesis Synthesis
	// Synthesized: a team's team_synthesized was published.
	Synthesized bool

	pos    map[string]int // plan node id → index in Plan.Nodes
	waveOf map[string]int // plan node id → its wave
}

// Synthesis is a synthesiser's progress.
type Synthesis struct {
	Started bool
	Answer  *string
	Failed  string
}

// Node returns the node id's progress, created pending if needed.
func (g *Graph) Node(id string) *Node {
	n := g.Nodes[id]
	if n == nil {
		n = &Node{}
		put(&g.Nodes, id, n)
	}
	return n
}

// PlanNode returns the plan's node id, if any.
func (g *Graph) PlanNode(id string) *messages.PlanNode {
	if g.pos == nil { // a small plan: no index (setPlan)
		for i := range g.Plan.Nodes {
			if g.Plan.Nodes[i].ID == id {
				return &g.Plan.Nodes[i]
			}
		}
		return nil
	}
	if i, ok := g.pos[id]; ok {
		return &g.Plan.Nodes[i]
	}
	return nil
}

// Has reports whether the plan has node id.
func (g *Graph) Has(id string) bool { return g.PlanNode(id) != nil }

// Fixed reports whether node id's wave has started: steering and spawns
// can no longer change it.
func (g *Graph) Fixed(id string) bool {
	w, ok := g.wave(id)
	return ok && w <= g.Wave
}

// wave is the wave of node id.
func (g *Graph) wave(id string) (int, bool) {
	if g.waveOf == nil { // a small plan: no index (setPlan)
		for w, ids := range g.Waves {
			if slices.Contains(ids, id) {
				return w, true
			}
		}
		return 0, false
	}
	w, ok := g.waveOf[id]
	return w, ok
}

// indexAbove is the plan size from which setPlan indexes nodes and waves
// in maps; smaller plans are scanned (two maps cost a parked run ~0.5 KB).
const indexAbove = 16

// StartedWaves maps each node of the waves started so far to its wave
// (what dag.WavesFrom keeps in place when the plan changes).
func (g *Graph) StartedWaves() map[string]int {
	m := map[string]int{}
	for w := 0; w <= g.Wave && w < len(g.Waves); w++ {
		for _, id := range g.Waves[w] {
			m[id] = w
		}
	}
	return m
}

// InWave reports whether a wave has started and not completed.
func (g *Graph) InWave() bool { return g.Wave >= 0 && !g.WaveDone }

// Counts counts the plan's nodes by state.
func (g *Graph) Counts() messages.NodeCounts {
	c := messages.NodeCounts{Total: len(g.Plan.Nodes)}
	for _, n := range g.Plan.Nodes {
		x := g.Nodes[n.ID]
		if x == nil {
			continue // pending
		}
		switch x.State {
		case Completed:
			c.Completed++
		case Failed:
			c.Failed++
		case Cancelled:
			c.Cancelled++
		case Skipped:
			c.Skipped++
		}
	}
	return c
}

// setPlan sets (or replaces) the graph's plan and waves; the progress of
// every node stays.
func (g *Graph) setPlan(plan messages.Plan, waves [][]string) {
	g.Plan, g.Waves = plan, waves
	g.pos, g.waveOf = nil, nil
	if len(plan.Nodes) <= indexAbove {
		return
	}
	g.pos = make(map[string]int, len(plan.Nodes))
	for i := range plan.Nodes {
		g.pos[plan.Nodes[i].ID] = i
	}
	g.waveOf = make(map[string]int, len(plan.Nodes))
	for w, ids := range waves {
		for _, id := range ids {
			g.waveOf[id] = w
		}
	}
}

func newGraph(lane messages.Lane, team string, plan messages.Plan, waves [][]string) *Graph {
	g := &Graph{Lane: lane, Team: team, Wave: -1}
	g.setPlan(plan, waves)
	return g
}

// Lane is an open agent lane: what its agent had done in its current
// attempt when the events stopped.
type Lane struct {
	Lane     messages.Lane
	AgentID  string
	Attempts int
	SubSeq   int // sub-agents it delegated to, all attempts

	Text    strings.Builder
	Usage   messages.Usage
	Turn    int                // last model turn that ended (token_usage)
	Calls   []model.ToolCall   // tool calls of that turn, as published
	CallIDs []string           // their lane-unique ids
	Results map[string]*string // finished calls: call id → result (error results too)
	Errs    map[string]bool
	// RemoteTask and RemoteContext are the task of a node run by a remote
	// agent (its first remote_task); they outlive agent_restarted, as the
	// task does.
	RemoteTask, RemoteContext string
}

// CallIndex is the index of the call id among the lane's calls, or -1.
func (l *Lane) CallIndex(callID string) int {
	for i, id := range l.CallIDs {
		if id == callID {
			return i
		}
	}
	return -1
}

// Interrupt is a pending interrupt.
type Interrupt struct {
	Raised    *messages.InterruptRaisedPayload
	Seq       uint64 // of its interrupt_raised
	Lane      messages.Lane
	AgentID   string
	RaisedAt  time.Time
	ExpiresAt time.Time
	// Signatures are the approvers' signatures recorded so far (a
	// policy-covered interrupt).
	Signatures []*messages.ApprovalSignatureAddedPayload
}

// Note is a steering note whose lane is open.
type Note struct {
	Received *messages.SteeringReceivedPayload
	Lane     messages.Lane
	AgentID  string
	Seq      uint64 // of its steering_received
}

// NotesInOrder lists the run's open steering notes in the order they were
// received (Steering is a map: what recovery does with them must not
// depend on its iteration order).
func (r *Run) NotesInOrder() []*Note {
	out := make([]*Note, 0, len(r.Steering))
	for _, n := range r.Steering {
		out = append(out, n)
	}
	slices.SortFunc(out, func(a, b *Note) int { return cmp.Compare(a.Seq, b.Seq) })
	return out
}

// Debate is a debate node's progress.
type Debate struct {
	Lane      messages.Lane // the debate node's lane
	Round     int           // last round started (0 before the first)
	Compacted int           // rounds compacted
	// Attempt is which run of Round this is (0 or 1: the first);
	// Restarts counts the debate's round restarts.
	Attempt  int
	Restarts int
	// Turns are the completed turns, in order: the transcript.
	Turns []Turn
	// Judged is the judge's last summary, if the debate has one.
	Judged *messages.DebateJudgeSummaryPayload
	// Open is the turn, judge or synthesis lane that is open, if any.
	Open *DebateSub
	// StanceMap is the published stance map, once given.
	StanceMap *messages.DebateStanceMapPayload
	Synthesis Synthesis
}

// Turn is one completed debate turn.
type Turn struct {
	Round  int
	Agent  string
	Text   string
	Stance messages.Stance
}

// DebateSub is a debate's open turn, judge or synthesis lane.
type DebateSub struct {
	Lane  messages.Lane
	Kind  messages.EventType // its opening event's type
	Round int
	Agent string // a turn's agent
}

// Run is one run's state.
type Run struct {
	ID        messages.RunID
	Tenant    messages.TenantID
	Started   *messages.RunStartedPayload
	StartedAt time.Time
	LastSeq   uint64
	UpdatedAt time.Time // the last event's timestamp
	Events    int64     // events applied
	// Ended: its terminal event (End: run_finished or run_error) was
	// applied, at EndedAt.
	Ended   bool
	End     messages.Payload
	EndedAt time.Time
	Rewound *messages.RunRewoundPayload
	// Abort is the run's accepted abort (run_abort_requested): once it is
	// set, the run's end is run_error{aborted}, after a restart too.
	Abort *messages.RunAbortRequestedPayload

	// Graph is the run's plan (nil before plan_proposed or run_rewound).
	Graph         *Graph
	CostEstimated bool
	GateDecided   bool // plan_approved or plan_rejected (or a rewind)
	Rejected      bool
	// Replanning: the plan was rejected and the director plans again
	// (plan_rejected.replanning); replan_attempt follows.
	Replanning bool
	// Replans counts replan_attempt: the director's current plan is its
	// (Replans+1)-th, on the lane DirectorStreamOf(Replans+1).
	Replans int
	// Rejection is the reason of the last rejected plan, and RejectedPlan
	// that plan: what a re-planning director is told.
	Rejection    string
	RejectedPlan *messages.Plan
	// LaneFailed is set once the director or the run's synthesiser failed.
	LaneFailed string

	Usage messages.Usage
	// UsageByModel is Usage per model (token_usage's model): what the
	// run's spend is priced from (package budget).
	UsageByModel map[string]messages.Usage
	// CostUSD adds up token_usage's cost_usd; Unpriced names the first
	// model whose turns had none (CostUSD then leaves them out).
	CostUSD float64
	// FilesBytes adds up the file events' sizes: what the run's agents
	// wrote (the terminal event's files_bytes).
	FilesBytes int64
	Unpriced   string
	Citations  []messages.Citation // citation_added, in order
	Lanes      map[messages.StreamID]*Lane
	Interrupts map[string]*Interrupt
	Steering   map[string]*Note

	graphs  map[messages.StreamID]*Graph  // by graph lane: "run", "node:T", …
	debates map[messages.StreamID]*Debate // by the debate node's lane
	// outline: lanes are tracked open or closed, without what their agents
	// streamed, and nodes and debate turns without their outputs
	// (NewOutline).
	outline bool
}

// withoutFileData is a copy of p whose files have no bytes.
func withoutFileData(p *messages.RunStartedPayload) *messages.RunStartedPayload {
	c := *p
	c.Files = make([]messages.RunFile, len(p.Files))
	for i, f := range p.Files {
		f.Data = nil
		c.Files[i] = f
	}
	return &c
}

// New returns the state of a run before its first event.
func New(id messages.RunID) *Run {
	// The maps are made on their first entry (put): a parked run's state
	// is mostly empty, and a run has two (its supervisor's, the index's).
	return &Run{ID: id}
}

// put sets m[k] = v, making m on its first entry.
func put[K comparable, V any](m *map[K]V, k K, v V) {
	if *m == nil {
		*m = make(map[K]V)
	}
	(*m)[k] = v
}

// NewOutline returns the state of a run before its first event, for
// readers that need its shape and progress but not what its agents
// wrote: lanes' contents (text, tool calls and results), node outputs and
// citations, debate transcripts — which the supervisor and recovery read.
// The run index keeps one per live run.
func NewOutline(id messages.RunID) *Run {
	r := New(id)
	r.outline = true
	return r
}

// GraphOf returns the graph whose lane is stream (the run's: "run"; a
// team's: its node's lane), if it exists.
func (r *Run) GraphOf(stream messages.StreamID) *Graph { return r.graphs[stream] }

// Split moves the graph of a running team (whose lane is stream) out of
// r into a state of its own, with everything open inside the team: its
// nested lanes, interrupts (the team's node gates and its agents'),
// nested teams and debates. The team's supervisor goes on from the new
// state, r's from what is left, each applying its own events. It returns
// nil if r has no such graph.
func (r *Run) Split(stream messages.StreamID) *Run {
	g := r.graphs[stream]
	if g == nil {
		return nil
	}
	s := New(r.ID)
	s.Tenant, s.Started, s.StartedAt = r.Tenant, r.Started, r.StartedAt
	parent := map[messages.StreamID]messages.StreamID{} // every open lane's parent
	for id, l := range r.Lanes {
		parent[id] = l.Lane.ParentStreamID
	}
	for id, x := range r.graphs {
		parent[id] = x.Lane.ParentStreamID
	}
	for id, d := range r.debates {
		parent[id] = d.Lane.ParentStreamID
	}
	inside := func(id messages.StreamID) bool { // strictly below stream
		for seen := 0; seen <= len(parent); seen++ {
			p, ok := parent[id]
			if !ok {
				return false
			}
			if p == stream {
				return true
			}
			id = p
		}
		return false
	}
	for id, l := range r.Lanes {
		if inside(id) {
			put(&s.Lanes, id, l)
			delete(r.Lanes, id)
		}
	}
	for id, in := range r.Interrupts {
		if in.Lane.StreamID == stream || inside(in.Lane.StreamID) {
			put(&s.Interrupts, id, in)
			delete(r.Interrupts, id)
		}
	}
	for id, x := range r.graphs {
		if id == stream || inside(id) {
			put(&s.graphs, id, x)
			delete(r.graphs, id)
		}
	}
	for id, d := range r.debates {
		if inside(id) {
			put(&s.debates, id, d)
			delete(r.debates, id)
		}
	}
	return s
}

// Failing reports whether the run is ending: a node of its graph failed
// or was cancelled.
func (r *Run) Failing() bool { return r.Graph != nil && r.Graph.Failing }

// Apply folds one event of the run (env.RunID must be r.ID).
func (r *Run) Apply(env *messages.Envelope) {
	r.LastSeq, r.UpdatedAt = env.Seq, env.Timestamp
	r.Events++
	stream := env.Lane.StreamID
	lane := r.Lanes[stream]
	if r.outline {
		lane = nil // contents are not kept; opening and closing lanes is
	}
	switch p := env.Payload.(type) {
	case *messages.RunStartedPayload:
		if r.outline && len(p.Files) > 0 {
			p = withoutFileData(p) // an outline keeps what the files are, not their bytes (up to 1 MiB a run)
		}
		r.Started, r.StartedAt, r.Tenant = p, env.Timestamp, p.Tenant
	case *messages.RunFinishedPayload, *messages.RunErrorPayload:
		r.Ended, r.End, r.EndedAt = true, p, env.Timestamp
	case *messages.RunAbortRequestedPayload:
		r.Abort = p
	case *messages.RunRewoundPayload:
		r.Rewound = p
		r.setGraph(env.Lane, p.Plan, p.Waves)
		r.GateDecided = true
		r.Graph.Wave, r.Graph.WaveDone = p.Wave-1, true // the next wave to run is p.Wave
		for _, n := range p.Reused {
			rn := r.Graph.Node(n.NodeID)
			rn.State, rn.Output = Completed, n.Output
		}

	// Lanes of agents.
	case *messages.PlanningStartedPayload, *messages.SubagentStartedPayload:
		r.open(env)
		if _, ok := p.(*messages.SubagentStartedPayload); ok {
			if parent := r.Lanes[env.Lane.ParentStreamID]; parent != nil {
				parent.SubSeq++
			}
		}
	case *messages.SubagentFinishedPayload:
		delete(r.Lanes, stream)
	case *messages.PlanProposedPayload:
		r.setGraph(messages.RunLane(), p.Plan, p.Waves)
		delete(r.Lanes, stream)
	case *messages.PlanningFailedPayload:
		r.LaneFailed = "planning failed: " + p.Error
		delete(r.Lanes, stream)
	case *messages.AgentRestartedPayload:
		if lane != nil {
			sub, task, tctx := lane.SubSeq, lane.RemoteTask, lane.RemoteContext
			*lane = Lane{Lane: lane.Lane, AgentID: lane.AgentID, Attempts: p.Attempt, SubSeq: sub, RemoteTask: task, RemoteContext: tctx}
		}
	case *messages.RemoteTaskPayload:
		if lane != nil && lane.RemoteTask == "" {
			lane.RemoteTask, lane.RemoteContext = p.TaskID, p.ContextID
		}
	case *messages.TextDeltaPayload:
		if lane != nil {
			lane.Text.WriteString(p.Delta)
		}
	case *messages.FilePayload:
		r.FilesBytes += p.Size
	case *messages.TokenUsagePayload:
		r.Usage = r.Usage.Add(p.Usage)
		put(&r.UsageByModel, p.Model, r.UsageByModel[p.Model].Add(p.Usage))
		if p.CostUSD != nil {
			r.CostUSD += *p.CostUSD
		} else if r.Unpriced == "" {
			r.Unpriced = p.Model
		}
		if lane != nil && p.Role == "" { // an advisor's usage is not a turn of the lane's agent
			lane.Usage = lane.Usage.Add(p.Usage)
			lane.Turn = p.Turn
			lane.Calls, lane.CallIDs, lane.Results, lane.Errs = nil, nil, nil, nil // the next calls are this turn's
		}
	case *messages.ToolCallStartedPayload:
		if lane != nil {
			base, _, _ := strings.Cut(p.CallID, "#")
			lane.Calls = append(lane.Calls, model.ToolCall{ID: base, Name: p.Tool, Args: json.RawMessage(p.Args)})
			lane.CallIDs = append(lane.CallIDs, p.CallID)
		}
	case *messages.ToolCallFinishedPayload:
		if lane != nil {
			if lane.Results == nil {
				lane.Results, lane.Errs = map[string]*string{}, map[string]bool{}
			}
			res := p.Result
			lane.Results[p.CallID] = &res
			lane.Errs[p.CallID] = p.IsError
		}

	// The plan gate.
	case *messages.RunCostEstimatePayload:
		r.CostEstimated = true
	case *messages.PlanApprovedPayload:
		r.GateDecided = true
		if p.Plan != nil {
			r.setGraph(messages.RunLane(), *p.Plan, p.Waves)
		}
	case *messages.PlanRejectedPayload:
		r.GateDecided, r.Rejected, r.Replanning = true, true, p.Replanning
		r.Rejection = p.Reason
		if r.Graph != nil {
			plan := r.Graph.Plan.Clone()
			r.RejectedPlan = &plan
		}
	case *messages.ReplanAttemptPayload:
		// The director plans again: no plan until its plan_proposed.
		r.Replans, r.Replanning = p.Attempt, false
		r.GateDecided, r.Rejected, r.CostEstimated = false, false, false
		r.Graph = nil
		delete(r.graphs, messages.RunStream)

	// Graphs: waves and nodes.
	case *messages.WaveStartedPayload:
		if g := r.graphs[stream]; g != nil {
			g.Wave, g.WaveDone = p.Wave, false
		}
	case *messages.WaveCompletedPayload:
		if g := r.graphs[stream]; g != nil {
			g.WaveDone = true
		}
	case *messages.NodeStartedPayload:
		r.open(env)
		if g := r.graphs[env.Lane.ParentStreamID]; g != nil {
			n := g.Node(p.NodeID)
			n.State = Running
			if p.Kind == messages.KindDebate {
				n.Debate = &Debate{Lane: env.Lane}
				put(&r.debates, stream, n.Debate)
			}
		}
	case *messages.TeamStartedPayload:
		g := newGraph(env.Lane, p.TeamID, p.Plan, p.Waves)
		put(&r.graphs, stream, g)
		if parent := r.graphs[env.Lane.ParentStreamID]; parent != nil {
			parent.Node(p.TeamID).Team = g
		}
	case *messages.TeamSynthesizedPayload:
		if g := r.graphs[stream]; g != nil {
			g.Synthesized = true
		}
	case *messages.NodeCompletedPayload:
		delete(r.Lanes, stream)
		if n := r.node(env); n != nil {
			n.State, n.Spawn = Completed, p.Spawn
			if !r.outline {
				n.Output, n.Cites = p.Output, p.Citations
			}
		}
		r.closeNode(stream)
	case *messages.NodeFailedPayload:
		delete(r.Lanes, stream)
		if n := r.node(env); n != nil {
			n.State = Failed
		}
		if g := r.graphs[env.Lane.ParentStreamID]; g != nil {
			g.Failing, g.FailMsg = true, "node "+p.NodeID+" failed: "+p.Error
		}
		r.closeNode(stream)
	case *messages.NodeCancelledPayload:
		delete(r.Lanes, stream)
		if n := r.node(env); n != nil {
			n.State = Cancelled
		}
		if g := r.graphs[env.Lane.ParentStreamID]; g != nil {
			g.Failing = true
			if g.FailMsg == "" {
				g.FailMsg = p.Reason
			}
		}
		r.closeNode(stream)
	case *messages.NodeSkippedPayload:
		if n := r.node(env); n != nil {
			n.State = Skipped
		}
	case *messages.SubteamSpawnedPayload:
		if g := r.graphs[stream]; g != nil {
			g.setPlan(p.Plan, p.Waves)
			if n := g.Nodes[p.ParentNodeID]; n != nil {
				n.Spawn, n.SpawnApproved = nil, false
			}
		}

	// Synthesisers: the run's, a team's, a debate's.
	case *messages.SynthesisStartedPayload:
		r.open(env)
		if s := r.synthesis(env.Lane); s != nil {
			s.Started = true
		}
		if d := r.debates[env.Lane.ParentStreamID]; d != nil {
			d.Open = &DebateSub{Lane: env.Lane, Kind: env.Type}
		}
	case *messages.SynthesisCompletedPayload:
		delete(r.Lanes, stream)
		if s := r.synthesis(env.Lane); s != nil {
			answer := p.Answer
			s.Answer = &answer
		}
		r.closeDebateSub(env.Lane)
	case *messages.SynthesisFailedPayload:
		delete(r.Lanes, stream)
		if s := r.synthesis(env.Lane); s != nil {
			s.Failed = p.Error
		}
		if stream == messages.SynthesisStream {
			r.LaneFailed = "synthesis failed: " + p.Error
		}
		r.closeDebateSub(env.Lane)

	// Debates.
	case *messages.DebateRoundStartedPayload:
		if d := r.debates[stream]; d != nil {
			d.Round, d.Attempt = p.Round, 1
		}
	case *messages.DebateRoundRestartedPayload:
		// The round starts again: its turns and its judge so far count for nothing.
		if d := r.debates[stream]; d != nil {
			d.Attempt, d.Open = p.Attempt, nil
			d.Restarts++
			d.Turns = slices.DeleteFunc(d.Turns, func(t Turn) bool { return t.Round == p.Round })
			if d.Judged != nil && d.Judged.Round == p.Round {
				d.Judged = nil
			}
		}
	case *messages.DebateRoundCompactedPayload:
		if d := r.debates[stream]; d != nil {
			d.Compacted = p.Round
		}
	case *messages.DebateTurnStartedPayload:
		if d := r.debates[env.Lane.ParentStreamID]; d != nil {
			d.Open = &DebateSub{Lane: env.Lane, Kind: env.Type, Round: p.Round, Agent: p.AgentID}
		}
	case *messages.DebateTurnCompletedPayload:
		if d := r.debates[env.Lane.ParentStreamID]; d != nil {
			if !p.Cancelled && !p.Restarted && !r.outline {
				d.Turns = append(d.Turns, Turn{Round: p.Round, Agent: p.AgentID, Text: p.Text, Stance: p.Stance})
			}
			d.Open = nil
		}
	case *messages.DebateJudgeStartedPayload:
		if d := r.debates[env.Lane.ParentStreamID]; d != nil {
			d.Open = &DebateSub{Lane: env.Lane, Kind: env.Type, Round: p.Round}
		}
	case *messages.DebateJudgeSummaryPayload:
		if d := r.debates[env.Lane.ParentStreamID]; d != nil {
			if !p.Cancelled && !p.Restarted {
				d.Judged = p
			}
			d.Open = nil
		}
	case *messages.DebateStanceMapPayload:
		if d := r.debates[stream]; d != nil {
			d.StanceMap = p
		}

	// Steering, citations, interrupts.
	case *messages.SteeringReceivedPayload:
		put(&r.Steering, p.SteeringID, &Note{Received: p, Lane: env.Lane, AgentID: env.AgentID, Seq: env.Seq})
	case *messages.SteeringAppliedPayload:
		delete(r.Steering, p.SteeringID)
		r.setGraph(messages.RunLane(), p.Plan, p.Waves)
	case *messages.SteeringRejectedPayload:
		delete(r.Steering, p.SteeringID)
	case *messages.CitationAddedPayload:
		r.Citations = append(r.Citations, p.Citation)
	case *messages.InterruptRaisedPayload:
		exp := p.ExpiresAt
		if exp.IsZero() {
			exp = env.Timestamp.Add(time.Duration(p.TimeoutSeconds) * time.Second)
		}
		put(&r.Interrupts, p.InterruptID, &Interrupt{Raised: p, Seq: env.Seq, Lane: env.Lane, AgentID: env.AgentID, RaisedAt: env.Timestamp, ExpiresAt: exp})
	case *messages.ApprovalSignatureAddedPayload:
		if in := r.Interrupts[p.InterruptID]; in != nil {
			in.Signatures = append(in.Signatures, p)
		}
	case *messages.InterruptResolvedPayload:
		r.spawnDecided(p.InterruptID, p.Decision)
		delete(r.Interrupts, p.InterruptID)
	case *messages.InterruptExpiredPayload:
		r.spawnDecided(p.InterruptID, p.Action)
		delete(r.Interrupts, p.InterruptID)
	}
}

// spawnDecided applies the decision of a spawn gate to the node whose
// sub-team it was about: approved, it waits for its subteam_spawned; any
// other decision drops the request, so that it is not asked again.
func (r *Run) spawnDecided(id string, d messages.Decision) {
	in := r.Interrupts[id]
	if in == nil || in.Raised.Kind != messages.InterruptSpawnApproval {
		return
	}
	g := r.graphs[in.Lane.StreamID]
	if g == nil {
		return
	}
	if n := g.Nodes[in.Raised.NodeID]; n != nil && n.Spawn != nil {
		if d == messages.DecisionApprove {
			n.SpawnApproved = true
		} else {
			n.Spawn = nil
		}
	}
}

// open records an agent lane that opened (attempt 1).
func (r *Run) open(env *messages.Envelope) {
	put(&r.Lanes, env.Lane.StreamID, &Lane{Lane: env.Lane, AgentID: env.AgentID, Attempts: 1})
}

// setGraph sets (or replaces) the run's graph, keeping the progress of
// every node that is still in the plan.
func (r *Run) setGraph(lane messages.Lane, plan messages.Plan, waves [][]string) {
	if r.Graph == nil {
		r.Graph = newGraph(lane, "", plan, waves)
		put(&r.graphs, lane.StreamID, r.Graph)
		return
	}
	r.Graph.setPlan(plan, waves)
}

// node is the plan node a node event (on the node's own lane) is about.
func (r *Run) node(env *messages.Envelope) *Node {
	g := r.graphs[env.Lane.ParentStreamID]
	if g == nil {
		return nil
	}
	ps := messages.ParseStreamID(env.Lane.StreamID)
	if ps.Kind != messages.LaneNode {
		return nil
	}
	return g.Node(ps.NodeID)
}

// closeNode forgets what a closed team or debate node kept open.
func (r *Run) closeNode(stream messages.StreamID) {
	delete(r.debates, stream)
}

// synthesis is the synthesiser state a synthesis lane belongs to.
func (r *Run) synthesis(lane messages.Lane) *Synthesis {
	if d := r.debates[lane.ParentStreamID]; d != nil {
		return &d.Synthesis
	}
	if lane.StreamID == messages.SynthesisStream {
		if r.Graph != nil {
			return &r.Graph.Synthesis
		}
		return nil
	}
	if g := r.graphs[lane.ParentStreamID]; g != nil && g.Team != "" {
		return &g.Synthesis
	}
	return nil
}

// closeDebateSub closes a debate's open synthesis lane.
func (r *Run) closeDebateSub(lane messages.Lane) {
	if d := r.debates[lane.ParentStreamID]; d != nil && d.Open != nil && d.Open.Lane.StreamID == lane.StreamID {
		d.Open = nil
	}
}

// InterruptOn returns the pending interrupt raised on a lane, if any.
func (r *Run) InterruptOn(lane messages.StreamID) *Interrupt {
	for _, in := range r.Interrupts {
		if in.Lane.StreamID == lane {
			return in
		}
	}
	return nil
}

// PendingGate returns the pending interrupt of kind about node nodeID ("":
// none) raised on the lane of the graph whose lane is graph (plan, node
// and spawn approvals), if any.
func (r *Run) PendingGate(kind messages.InterruptKind, nodeID string, graph messages.StreamID) *Interrupt {
	for _, in := range r.Interrupts {
		if in.Raised.Kind == kind && in.Raised.NodeID == nodeID && in.Lane.StreamID == graph {
			return in
		}
	}
	return nil
}

// Parked reports whether everything the run does waits on a human: it has
// pending interrupts, and every agent lane it has open is parked on one of
// them. Such a run can be put to sleep and rebuilt from its events later,
// as recovery after a restart rebuilds it, with nothing lost and nothing
// published twice: parked agents come back parked on the same interrupts.
// Runs that recovery would not give back exactly are never parked in this
// sense: a working agent (it would restart), a sub-agent (recovery closes
// it), a steering note (one being translated is rejected), a running team
// or debate node (their nested supervisors), and a run that is ending.
func (r *Run) Parked() bool {
	if r.Ended || r.Abort != nil || r.Failing() || r.LaneFailed != "" || r.Replanning ||
		len(r.Interrupts) == 0 || len(r.Steering) > 0 {
		return false
	}
	for id := range r.Lanes {
		if messages.ParseStreamID(id).Kind == messages.LaneSubagent || r.InterruptOn(id) == nil {
			return false
		}
	}
	for _, in := range r.Interrupts {
		if messages.ParseStreamID(in.Lane.StreamID).Kind == messages.LaneSubagent {
			return false
		}
	}
	if r.Graph != nil {
		for _, n := range r.Graph.Nodes {
			if n.State == Running && (n.Team != nil || n.Debate != nil) {
				return false
			}
		}
	}
	return true
}
