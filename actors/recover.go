package actors

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/conclave-ai/conclave/actors/citations"
	"github.com/conclave-ai/conclave/actors/runstate"
	"github.com/conclave-ai/conclave/journal"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/model"
)

// Recovery rebuilds the engine's state from a journal at startup
// (Config.Journal holding events of an earlier process). A run's events
// are folded through runstate.Run.Apply, the same definition the live
// supervisor applies, and the run goes on from that state:
//
//   - Every session gets its hub back; seq continues after the journal's
//     head, so no seq is ever reused and old cursors still work.
//   - A run that had ended stays ended (read from the journal's catalogue).
//   - A run that had not ended resumes where it was, at every level of its
//     graph (the run's plan, and each running team's nested plan, by the
//     same code):
//   - agents parked on an interrupt come back parked on the same
//     interrupt id, with the same expiry, resumable as before (no new
//     interrupt_raised is published); so do the plan gate, node gates and
//     spawn gates;
//   - agents that were working restart from their first turn, announcing
//     it with agent_restarted{reason: "server restarted"} (partial output
//     of the lost attempt is to be discarded, as after a panic);
//   - nodes that had completed are not run again: their outputs come from
//     the journal; nodes not started yet start when their wave goes on;
//   - team nodes go on with their nested waves; debate nodes go on from
//     the round and speaker they were at (a turn, judge or synthesis that
//     was streaming restarts on its lane with agent_restarted);
//   - sub-agents that were working are closed as cancelled, and their
//     delegating call gets an error result (a restarted parent delegates
//     again on its own); so are async tasks (their parent restarts);
//   - steering notes that had a graph diff wait for the next boundary; a
//     note still being translated is rejected ("lost in a server
//     restart");
//   - a run that was already ending (a node failed, or it was being
//     cancelled) ends: its open lanes are closed and run_error follows.

// agentRestore puts an agent back where it was parked.
type agentRestore struct {
	interrupt *runstate.Interrupt
	lane      *runstate.Lane
	call      int // index of the pending call (tool approval, info request); -1 for a node gate, remoteCall for a remote's request
}

// restoredRun is a run put back after a restart: its state, folded from
// the journal, and why it cannot go on, if it cannot.
type restoredRun struct {
	*runstate.Run
	unresumable string
}

// recoverSessions is the engine actor's part: it runs before any new run.
// It reads only what it needs: the journal's catalogue names the runs that
// had not ended, and only their sessions' events from their starts on are
// read (retention never trims those: journal.Journal.Trim). Ended runs
// stay in the catalogue, not in memory.
func (a *engineActor) recoverSessions(ctx actor.Context) error {
	if a.e.cfg.Placement != nil {
		return nil // a cluster node adopts sessions as it takes them over
	}
	bg := context.Background()
	if err := a.findLegacySessions(bg); err != nil {
		return err
	}
	live, err := a.e.catalog.LiveRuns(bg)
	if err != nil {
		return fmt.Errorf("actors: recovery: list the live runs: %w", err)
	}
	bySession := map[messages.SessionID][]journal.RunInfo{}
	var order []messages.SessionID
	for _, r := range live {
		if bySession[r.Session] == nil {
			order = append(order, r.Session)
		}
		bySession[r.Session] = append(bySession[r.Session], r)
	}
	for _, key := range order {
		if err := a.recoverSession(ctx, key, bySession[key]); err != nil {
			return err
		}
	}
	return nil
}

// findLegacySessions finds the sessions journaled by versions before
// tenant-scoped keys (keys without '/') and their tenants, from the
// first run_started of each (the journal lists keys from memory; one short
// read per legacy session, and no new one is ever created).
func (a *engineActor) findLegacySessions(ctx context.Context) error {
	keys, err := a.e.cfg.Journal.Sessions(ctx)
	if err != nil {
		return fmt.Errorf("actors: recovery: list sessions: %w", err)
	}
	for _, key := range keys {
		if _, scoped := sessKeyOf(key); scoped {
			continue
		}
		tenant, err := a.legacyTenantOf(ctx, key)
		if err != nil {
			return err
		}
		a.e.legacy[sessKey{tenant, key}] = key
		a.e.legacyTenant[key] = tenant
	}
	return nil
}

// legacyTenantOf reads a legacy session's tenant from its first
// run_started (runs of those versions carried it); LocalTenant if none is
// among its first 4,096 kept events.
func (a *engineActor) legacyTenantOf(ctx context.Context, key messages.SessionID) (messages.TenantID, error) {
	for after, read := uint64(0), 0; read < 4096; {
		batch, err := a.e.cfg.Journal.ReadAfter(ctx, key, after, 256)
		if err != nil {
			return "", fmt.Errorf("actors: recovery: read session %s: %w", key, err)
		}
		if len(batch) == 0 {
			break
		}
		for _, enc := range batch {
			if enc.Type != messages.RunStarted {
				continue
			}
			env, err := enc.Envelope()
			if err != nil {
				return "", fmt.Errorf("actors: recovery: session %s seq %d: %w", key, enc.Seq, err)
			}
			if p, ok := env.Payload.(*messages.RunStartedPayload); ok && p.Tenant != "" {
				return p.Tenant, nil
			}
			return messages.LocalTenant, nil
		}
		after, read = batch[len(batch)-1].Seq, read+len(batch)
	}
	return messages.LocalTenant, nil
}

// recoverSession rebuilds the live runs of one session from their events
// (recovery at startup: nothing else runs yet, so it reads on the actor).
func (a *engineActor) recoverSession(ctx actor.Context, jkey messages.SessionID, live []journal.RunInfo) error {
	f, err := a.e.foldSession(context.Background(), jkey, live)
	if err != nil {
		return fmt.Errorf("actors: recovery: %w", err)
	}
	return a.restoreSession(ctx, f)
}

// foldedSession is the state of a session's live runs, folded from their
// events (foldSession), for restoreSession.
type foldedSession struct {
	key   sessKey
	order []*runstate.Run      // the live runs, in the catalogue's order
	envs  []*messages.Envelope // their events, in seq order
}

// foldSession reads the events of a session's live runs and folds them. It
// touches no actor state: Adopt runs it off the engine actor.
func (e *Engine) foldSession(ctx context.Context, jkey messages.SessionID, live []journal.RunInfo) (*foldedSession, error) {
	k, scoped := sessKeyOf(jkey)
	if !scoped {
		k = sessKey{e.legacyTenant[jkey], jkey}
	}
	f := &foldedSession{key: k, order: make([]*runstate.Run, 0, len(live))}
	runs := map[messages.RunID]*runstate.Run{}
	ids := map[messages.RunID]bool{}
	from := live[0].FirstSeq
	for _, info := range live {
		r := runstate.New(info.Run)
		runs[info.Run], ids[info.Run] = r, true
		f.order = append(f.order, r)
		from = min(from, info.FirstSeq)
	}
	if err := e.scanRuns(ctx, jkey, from, 0, ids, func(env *messages.Envelope) bool {
		runs[env.RunID].Apply(env)
		f.envs = append(f.envs, env)
		return true
	}); err != nil {
		return nil, err
	}
	return f, nil
}

// restoreSession starts a folded session's hub and resumes its runs.
func (a *engineActor) restoreSession(ctx actor.Context, f *foldedSession) error {
	k, order, envs := f.key, f.order, f.envs
	s, err := a.openSession(ctx, k)
	if err != nil {
		return err
	}
	for _, r := range order {
		q := ""
		if r.Started != nil {
			q = r.Started.Question
		}
		a.e.index.Register(k.tenant, r.ID, k.id, q, r.StartedAt)
	}
	for _, env := range envs {
		a.e.index.Apply(k.tenant, env) // no terminal among them: the runs are live
	}
	for _, r := range order {
		if r.Ended || r.Started == nil {
			continue
		}
		rr := &restoredRun{Run: r}
		if err := a.resumeRun(ctx, s, k, rr); err != nil {
			a.e.cfg.Logger.Error("recovery: run cannot resume", "run", r.ID, "err", err)
		}
	}
	return nil
}

// specOf rebuilds a run's spec from its run_started (recovery, rewind).
func (e *Engine) specOf(k sessKey, id messages.RunID, st *messages.RunStartedPayload, m model.Model) *runSpec {
	o := st.Options(e.runDefaults())
	o.Tenant, o.SessionID = k.tenant, k.id
	if o.Budget == nil { // a run of a version that did not record it: its tenant's quotas
		o.Budget, _ = runBudget(o.Tenant, e.limits(o.Tenant), nil) // nothing asked: no error
	}
	return newRunSpec(id, o, m)
}

// scenarioOf is a run's scenario (empty if it had none).
func scenarioOf(st *messages.RunStartedPayload) messages.Scenario {
	if st.Scenario != nil {
		return *st.Scenario
	}
	return messages.Scenario{}
}

// resumeRun closes what cannot continue and starts the run's supervisor
// from its state.
func (a *engineActor) resumeRun(ctx actor.Context, s *sessionEntry, k sessKey, r *restoredRun) error {
	m, err := a.e.cfg.Models(scenarioOf(r.Started))
	if err != nil {
		// It cannot go on (its model cannot be built any more): it ends
		// now, its open lanes closed, instead of staying live for ever.
		r.unresumable = "cannot resume after a restart: " + err.Error()
	}
	spec := a.e.specOf(k, r.ID, r.Started, m)
	if t := a.e.cfg.Tracer; t != nil {
		t.Resumed(r.ID, r.Started) // before the events it publishes from here
	}
	for _, o := range a.e.cfg.Observers {
		if rs, ok := o.(Resumer); ok {
			rs.Resumed(r.ID, r.Started)
		}
	}
	spec.out = a.newOutbox(spec, s.pid, r.Events, r.FilesBytes, r.UsageByModel)
	emit := func(agent string, lane messages.Lane, p messages.Payload) { spec.post(ctx, agent, lane, p) }
	const lost = "lost in a server restart"

	// Sub-agents do not survive (nor async tasks): their lanes close,
	// deepest first; a parked parent gets an error result for each
	// delegating call left without one, a working one restarts.
	var subs []*runstate.Lane
	for _, l := range r.Lanes {
		if isSubagentLane(l.Lane.StreamID) {
			subs = append(subs, l)
		}
	}
	slices.SortFunc(subs, func(x, y *runstate.Lane) int { return deepestFirst(x.Lane, y.Lane) })
	for _, l := range subs {
		emit(l.AgentID, l.Lane, &messages.SubagentFinishedPayload{SubagentID: l.AgentID, Outcome: messages.OutcomeCancelled, Error: lost})
		delete(r.Lanes, l.Lane.StreamID)
	}
	// Steering notes being translated are lost with their steerer; notes
	// with a diff wait for the next boundary (runActor.resume).
	for _, n := range r.NotesInOrder() {
		if id := n.Received.SteeringID; n.Received.Diff == nil {
			emit(n.AgentID, n.Lane, messages.NewWarning(messages.WarnSteeringRejected, "steering "+id+" "+lost))
			emit(n.AgentID, n.Lane, &messages.SteeringRejectedPayload{SteeringID: id, Error: lost})
			delete(r.Steering, id)
		}
	}
	if r.Abort != nil {
		// An accepted abort was journaled: the run ends as aborted, as it
		// would have without the restart (its record is journaled already).
		spec.outcome.claim(decision{code: messages.ErrCodeAborted, msg: r.Abort.Reason})
	}
	ending := r.ending()
	if ending {
		// It was ending (or cannot go on): its pending interrupts are
		// cancelled and every lane it had open closes, deepest first, as
		// when a live run stops; then the supervisor ends it.
		cancelInterrupts(r.Run, emit)
		closeOpenLanes(r.Run, emit, r.failMsg())
	}
	if err := a.spawnRun(ctx, spec, r); err != nil {
		return err
	}
	// Logged with what was read before the spawn: r is the supervisor's
	// from here. ending: it resumes only to end (aborted, failing, or its
	// model cannot be rebuilt).
	a.e.cfg.Logger.Info("run resumed", "run", r.ID, "session", k.id, "tenant", k.tenant, "ending", ending)
	return nil
}

// ending reports whether the run cannot go on after the restart: it was
// ending (aborted, failing) or cannot be rebuilt.
func (r *restoredRun) ending() bool {
	return r.Abort != nil || r.unresumable != "" || r.Failing() || r.LaneFailed != ""
}

// cancelInterrupts closes the pending interrupts of a run that ends at
// recovery with interrupt_resolved{cancel}, in the order they were raised:
// what a parked agent publishes when a live run stops (cancelParked).
func cancelInterrupts(r *runstate.Run, emit func(agent string, lane messages.Lane, p messages.Payload)) {
	pending := make([]*runstate.Interrupt, 0, len(r.Interrupts))
	for _, in := range r.Interrupts {
		pending = append(pending, in)
	}
	slices.SortFunc(pending, func(x, y *runstate.Interrupt) int { return cmp.Compare(x.Seq, y.Seq) })
	for _, in := range pending {
		emit(in.AgentID, in.Lane, &messages.InterruptResolvedPayload{InterruptID: in.Raised.InterruptID, Kind: in.Raised.Kind, Decision: messages.DecisionCancel})
		delete(r.Interrupts, in.Raised.InterruptID)
	}
}

// failMsg is why a run that was ending ends.
func (r *restoredRun) failMsg() string {
	switch {
	case r.Abort != nil:
		return r.Abort.Reason
	case r.unresumable != "":
		return r.unresumable
	case r.Graph != nil && r.Graph.FailMsg != "":
		return r.Graph.FailMsg
	case r.LaneFailed != "":
		return r.LaneFailed
	}
	return "server restarted"
}

// isSubagentLane reports whether stream is a sub-agent's lane.
func isSubagentLane(stream messages.StreamID) bool {
	return messages.ParseStreamID(stream).Kind == messages.LaneSubagent
}

// closeOpenLanes closes, deepest first, every lane a run that ends at
// recovery had open: agents' lanes, debates' turns, judges and
// syntheses, and teams' open waves (completed before their team's lane
// closes).
func closeOpenLanes(r *runstate.Run, emit func(agent string, lane messages.Lane, p messages.Payload), reason string) {
	type closing struct {
		lane  messages.Lane
		agent string
		p     messages.Payload
	}
	var all []closing
	for _, l := range r.Lanes {
		if p := closingOf(r, l, reason); p != nil {
			all = append(all, closing{l.Lane, l.AgentID, p})
		}
	}
	for _, d := range debatesOf(r) {
		if o := d.Open; o != nil && o.Kind != messages.SynthesisStarted { // a synthesis lane is in Lanes
			all = append(all, closing{o.Lane, localDebateNode(d), debateSubClosing(d, o)})
		}
	}
	slices.SortFunc(all, func(x, y closing) int { return deepestFirst(x.lane, y.lane) })
	done := map[messages.StreamID]bool{}
	for _, c := range all {
		// A team's open wave completes before the team node's lane closes.
		if g := r.GraphOf(c.lane.StreamID); g != nil && g.Team != "" {
			completeOpenWave(g, c.agent, emit)
		}
		emit(c.agent, c.lane, c.p)
		done[c.lane.StreamID] = true
		if n, ok := c.p.(*messages.NodeCancelledPayload); ok {
			if g := r.GraphOf(c.lane.ParentStreamID); g != nil {
				g.Node(n.NodeID).State = runstate.Cancelled
			}
		}
		delete(r.Lanes, c.lane.StreamID)
	}
}

// completeOpenWave ends a team's wave that was open: its unstarted nodes
// are skipped, then wave_completed with the counts.
func completeOpenWave(g *runstate.Graph, agent string, emit func(agent string, lane messages.Lane, p messages.Payload)) {
	if g.Wave < 0 || g.WaveDone {
		return
	}
	wc := &messages.WaveCompletedPayload{Wave: g.Wave, Team: g.Team}
	for _, id := range g.Waves[g.Wave] {
		n := g.Node(id)
		switch n.State {
		case runstate.Pending:
			emit(id, g.Lane.Child(messages.NodeStream(id)), &messages.NodeSkippedPayload{NodeID: id, Reason: "lost in a server restart"})
			n.State = runstate.Skipped
			wc.Skipped++
		case runstate.Completed:
			wc.Completed++
		case runstate.Failed:
			wc.Failed++
		case runstate.Skipped:
			wc.Skipped++
		default: // running (closed as cancelled) or cancelled
			wc.Cancelled++
		}
	}
	g.WaveDone = true
	emit(agent, g.Lane, wc)
}

// closingOf is the event that closes an agent lane of a run that ends at
// recovery.
func closingOf(r *runstate.Run, l *runstate.Lane, reason string) messages.Payload {
	switch ps := messages.ParseStreamID(l.Lane.StreamID); ps.Kind {
	case messages.LaneDirector:
		return &messages.PlanningFailedPayload{Error: "server restarted"}
	case messages.LaneSynthesis, messages.LaneNodeSynthesis:
		return &messages.SynthesisFailedPayload{Error: "server restarted"}
	case messages.LaneNode:
		return &messages.NodeCancelledPayload{NodeID: ps.NodeID, Reason: reason}
	case messages.LaneSubagent:
		return &messages.SubagentFinishedPayload{SubagentID: l.AgentID, Outcome: messages.OutcomeCancelled, Error: "lost in a server restart"}
	}
	return nil
}

// debatesOf lists the run's debates that are still running.
func debatesOf(r *runstate.Run) []*runstate.Debate {
	var out []*runstate.Debate
	var walk func(g *runstate.Graph)
	walk = func(g *runstate.Graph) {
		for _, n := range g.Nodes {
			if n.Debate != nil && n.State == runstate.Running {
				out = append(out, n.Debate)
			}
			if n.Team != nil {
				walk(n.Team)
			}
		}
	}
	if r.Graph != nil {
		walk(r.Graph)
	}
	return out
}

// localDebateNode is the node id of a debate's lane.
func localDebateNode(d *runstate.Debate) string {
	return messages.ParseStreamID(d.Lane.StreamID).NodeID
}

// debateSubClosing closes a debate's open turn or judge lane.
func debateSubClosing(d *runstate.Debate, o *runstate.DebateSub) messages.Payload {
	id := localDebateNode(d)
	if o.Kind == messages.DebateJudgeStarted {
		return &messages.DebateJudgeSummaryPayload{NodeID: id, Round: o.Round, Cancelled: true}
	}
	return &messages.DebateTurnCompletedPayload{NodeID: id, AgentID: o.Agent, Round: o.Round, Stance: messages.StanceHeld, Cancelled: true}
}

// resume is the run supervisor's start after a restart.
func (r *runActor) resume(ctx actor.Context) {
	rs := r.replay
	r.replay = nil
	defer r.e.restoring.Done() // agents it rebuilds parked were added before this Done
	r.watchBudget(ctx)
	r.st, r.g = rs.Run, rs.Graph // the supervisor goes on from the folded state
	r.start = rs.StartedAt
	r.usage = rs.Usage
	if h, err := citations.FromHandoff(rs.Citations); err == nil {
		r.cites = h
	}
	switch {
	case rs.Abort != nil: // an accepted abort was journaled
		r.endRestored(ctx, messages.ErrCodeAborted, rs.Abort.Reason)
		return
	case rs.unresumable != "":
		r.endRestored(ctx, messages.ErrCodeInternal, rs.unresumable)
		return
	case rs.LaneFailed != "": // the director or the synthesiser had failed: the run was ending
		code := messages.ErrCodeSynthesis
		if rs.Graph == nil {
			code = messages.ErrCodePlanningFailed
		}
		r.endRestored(ctx, code, rs.LaneFailed)
		return
	case rs.Replanning: // the rejection was journaled, its replan_attempt not
		r.planner.replan(ctx)
		return
	case rs.Graph == nil: // still planning (a first plan, or a re-plan): the director starts again
		r.phase = phasePlanning
		lane := r.planner.directorLane()
		r.agents.restartAgent(ctx, model.RoleDirector, directorID(lane.StreamID), lane, r.planner.directorRequest(), nil, rs.Lanes[lane.StreamID])
		return
	}
	for _, n := range rs.NotesInOrder() { // notes with a diff (the others were rejected): the next boundary applies them, in order
		r.steering.queueSteering(&steerItem{id: n.Received.SteeringID, note: n.Received.Note, diff: n.Received.Diff})
	}
	switch {
	case !rs.CostEstimated && !rs.GateDecided && !rs.Graph.Failing:
		r.planner.emitCostEstimate(ctx) // the process died between plan_proposed and its estimate
		fallthrough
	case !rs.GateDecided && !rs.Graph.Failing:
		if in := rs.PendingGate(messages.InterruptPlanApproval, "", messages.RunStream); in != nil {
			r.target().reattach(ctx, in, func(res *messages.Resolution) { r.planner.planDecided(ctx, res) })
			return
		}
		r.planner.planGate(ctx)
	case rs.Rejected:
		r.fail(ctx, messages.ErrCodePlanRejected, "plan rejected")
	default:
		r.graph.resumeGraph(ctx)
	}
}

// resumeGraph puts the graph the supervisor runs (the run's, or its
// team's) back where the journal left it: the same code at every level.
func (w *graphRunner) resumeGraph(ctx actor.Context) {
	r := w.r
	rs, g := r.st, r.g
	r.phase = phaseExecuting
	switch {
	case g.Failing:
		code := messages.ErrCodeInterrupted
		if g.Counts().Failed > 0 {
			code = messages.ErrCodeNodeFailed
		}
		r.endRestored(ctx, code, g.FailMsg)
	case g.Synthesis.Answer != nil: // the answer was written; only the end was missing
		r.phase = phaseSynthesizing
		if r.team != nil {
			r.team.synthesized = g.Synthesized
		}
		r.finish(ctx, &messages.RunFinishedPayload{Answer: *g.Synthesis.Answer})
	case g.Synthesis.Failed != "": // a team's synthesiser had failed
		r.endRestored(ctx, messages.ErrCodeSynthesis, "synthesis failed: "+g.Synthesis.Failed)
	case g.Synthesis.Started:
		r.phase = phaseSynthesizing
		shared := &agentShared{opened: true, attempts: 1, lastPanic: "server restarted"}
		if l := rs.Lanes[r.synthesisLane().StreamID]; l != nil {
			shared.attempts = l.Attempts
		}
		r.startSynthesisWith(ctx, shared)
	case g.Wave < 0 || g.WaveDone:
		w.resumeBoundary(ctx, g.Wave+1)
	default: // inside a wave: put back the nodes that were working or parked, queue the rest
		w.queue = w.queue[:0]
		for _, id := range g.Waves[g.Wave] {
			switch g.Node(id).State {
			case runstate.Pending:
				if in := rs.PendingGate(messages.InterruptNodeApproval, id, r.base().StreamID); in != nil {
					w.startNodeWith(ctx, id, &agentShared{}, &agentRestore{interrupt: in, call: -1}, nil)
				} else {
					w.queue = append(w.queue, id)
				}
			case runstate.Running:
				w.resumeNode(ctx, id)
			case runstate.Completed:
				// Its sub-team request waits for the boundary, as it
				// would have without the restart (found by testkit/sim,
				// seed 44663: it was forgotten).
				if n := g.Node(id); n.Spawn != nil {
					w.spawns = append(w.spawns, spawnAsk{parent: id, req: *n.Spawn, decided: n.SpawnApproved, approved: n.SpawnApproved})
				}
			}
		}
		w.advance(ctx)
	}
}

// resumeNode puts back a node that was running: a worker parked on a
// tool approval or question comes back parked, a working one restarts; a
// team goes on with its nested graph, a debate with its rounds.
func (w *graphRunner) resumeNode(ctx actor.Context, id string) {
	r := w.r
	rs, stream := r.st, r.nodeLane(id).StreamID
	l := rs.Lanes[stream]
	shared := &agentShared{opened: true, attempts: 1, approved: true, lastPanic: "server restarted"}
	if l != nil {
		shared.attempts, shared.subSeq = l.Attempts, l.SubSeq
		shared.remoteTask, shared.remoteContext, shared.remoteOpen = l.RemoteTask, l.RemoteContext, l.RemoteTask != ""
	}
	n := r.g.Node(id)
	switch {
	case n.Team != nil:
		// The team's part of the state goes to its supervisor: from now
		// on each supervisor applies its own events to its own state.
		w.startNodeWith(ctx, id, shared, nil, &nodeResume{team: rs.Split(stream)})
	case n.Debate != nil:
		w.startNodeWith(ctx, id, shared, nil, &nodeResume{debate: n.Debate})
	case l != nil && r.planNode(id).Agent != "":
		if in := rs.InterruptOn(stream); in != nil && l.RemoteTask != "" { // parked on its remote's request for input
			w.startNodeWith(ctx, id, shared, &agentRestore{interrupt: in, lane: l, call: remoteCall}, nil)
			return
		}
		w.startNodeWith(ctx, id, shared, nil, nil) // follows its task again, if it had one
	case l != nil:
		if in := rs.InterruptOn(stream); in != nil {
			if i := l.CallIndex(in.Raised.CallID); i >= 0 {
				w.startNodeWith(ctx, id, shared, &agentRestore{interrupt: in, lane: l, call: i}, nil)
				return
			}
		}
		fallthrough
	default:
		w.startNodeWith(ctx, id, shared, nil, nil)
	}
}

// nodeResume is how a team or debate node that was running before a
// restart is put back: from its folded state.
type nodeResume struct {
	team   *runstate.Run // the team's part of the run's state (Split)
	debate *runstate.Debate
}

// resumeBoundary resumes at the boundary before wave next: the spawn
// requests of the wave that ended are decided again (a spawn gate that
// was pending comes back parked), then the boundary goes on as usual.
func (w *graphRunner) resumeBoundary(ctx actor.Context, next int) {
	r := w.r
	g := r.g
	if next > 0 && next <= len(g.Waves) {
		for _, id := range g.Waves[next-1] {
			if n := g.Nodes[id]; n != nil && n.State == runstate.Completed && n.Spawn != nil {
				// A request a human already approved is not asked again
				// (one rejected is no longer there: runstate drops it).
				w.spawns = append(w.spawns, spawnAsk{parent: id, req: *n.Spawn, decided: n.SpawnApproved, approved: n.SpawnApproved})
			}
		}
	}
	slices.SortFunc(w.spawns, func(a, b spawnAsk) int { return strings.Compare(a.parent, b.parent) })
	// The gate that was open comes back first, on its interrupt; the
	// requests not decided yet are asked after it, in order.
	for i := range w.spawns {
		if w.spawns[i].decided {
			continue
		}
		if in := r.st.PendingGate(messages.InterruptSpawnApproval, w.spawns[i].parent, r.base().StreamID); in != nil {
			open := w.spawns[i]
			w.spawns = append([]spawnAsk{open}, slices.Delete(w.spawns, i, i+1)...)
			w.atBoundary, w.nextWave = true, next
			s := &w.spawns[0]
			r.target().reattach(ctx, in, func(res *messages.Resolution) { w.spawnDecided(ctx, s, res) })
			return
		}
	}
	w.boundary(ctx, next)
}

// endRestored ends a graph that was ending when the process stopped: its
// lanes were closed at recovery (resumeRun); the supervisor claims the end
// (an abort that came first stands) and emits the rest.
func (r *runActor) endRestored(ctx actor.Context, code messages.ErrorCode, msg string) {
	r.phase = phaseExecuting
	r.failCode, r.failMsg = r.claimEnd(ctx, code, msg)
	r.maybeEndFailure(ctx)
}

// restartAgent starts an agent again after a restart: it announces
// agent_restarted on its lane (or opens it, if it never did).
func (k *agentSet) restartAgent(ctx actor.Context, role model.Role, id string, lane messages.Lane, req model.Request, node *nodeInfo, l *runstate.Lane) {
	shared := &agentShared{lastPanic: "server restarted"}
	if l != nil {
		shared.opened, shared.attempts, shared.subSeq = true, l.Attempts, l.SubSeq
	}
	k.spawnWith(ctx, role, id, lane, req, node, shared, nil)
}

// reattach puts a rebuilt agent back on its pending interrupt.
func (a *agentActor) reattach(ctx actor.Context, rs *agentRestore) {
	defer a.spec.e.restoring.Done()
	if rs.call == remoteCall {
		a.target().reattach(ctx, rs.interrupt, func(res *messages.Resolution) { a.remoteAnswered(ctx, res) })
		return
	}
	if rs.call < 0 { // the node gate
		t := a.target()
		t.lane = a.spec.node.scope
		t.reattach(ctx, rs.interrupt, func(res *messages.Resolution) { a.nodeDecided(ctx, res) })
		return
	}
	l := rs.lane
	a.turn = l.Turn
	a.text.WriteString(l.Text.String())
	a.usage = l.Usage
	a.batch.calls, a.batch.callIDs = l.Calls, l.CallIDs
	a.batch.began = make([]time.Time, len(l.Calls)) // a call running before the restart runs again, timed from then
	a.batch.results = make([]model.ToolResult, len(l.Calls))
	for i, c := range l.Calls {
		a.batch.results[i] = model.ToolResult{CallID: c.ID, Name: c.Name}
		if res := l.Results[l.CallIDs[i]]; res != nil {
			a.batch.results[i].Content, a.batch.results[i].IsError = *res, l.Errs[l.CallIDs[i]]
		} else if i < rs.call {
			// Started before the restart and never answered (a lost
			// sub-agent): the model learns it failed.
			a.toolResult(ctx, i, "", fmt.Errorf("%s was interrupted by a server restart", c.Name))
		}
	}
	a.batch.next = rs.call + 1
	c := a.batch.calls[rs.call]
	switch rs.interrupt.Raised.Kind {
	case messages.InterruptInfoRequest:
		a.target().reattach(ctx, rs.interrupt, func(res *messages.Resolution) {
			out, err := infoAnswer(res)
			a.humanAnswered(ctx, rs.call, out, err)
		})
	case messages.InterruptChoice:
		q := rs.interrupt.Raised.Choice()
		a.target().reattach(ctx, rs.interrupt, func(res *messages.Resolution) {
			out, err := choiceAnswer(q, res)
			a.humanAnswered(ctx, rs.call, out, err)
		})
	default:
		a.target().reattach(ctx, rs.interrupt, func(res *messages.Resolution) { a.approved(ctx, rs.call, c, res) })
	}
}

// deepestFirst orders lanes to close: deeper lanes first (a child's
// before its parent's), then by stream id, so the order is deterministic.
func deepestFirst(x, y messages.Lane) int {
	return cmp.Or(y.Depth-x.Depth, strings.Compare(string(x.StreamID), string(y.StreamID)))
}
