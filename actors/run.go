package actors

import (
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/conclave-ai/conclave/actors/citations"
	"github.com/conclave-ai/conclave/actors/dag"
	"github.com/conclave-ai/conclave/actors/runstate"
	"github.com/conclave-ai/conclave/internal/regress"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/model"
)

const (
	supervisorAgentID  = "supervisor"
	synthesizerAgentID = "synthesizer"
	steeringAgentID    = "steering"
)

// runSpec is everything a run supervisor needs, fixed at StartRun.
type runSpec struct {
	tenant      messages.TenantID
	runID       messages.RunID
	session     messages.SessionID
	question    string
	hitl        messages.HITLMode
	scenario    *messages.Scenario // for run_started; the model already embodies it
	concurrency int
	model       model.Model
	// approvalTimeout and timeoutAction apply to every interrupt of the run.
	approvalTimeout time.Duration
	timeoutAction   messages.Decision
	// advisor, when set, gates every worker's terminating turn, or in
	// consult mode answers the workers' consult_advisor calls.
	advisor *messages.AdvisorOptions
	// maxDelegationRounds is the delegation soft cap.
	maxDelegationRounds int
	// maxReplans is how many times a rejected plan is planned again.
	maxReplans int
	// requestID names the request that started the run (RunIdentity).
	requestID string
	// traceParent and traceID: the run's trace (RunStartedPayload).
	traceParent string
	traceID     string
	// budget is the run's spend budget (nil: none): the one it asked for,
	// else its tenant's per-run quotas (spend.go); run_started records it.
	budget *messages.RunBudget
	// files are the files the run started with (run_started records
	// them): every agent spawned with the question is given them.
	files []messages.RunFile
	// supervision is how the run's agents are supervised per role (the
	// request's choice over the server's); run_started records it.
	supervision *messages.Supervision
	// rewind is set for a run created by Engine.Rewind.
	rewind *messages.RunRewoundPayload
	// out carries every event of the run to hub (outbox.go).
	out *outbox
	// outcome is how the run ends, decided once (outcome.go).
	outcome outcome
}

// newRunSpec is the spec of run id with options o, driven by model m.
func newRunSpec(id messages.RunID, o messages.RunOptions, m model.Model) *runSpec {
	sc := o.Scenario
	return &runSpec{
		tenant: o.Tenant, runID: id, session: o.SessionID, question: o.Question, hitl: o.HITL, scenario: &sc,
		concurrency: o.Concurrency, model: m, approvalTimeout: o.ApprovalTimeout, timeoutAction: o.ApprovalTimeoutAction,
		advisor: o.Advisor, maxDelegationRounds: o.MaxDelegationRounds, maxReplans: o.MaxReplans,
		requestID: o.RequestID, traceParent: o.TraceParent, traceID: o.TraceID, budget: o.Budget, files: o.Files,
		supervision: o.Supervision,
	}
}

// consultMode reports whether the run's advisor is in consult mode.
func (s *runSpec) consultMode() bool {
	return s.advisor != nil && s.advisor.Mode == messages.AdvisorModeConsult
}

// identity is what the run's terminal event says of whose run it was.
func (s *runSpec) identity() messages.RunIdentity {
	return messages.RunIdentity{RequestID: s.requestID, TenantID: s.tenant, ConversationID: s.session}
}

// post sends an event of the run from an actor (see outbox).
func (s *runSpec) post(ctx actor.SenderContext, agentID string, lane messages.Lane, p messages.Payload) {
	s.out.post(ctx, &messages.Emit{RunID: s.runID, AgentID: agentID, Lane: lane, Payload: p})
}

type runPhase int

const (
	phasePlanning runPhase = iota + 1
	phaseExecuting
	phaseSynthesizing
)

// child is a live agent of the run.
type child struct {
	pid      *actor.PID
	agentID  string
	lane     messages.Lane // the lane it closes
	role     model.Role
	shared   *agentShared
	reported bool // sent AgentDone
	stopping bool // the supervisor asked it to stop
	// steeringID is the note a steerer agent translates.
	steeringID string
	// order is when the supervisor started it (childrenInOrder).
	order uint64
}

// runActor supervises one run: it asks the director for a plan, runs the
// plan's waves (ready nodes in id order, at most spec.concurrency at once),
// then the synthesiser, and emits the run's lifecycle events. It is the
// only emitter of run-lane events, and it emits the terminal event only
// after every agent of the run has stopped, so the terminal event is
// always the run's last. The same type supervises a team node's nested
// plan (team.go). Its parts: graph runs the waves, the same for a run and
// a team; agents holds and spawns its children; planner (the director and
// the plan gate) and steering are what only a run does. What stays here is
// the actor itself: its messages, the events it applies, reports and
// deaths of its children, and ending the run (with ending.go).
type runActor struct {
	e     *Engine
	spec  *runSpec
	ended *atomic.Bool
	start time.Time
	phase runPhase

	// st is the run's state as the events this supervisor emits, and the
	// closing events its agents report, define it (runstate: the same
	// reducer recovery folds the journal through); g is the graph it runs
	// in st (the run's plan, or its team's), nil before the plan. Both
	// change only by applying events (apply). Its lanes and interrupts are
	// only those of the events it applies (the agents' own events go to
	// the hub, not here): recovery's fold of the journal has all of them.
	st *runstate.Run
	g  *runstate.Graph

	graph *graphRunner // the waves of the graph (shared by a run and a team)

	agents  *agentSet   // the live agents it started (children)
	planner *runPlanner // the director, the plan gate, re-plans (run only)
	usage   messages.Usage

	failCode messages.ErrorCode // set once the run is failing
	failMsg  string
	failDep  string // the node whose failure fails the run

	terminal messages.Payload // decided; emitted once every child has stopped
	parked   *parking         // the plan gate, while a human decides
	replay   *restoredRun     // set for a run rebuilt after a restart
	freezing bool             // stopping for a later resume: nothing more happens

	team     *teamScope        // set when this supervises a team node's nested plan
	steering *runSteering      // notes waiting for the next wave boundary (run level)
	cites    citations.Manager // the run's sources (run level)

	end ending // the ending of a failing graph (ending.go)
}

// watchBudget makes the run end with budget_exceeded once its outbox
// counts more events, tokens or cost than its budgets, and warns on its
// lane (budget_near) when a spend budget is near.
func (r *runActor) watchBudget(ctx actor.Context) {
	self, root := ctx.Self(), r.e.system.Root
	r.spec.out.onNear(func(why string) { root.Send(self, &budgetNear{why: why}) })
	r.spec.out.onOver(func(stop *messages.StopRun) { root.Send(self, stop) })
}

// budgetNear: the run's spend is near a budget (watchBudget).
type budgetNear struct{ why string }

// maybeFreeze stops a freezing supervisor once its agents have stopped.
func (r *runActor) maybeFreeze(ctx actor.Context) {
	if r.freezing && len(r.agents.byPID) == 0 {
		ctx.Stop(ctx.Self())
	}
}

// sendablePID returns a copy of pid to keep and send to. protoactor caches
// the target's process on the PID object a send goes through, and a parent
// keeps each child's spawn-time PID in a PIDSet whose Remove leaves the
// removed element in the slice's spare capacity. Sending only through
// copies keeps that stale element a bare PID instead of a reference to the
// whole stopped actor (TestEngine_StoppedAgentsAreFreed).
func sendablePID(pid *actor.PID) *actor.PID { return actor.NewPID(pid.Address, pid.Id) }

// forgetProcess drops what pid, a stopped actor's own PID object, caches
// of that actor. protoactor's PID caches the process it last reached, and
// the parent's set of children keeps removed PIDs in its spare capacity
// (PIDSet.Remove shrinks the slice without clearing it): through them a
// stopped actor, and all it held, stays reachable until the PID is used
// again. A send through pid is that use: it finds the process dead,
// clears the cache and goes to the dead letters, unlogged (released).
// Found with runs falling asleep: 100,000 stopped supervisors stayed in
// memory through the engine's set of children.
func forgetProcess(ctx actor.SenderContext, pid *actor.PID) { ctx.Send(pid, released{}) }

// released is what forgetProcess sends; dead letters do not log it.
type released struct{}

func (released) IgnoreDeadLetterLogging() {}

// testHookSpawned, when set by a test, sees every agent spawned;
// testHookRunSpawned every run supervisor's spec.
var (
	testHookSpawned    func(*agentSpec)
	testHookRunSpawned func(*runSpec)
)

func (r *runActor) target() interruptTarget {
	return interruptTarget{e: r.e, run: r.spec, agent: r.selfAgentID(), lane: r.base(), parked: &r.parked}
}

// base is the lane of the graph this supervisor runs: the run lane, or the
// team node's lane.
func (r *runActor) base() messages.Lane {
	if r.team != nil {
		return r.team.lane
	}
	return messages.RunLane()
}

// selfAgentID is the agent id of the supervisor's own events.
func (r *runActor) selfAgentID() string {
	if r.team != nil {
		return r.team.node.ID
	}
	return supervisorAgentID
}

// nodeLane is the lane of node id of this supervisor's graph.
func (r *runActor) nodeLane(id string) messages.Lane { return r.base().Child(messages.NodeStream(id)) }

// synthesisLane is the lane of this graph's synthesiser.
func (r *runActor) synthesisLane() messages.Lane {
	if r.team != nil {
		return r.base().Child(messages.SynthesisStreamOf(r.team.node.ID))
	}
	return messages.RunLane().Child(messages.SynthesisStream)
}

func newRunActor(e *Engine, spec *runSpec, ended *atomic.Bool) *runActor {
	r := &runActor{e: e, spec: spec, ended: ended, st: runstate.New(spec.runID),
		end: ending{pace: newPacer(endingBatch, endingInFlight)}}
	r.graph = &graphRunner{r: r}
	r.agents = &agentSet{r: r, byPID: map[string]*child{}}
	r.planner = &runPlanner{r: r}
	r.steering = &runSteering{r: r}
	return r
}

// agentSet is a supervisor's live children (agents, team and debate
// actors), by PID id, and how they are spawned: each gets the run's
// question and files, its role's supervision policy and its start order
// (childrenInOrder).
type agentSet struct {
	r *runActor

	byPID   map[string]*child // by PID id
	spawned uint64            // children started so far (child.order)
}

// graphRunner runs the waves of the graph a supervisor runs, the same way
// for a run and for a team: the wave queue and the concurrency limit, the
// node gates' and dependencies' skips, the nodes it starts (workers, teams,
// debates), the wave boundaries with their sub-team requests and spawn
// gates, and putting a graph back after a restart (resumeGraph). What only
// a run does (planning, the plan gate, steering, the run's end) stays on
// runActor and its other parts.
type graphRunner struct {
	r *runActor

	queue   []string // nodes of the current wave not started yet (scheduling)
	running int      // node agents started and not reported

	spawns []spawnAsk // sub-team requests of the current wave's workers

	atBoundary bool // between waves (boundary.go)
	nextWave   int  // the wave the boundary leads to
}

func (r *runActor) emit(ctx actor.Context, p messages.Payload) {
	r.emitFor(ctx, r.selfAgentID(), r.base(), p)
}

// emitFor emits on a node's lane on the node's behalf (skipped, or closing
// the lane of a node that died without reporting).
func (r *runActor) emitFor(ctx actor.Context, agentID string, lane messages.Lane, p messages.Payload) {
	r.spec.post(ctx, agentID, lane, p)
	r.apply(agentID, lane, p)
}

// apply folds an event of the run into the supervisor's state: one it
// emitted, or the closing event an agent reported.
func (r *runActor) apply(agentID string, lane messages.Lane, p messages.Payload) {
	r.st.Apply(&messages.Envelope{Type: p.EventType(), RunID: r.spec.runID, AgentID: agentID, Lane: lane, Payload: p})
	if r.g == nil {
		r.g = r.st.GraphOf(r.base().StreamID)
	}
	if h := testHookApplied.Load(); h != nil {
		(*h)(r.spec.runID, r.base().StreamID, p, r.g)
	}
}

// testHookApplied, when set by a test, sees every event a supervisor
// applies, with its graph right after (the fold property test).
var testHookApplied atomic.Pointer[func(run messages.RunID, graph messages.StreamID, p messages.Payload, g *runstate.Graph)]

func (r *runActor) Receive(ctx actor.Context) {
	if r.spec.out.silent() { // falling asleep (asleep.go): it stops without a word or a decision
		if _, ok := ctx.Message().(*actor.Stopping); ok {
			r.target().cancelParked(ctx)
		}
		return
	}
	if r.freezing { // only the agents' ends matter now
		if t, ok := ctx.Message().(*actor.Terminated); ok {
			r.childTerminated(ctx, t.Who)
		}
		return
	}
	switch m := ctx.Message().(type) {
	case *actor.Started:
		if r.team != nil {
			if r.team.restore != nil {
				r.resumeTeam(ctx)
			} else {
				r.startTeam(ctx)
			}
			return
		}
		if r.replay != nil {
			r.resume(ctx)
			return
		}
		r.watchBudget(ctx)
		r.start = r.e.cfg.Now()
		// A copy: &r.spec.maxReplans would keep the whole spec (its model,
		// its outbox) alive for as long as anyone keeps the payload (the
		// run index keeps it while the run lives, asleep too).
		maxReplans := r.spec.maxReplans
		started := &messages.RunStartedPayload{Question: r.spec.question, HITL: r.spec.hitl, Scenario: r.spec.scenario, Tenant: r.spec.tenant,
			Concurrency: r.spec.concurrency, ApprovalTimeoutSeconds: int(r.spec.approvalTimeout / time.Second), ApprovalTimeoutAction: r.spec.timeoutAction,
			Advisor: r.spec.advisor, MaxDelegationRounds: r.spec.maxDelegationRounds, MaxReplans: &maxReplans,
			RequestID: r.spec.requestID, TraceID: r.spec.traceID, TraceParent: r.spec.traceParent, Budget: r.spec.budget,
			Files: r.spec.files, Supervision: r.spec.supervision}
		if rw := r.spec.rewind; rw != nil {
			started.RewindOf = &messages.RewindOf{RunID: rw.From, Wave: rw.Wave, Note: rw.Note}
			r.emit(ctx, started)
			r.emit(ctx, messages.NewRequestReceived(r.spec.tenant, r.spec.question))
			r.planner.startRewound(ctx, rw)
			return
		}
		r.emit(ctx, started)
		r.emit(ctx, messages.NewRequestReceived(r.spec.tenant, r.spec.question))
		r.phase = phasePlanning
		r.planner.startDirector(ctx)
	case *messages.AgentDone:
		r.agentDone(ctx, m)
	case *actor.Terminated:
		r.childTerminated(ctx, m.Who)
	case *messages.StopRun:
		r.fail(ctx, m.Code, m.Reason)
	case *budgetNear:
		if _, decided := r.spec.outcome.decided(); !decided && r.failCode == "" {
			r.emit(ctx, messages.NewWarning(messages.WarnBudgetNear, m.why))
		}
	case *endingStep:
		r.endingStepped(ctx)
	case *freezeRun:
		// Stop the live agents and wait for them (their Terminated), then
		// stop: a supervisor that stopped with children still dying would
		// send them a second Stop.
		r.freezing = true
		for _, c := range r.agents.childrenInOrder() {
			if !c.stopping {
				c.stopping = true
				ctx.Stop(c.pid)
			}
		}
		r.maybeFreeze(ctx)
	case *gatePlan:
		// An end decided from outside (an abort) whose StopRun is still
		// queued behind this message: parking now would hold that StopRun
		// back until the gate expired, since the interrupt would be raised
		// after the abort cancelled the run's interrupts.
		if _, decided := r.spec.outcome.decided(); r.failCode == "" && !decided {
			r.planner.planGate(ctx)
		}
	case *messages.Steering:
		r.steering.steer(ctx, m)
	case *actor.Stopping:
		r.target().cancelParked(ctx)
		if r.team != nil {
			r.teamStopping(ctx)
		}
	}
}

func (k *agentSet) spawn(ctx actor.Context, role model.Role, agentID string, lane messages.Lane, req model.Request, node *nodeInfo) {
	k.spawnWith(ctx, role, agentID, lane, req, node, &agentShared{}, nil)
}

// spawnWith spawns an agent with given shared state; restore, when set,
// puts it back where it was parked before a restart.
func (k *agentSet) spawnWith(ctx actor.Context, role model.Role, agentID string, lane messages.Lane, req model.Request, node *nodeInfo, shared *agentShared, restore *agentRestore) {
	r := k.r
	if restore != nil {
		r.e.restoring.Add(1) // done when the agent is parked again (reattach)
	}
	k.spawnWithSpec(ctx, role, agentID, lane, req, &agentSpec{node: node, shared: shared, restore: restore})
}

// spawnWithSpec spawns an agent; spec holds the role-specific fields, the
// rest is filled in here.
func (k *agentSet) spawnWithSpec(ctx actor.Context, role model.Role, agentID string, lane messages.Lane, req model.Request, spec *agentSpec) {
	r := k.r
	req.Role, req.RunID, req.AgentID, req.Question, req.Files = role, r.spec.runID, agentID, r.spec.question, r.spec.files
	spec.e, spec.run, spec.role, spec.agentID, spec.lane, spec.req = r.e, r.spec, role, agentID, lane, req
	if spec.shared == nil {
		spec.shared = &agentShared{}
	}
	spec.policy = graphGroup{r}.policyOfRole(role)
	var inst *agentActor
	props := spec.e.props(func() actor.Actor { inst = &agentActor{spec: spec}; return inst },
		actor.WithSupervisor(subagentStrategy(&inst)), actor.WithMailbox(actor.UnboundedLockfree()))
	if testHookSpawned != nil {
		testHookSpawned(spec)
	}
	k.spawnChild(ctx, props, childName(role, agentID), &child{agentID: agentID, lane: lane, role: role, shared: spec.shared, steeringID: spec.steeringID})
}

func (r *runActor) agentDone(ctx actor.Context, m *messages.AgentDone) {
	if c := r.agents.byPID[ctx.Sender().Id]; c != nil {
		r.takeReport(ctx, c, m, true)
	}
}

// takeReport handles a child's report, once. alive is false when the
// child already terminated (its Terminated overtook its AgentDone).
func (r *runActor) takeReport(ctx actor.Context, c *child, m *messages.AgentDone, alive bool) {
	if c.reported {
		return
	}
	c.reported = true
	if alive && !c.stopping {
		c.stopping = true
		ctx.Stop(c.pid) // an idle, finished agent; its Terminated follows
	}
	r.usage = r.usage.Add(m.Usage)
	if m.Closing != nil {
		r.apply(c.agentID, c.lane, m.Closing)
	}
	switch c.role {
	case model.RoleDirector:
		if m.Err != nil {
			r.fail(ctx, messages.ErrCodePlanningFailed, m.Err.Error())
			return
		}
		if r.failCode != "" {
			return // aborted while planning
		}
		r.planner.emitCostEstimate(ctx)
		// Gate the plan on a message of our own: a parked actor keeps the
		// message it parked on (ReenterAfter restores it for the
		// continuation), and the director's report need not be kept.
		ctx.Send(ctx.Self(), &gatePlan{})
	case model.RoleWorker:
		r.graph.running--
		if m.Rejected {
			// A human rejected the node before it started: it never opened
			// its lane; its dependents will be skipped, the run goes on.
			r.graph.skip(ctx, c.agentID, m.Err.Error(), "")
			r.graph.advance(ctx)
			return
		}
		if m.Err != nil {
			r.failDep = c.agentID
			code := m.Code
			if code == "" {
				code = messages.ErrCodeNodeFailed
			}
			r.fail(ctx, code, fmt.Sprintf("node %s failed: %v", c.agentID, m.Err))
			return
		}
		if m.Spawn != nil {
			r.graph.spawns = append(r.graph.spawns, spawnAsk{parent: c.agentID, req: *m.Spawn})
		}
		r.graph.advance(ctx) // does nothing once the run is failing
	case model.RoleSteerer:
		r.steering.steeringTranslated(ctx, c, m)
	case model.RoleSynthesizer:
		switch {
		case r.failCode != "":
			// The run is already ending (e.g. aborted while the answer was
			// being written): the failure stands; maybeEndFailure ends it.
		case m.Err != nil:
			r.fail(ctx, messages.ErrCodeSynthesis, m.Err.Error())
		default:
			r.finish(ctx, &messages.RunFinishedPayload{Answer: m.Output, Citations: r.cites.List(), Sources: r.cites.RenderSources()})
		}
	}
}

// planGate approves the plan automatically, or (hitl plan and above) parks
// the supervisor on a plan_approval interrupt: approve, approve an edited
// plan (revise), or reject. An expired gate takes the run's timeout action.
func (pl *runPlanner) planGate(ctx actor.Context) {
	r := pl.r
	if !r.spec.hitl.Includes(messages.HITLPlan) {
		r.emit(ctx, &messages.PlanApprovedPayload{Automatic: true})
		r.phase = phaseExecuting
		r.graph.boundary(ctx, 0)
		return
	}
	plan := r.g.Plan.Clone() // the interrupt keeps it; the graph may change
	r.target().raiseInterrupt(ctx, &messages.InterruptRaisedPayload{Kind: messages.InterruptPlanApproval, Plan: &plan, Waves: r.g.Waves,
		Evidence: pl.planEvidence(r.e.cfg.NewID().String(), &plan, r.g.Waves)},
		func(res *messages.Resolution) { pl.planDecided(ctx, res) })
}

// planDecided applies the plan gate's outcome.
func (pl *runPlanner) planDecided(ctx actor.Context, res *messages.Resolution) {
	r := pl.r
	if r.failCode != "" {
		return
	}
	switch res.Decision {
	case messages.DecisionApprove:
		r.emit(ctx, &messages.PlanApprovedPayload{})
	case messages.DecisionRevise:
		p := res.Plan.Clone() // validated by the registry
		r.emit(ctx, &messages.PlanApprovedPayload{Edited: true, Plan: &p, Waves: dag.Waves(p)})
	default:
		reason := res.Reason
		if reason == "" {
			reason = res.Feedback
		}
		if res.Expired {
			reason = "plan approval timed out"
		}
		// A human's rejection is planned again, with its reason, while
		// max_replans allows; an expired gate is not: nobody is there to
		// review another plan.
		replan := !res.Expired && r.st.Replans < r.spec.maxReplans
		r.emit(ctx, &messages.PlanRejectedPayload{Reason: reason, Replanning: replan})
		if replan {
			pl.replan(ctx)
			return
		}
		r.fail(ctx, messages.ErrCodePlanRejected, "plan rejected: "+reason)
		return
	}
	r.phase = phaseExecuting
	r.graph.boundary(ctx, 0)
}

func (r *runActor) childTerminated(ctx actor.Context, who *actor.PID) {
	c := r.agents.byPID[who.Id]
	if c == nil {
		return
	}
	delete(r.agents.byPID, who.Id)
	if r.freezing {
		r.maybeFreeze(ctx)
		return
	}
	if d := c.shared.done.Load(); d != nil {
		r.takeReport(ctx, c, d, false) // no-op if its AgentDone came first
	} else if !c.reported {
		// The agent died without reporting: stopped by us, or by its
		// supervisor after too many panics. Close its lane for it.
		r.closeDeadLane(ctx, c)
	}
	switch {
	case r.terminal != nil:
		r.maybeEnd(ctx)
	case r.failCode != "":
		r.maybeEndFailure(ctx)
	case r.phase == phaseExecuting:
		r.graph.advance(ctx)
	}
}

func (r *runActor) closeDeadLane(ctx actor.Context, c *child) {
	reason := "stopped by the run supervisor"
	if !c.stopping {
		reason = fmt.Sprintf("panicked %d times, restart limit reached: %s", c.shared.attempts, c.shared.lastPanic)
		if k := childKind(c.pid); k != teamNamePrefix && k != debateNamePrefix && k != steerNamePrefix &&
			(graphGroup{r}).policyOfRole(c.role).Strategy == messages.SupervisionStop {
			reason = "panicked, not restarted (supervision stop): " + c.shared.lastPanic
		}
	}
	switch c.role {
	case model.RoleDirector:
		r.emitFor(ctx, c.agentID, c.lane, &messages.PlanningFailedPayload{Error: reason})
		if !c.stopping {
			r.fail(ctx, messages.ErrCodePlanningFailed, reason)
		}
	case model.RoleSteerer:
		if it := r.steering.queue.byID(c.steeringID); it != nil && it.translating {
			it.translating = false
			r.steering.rejectSteering(ctx, it, "translation stopped: "+reason)
			r.steering.queue.items = slices.DeleteFunc(r.steering.queue.items, func(x *steerItem) bool { return x == it })
			r.graph.continueBoundary(ctx)
		}
	case model.RoleSynthesizer:
		r.emitFor(ctx, c.agentID, r.synthesisLane(), &messages.SynthesisFailedPayload{Error: reason})
		if !c.stopping {
			r.fail(ctx, messages.ErrCodeSynthesis, reason)
		}
	case model.RoleWorker:
		r.graph.running--
		if !c.shared.opened {
			// Stopped (or crashed) while parked on its node gate: the lane
			// was never opened, so the node closes as skipped.
			if c.stopping {
				reason = "run ended before the node started: " + r.failMsg
			}
			r.graph.skip(ctx, c.agentID, reason, "")
			if !c.stopping {
				r.failDep = c.agentID
				r.fail(ctx, messages.ErrCodeNodeFailed, fmt.Sprintf("node %s failed before it started: %s", c.agentID, reason))
			}
			return
		}
		lane := r.nodeLane(c.agentID)
		if c.stopping {
			r.emitFor(ctx, c.agentID, lane, &messages.NodeCancelledPayload{NodeID: c.agentID, Reason: r.failMsg})
			return
		}
		r.emitFor(ctx, c.agentID, lane, &messages.NodeFailedPayload{NodeID: c.agentID, Error: reason, Attempts: c.shared.attempts, Panicked: true})
		r.failDep = c.agentID
		r.fail(ctx, messages.ErrCodeNodeFailed, fmt.Sprintf("node %s failed: %s", c.agentID, reason))
	}
}

func (w *graphRunner) startWave(ctx actor.Context, i int) {
	r := w.r
	if i == len(r.g.Waves) {
		if c := r.g.Counts(); c.Completed == 0 {
			// Nothing to synthesise from (every node was rejected, or
			// skipped): the run (or the team) fails instead of answering
			// from no input.
			r.fail(ctx, messages.ErrCodeNoNodesCompleted, fmt.Sprintf("no node of the plan completed (%d skipped, %d failed, %d cancelled)",
				c.Skipped, c.Failed, c.Cancelled))
			return
		}
		r.startSynthesis(ctx)
		return
	}
	w.queue = append(w.queue[:0], r.g.Waves[i]...)
	r.emit(ctx, &messages.WaveStartedPayload{Wave: i, NodeIDs: r.g.Waves[i], Team: r.teamID()})
	r.steering.injectScenarioSteering(ctx, i)
	w.advance(ctx)
}

// advance starts queued nodes up to the concurrency limit, and moves to the
// next wave once the current one is done.
func (w *graphRunner) advance(ctx actor.Context) {
	r := w.r
	if r.failCode != "" || r.terminal != nil {
		// A sibling that finished after the run started failing must not
		// start more nodes or the next wave.
		return
	}
	for w.running < r.spec.concurrency && len(w.queue) > 0 {
		id := w.queue[0]
		w.queue = w.queue[1:]
		if dep := w.incompleteDep(id); dep != "" {
			w.skip(ctx, id, "dependency "+dep+" did not complete", dep)
			continue
		}
		w.startNode(ctx, id)
	}
	if w.running == 0 && len(w.queue) == 0 && r.g.InWave() {
		w.completeWave(ctx)
		w.boundary(ctx, r.g.Wave+1)
	}
}

func (w *graphRunner) completeWave(ctx actor.Context) {
	r := w.r
	p := &messages.WaveCompletedPayload{Wave: r.g.Wave, Team: r.teamID()}
	for _, id := range r.g.Waves[r.g.Wave] {
		switch r.node(id).State {
		case runstate.Completed:
			p.Completed++
		case runstate.Failed:
			p.Failed++
		case runstate.Cancelled:
			p.Cancelled++
		case runstate.Skipped:
			p.Skipped++
		}
	}
	r.emit(ctx, p)
}

func (w *graphRunner) startNode(ctx actor.Context, id string) {
	w.startNodeWith(ctx, id, &agentShared{}, nil, nil)
}

// startNodeWith starts node id; restore puts a worker back on its pending
// interrupt, res a team or debate back where it was (recover.go).
func (w *graphRunner) startNodeWith(ctx actor.Context, id string, shared *agentShared, restore *agentRestore, res *nodeResume) {
	r := w.r
	n := r.planNode(id)
	inputs := make([]string, 0, len(n.Deps))
	if r.team != nil && len(n.Deps) == 0 {
		inputs = append(inputs, r.team.inputs...) // the team's own inputs reach its first nodes
	}
	for _, d := range n.Deps {
		inputs = append(inputs, fmt.Sprintf("[%s] %s", d, r.node(d).Output))
	}
	if rw := r.spec.rewind; rw != nil && rw.Note != "" {
		inputs = append(inputs, "[steering] "+rw.Note) // the rewind's note steers every node that runs again
	}
	w.running++
	info := &nodeInfo{node: n, wave: r.g.Wave, scope: r.base()}
	req := model.Request{Goal: n.Goal, Context: inputs, Tools: r.e.cfg.Tools.Defs(n.Tools)}
	if r.spec.consultMode() && !slices.Contains(n.Tools, model.ToolConsultAdvisor) {
		// In consult mode every worker may consult the advisor.
		req.Tools = append(req.Tools, r.e.cfg.Tools.Defs([]string{model.ToolConsultAdvisor})...)
	}
	if n.Role != "" {
		req.Goal = "As the " + n.Role + ": " + n.Goal // the node's specialist role reaches the model with its goal
	}
	switch {
	case n.IsTeam():
		w.spawnTeam(ctx, info, req, shared, res)
	case n.IsDebate():
		w.spawnDebate(ctx, info, req, shared, res)
	default:
		r.agents.spawnWith(ctx, model.RoleWorker, id, r.nodeLane(id), req, info, shared, restore)
	}
}

func (r *runActor) startSynthesis(ctx actor.Context) {
	r.startSynthesisWith(ctx, &agentShared{})
}

func (r *runActor) startSynthesisWith(ctx actor.Context, shared *agentShared) {
	r.phase = phaseSynthesizing
	inputs := make([]string, 0, len(r.g.Plan.Nodes))
	for _, n := range r.g.Plan.Nodes {
		if r.node(n.ID).State == runstate.Completed { // rejected nodes and their dependents have no output
			inputs = append(inputs, r.synthesisInput(n.ID))
		}
	}
	if r.team != nil {
		r.agents.spawnWith(ctx, model.RoleSynthesizer, r.team.node.ID+"/"+synthesizerAgentID, r.synthesisLane(),
			model.Request{Goal: "Synthesise the team's findings on: " + r.team.node.Goal, Context: inputs}, nil, shared, nil)
		return
	}
	r.agents.spawnWith(ctx, model.RoleSynthesizer, synthesizerAgentID, r.synthesisLane(),
		model.Request{Goal: "Answer the question from the council's findings.", Context: inputs}, nil, shared, nil)
}

// fail starts ending the run with run_error{code}: every live agent is
// stopped, unstarted nodes of the current wave are skipped, and once the
// last agent has stopped maybeEndFailure emits the rest (ending.go).
func (r *runActor) fail(ctx actor.Context, code messages.ErrorCode, msg string) {
	if r.terminal != nil {
		return
	}
	if r.failCode != "" {
		r.adoptAbort(ctx) // an abort that came while the run was ending takes the failure's place
		r.endingHubLost(ctx)
		return
	}
	code, msg = r.claimEnd(ctx, code, msg)
	r.failCode, r.failMsg = code, msg
	for _, c := range r.agents.childrenInOrder() {
		if !c.reported && !c.stopping {
			c.stopping = true
			ctx.Stop(c.pid)
		}
	}
	r.maybeEndFailure(ctx) // skips the queued nodes (ending.go)
}

// claimEnd decides that the run ends with run_error{code, msg}, unless an
// end was decided first (an accepted abort, say), which stands; it returns
// the end that stands. An accepted abort's record is journaled here, the
// first time the supervisor meets it: before anything it emits to end the
// run. A team's supervisor decides nothing (its run's does).
func (r *runActor) claimEnd(ctx actor.Context, code messages.ErrorCode, msg string) (messages.ErrorCode, string) {
	if r.team != nil {
		return code, msg
	}
	d, _ := r.spec.outcome.claim(decision{code: code, msg: msg})
	if d.abort.post(ctx, r.spec) {
		r.apply(supervisorAgentID, messages.RunLane(), &messages.RunAbortRequestedPayload{Reason: d.abort.reason})
	}
	return d.code, d.msg
}

func (w *graphRunner) incompleteDep(id string) string {
	r := w.r
	for _, d := range r.planNode(id).Deps {
		if r.node(d).State != runstate.Completed {
			return d
		}
	}
	return ""
}

// skip closes the lane of a node that never ran (a single node_skipped).
func (w *graphRunner) skip(ctx actor.Context, id, reason, dep string) {
	r := w.r
	r.emitFor(ctx, id, r.nodeLane(id),
		&messages.NodeSkippedPayload{NodeID: id, Reason: reason, Dependency: dep})
}

// finish decides the terminal event; maybeEnd emits it once every agent
// has stopped, then stops the supervisor.
func (r *runActor) finish(ctx actor.Context, p messages.Payload) {
	if _, ok := p.(*messages.RunFinishedPayload); ok && r.team == nil && !regress.AbortWithoutOutcome.Load() {
		if d, won := r.spec.outcome.claim(decision{}); !won {
			r.fail(ctx, d.code, d.msg) // stopped from outside before the answer was in: that end stands
			return
		}
	}
	// Notes that can no longer apply end now; translators still working
	// are stopped, and their lanes close as they terminate.
	r.steering.dropSteering(ctx, "the run ended before the next wave boundary")
	for _, c := range r.agents.childrenInOrder() {
		if c.role == model.RoleSteerer && !c.stopping {
			c.stopping = true
			ctx.Stop(c.pid)
		}
	}
	dur := r.e.cfg.Now().Sub(r.start).Milliseconds()
	var counts messages.NodeCounts
	if r.g != nil {
		counts = r.g.Counts()
	}
	files := r.spec.out.FilesBytes()
	switch p := p.(type) {
	case *messages.RunFinishedPayload:
		p.Usage, p.Nodes, p.DurationMS, p.FilesBytes, p.RunIdentity = r.usage, counts, dur, files, r.spec.identity()
	case *messages.RunErrorPayload:
		p.Usage, p.Nodes, p.DurationMS, p.FilesBytes, p.RunIdentity = r.usage, counts, dur, files, r.spec.identity()
		if r.team == nil {
			r.sealFailure(ctx, p)
		}
	}
	r.terminal = p
	r.maybeEnd(ctx)
}

// sealFailure makes the run's end final (outcome.seal) just before its
// terminal event p: an abort that took the failure's place and whose
// StopRun has not arrived yet is journaled now, and p says aborted.
func (r *runActor) sealFailure(ctx actor.Context, p *messages.RunErrorPayload) {
	d, ok := r.spec.outcome.seal()
	if !ok || d.abort == nil {
		return
	}
	r.failCode, r.failMsg = r.claimEnd(ctx, d.code, d.msg)
	p.Code, p.Message = r.failCode, r.failMsg
}

func (r *runActor) maybeEnd(ctx actor.Context) {
	if len(r.agents.byPID) > 0 || r.ended.Load() {
		return
	}
	if r.team != nil {
		r.endTeam(ctx)
		return
	}
	// ended first: whoever sees the terminal event then sees the run as
	// ended (its tenant's concurrent_runs quota counts it no more).
	r.ended.Store(true)
	r.emit(ctx, r.terminal)
	ctx.Stop(ctx.Self())
}

// startRewound starts a rewound run at its wave, with the earlier waves'
// outputs reused from the source run.
func (pl *runPlanner) startRewound(ctx actor.Context, rw *messages.RunRewoundPayload) {
	r := pl.r
	r.emit(ctx, rw) // the graph, its reused outputs, and its earlier waves as run (fixed)
	r.phase = phaseExecuting
	r.graph.startWave(ctx, rw.Wave)
}

// emitCostEstimate publishes run_cost_estimate for the plan (warn-only).
func (pl *runPlanner) emitCostEstimate(ctx actor.Context) {
	r := pl.r
	n := int64(dag.CountAgents(r.g.Plan))
	r.emit(ctx, &messages.RunCostEstimatePayload{NodeCount: int(n), EstTokens: n * estTokensPerAgent, EstWallSeconds: n * estTokensPerAgent / estTokensPerSecond})
}

// directorRequest is the director's turn: the question, and every tool
// the plan may give its nodes.
func (pl *runPlanner) directorRequest() model.Request {
	r := pl.r
	req := model.Request{Goal: r.spec.question, Tools: r.e.cfg.Tools.All()}
	for _, a := range r.e.cfg.Remote.Available() { // the remote agents a node may name
		req.Agents = append(req.Agents, model.AgentDef{Name: a.Name, Description: a.Description})
	}
	if r.st.Replans > 0 { // planning again: what was rejected, and why
		reason := r.st.Rejection
		if reason == "" {
			reason = "(no reason given)"
		}
		req.Plan = r.st.RejectedPlan
		req.Guidance = "A human rejected your previous plan (given as the plan). Their reason: " + reason +
			". Propose a new plan that answers it."
	}
	return req
}

// directorLane is the director's lane for the run's current plan (the
// first, or a re-plan's).
func (pl *runPlanner) directorLane() messages.Lane {
	r := pl.r
	return messages.RunLane().Child(messages.DirectorStreamOf(r.st.Replans + 1))
}

// startDirector spawns the director of the run's current plan.
func (pl *runPlanner) startDirector(ctx actor.Context) {
	r := pl.r
	lane := pl.directorLane()
	r.agents.spawn(ctx, model.RoleDirector, directorID(lane.StreamID), lane, pl.directorRequest(), nil)
}

// directorID is the agent id of the director of a plan: its lane's id
// ("director", "director:2", …), so each re-plan's director is a new child.
func directorID(stream messages.StreamID) string { return string(stream) }

// replan: the plan was rejected and the director plans again, told why.
func (pl *runPlanner) replan(ctx actor.Context) {
	r := pl.r
	r.emit(ctx, &messages.ReplanAttemptPayload{Attempt: r.st.Replans + 1, MaxAttempts: r.spec.maxReplans, Reason: r.st.Rejection})
	r.g = nil // the reducer dropped the rejected plan; the next plan_proposed sets it
	r.phase = phasePlanning
	pl.startDirector(ctx)
}

// runPlanner is what only a run's supervisor does before its waves: it
// starts the director (again, told why, after a rejected plan), estimates
// the plan's cost, gates the plan (plan_approval) and applies the gate's
// decision, or starts a rewound run at its wave. A team's supervisor never
// uses it (its plan is the team node's).
type runPlanner struct{ r *runActor }

// gatePlan is the supervisor's message to itself to run the plan gate.
type gatePlan struct{}

// Cost estimate (run_cost_estimate): tokens per model-driven agent, and
// the throughput it assumes.
const (
	estTokensPerAgent  = 2000
	estTokensPerSecond = 50
)

// teamID is the team node id of a team supervisor ("" for the run).
func (r *runActor) teamID() string {
	if r.team != nil {
		return r.team.node.ID
	}
	return ""
}

func (r *runActor) node(id string) *runstate.Node         { return r.g.Node(id) }
func (r *runActor) planNode(id string) *messages.PlanNode { return r.g.PlanNode(id) }

// nodeInfo is what a worker agent knows of its plan node.
type nodeInfo struct {
	node  *messages.PlanNode
	wave  int
	scope messages.Lane // the lane of the graph the node is in (run or team)
}

func joinInputs(in []string) string { return strings.Join(in, "\n") }
