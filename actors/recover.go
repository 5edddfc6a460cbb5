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
	"github.com/conclave-ai/conclave/journal"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/model"
)

// Recovery rebuilds the engine's state from a journal at startup
// (Config.Journal holding events of an earlier process).
//
//   - Every session gets its hub back; seq continues after the journal's
//     head, so no seq is ever reused and old cursors still work.
//   - Every run is indexed again (its summary folded from its events).
//   - A run that had ended stays ended.
//   - A run that had not ended resumes where it was:
//   - agents parked on an interrupt come back parked on the same
//     interrupt id, with the same expiry, resumable as before (no new
//     interrupt_raised is published);
//   - agents that were working restart from their first turn, announcing
//     it with agent_restarted{reason: "server restarted"} (partial output
//     of the lost attempt is to be discarded, as after a panic);
//   - nodes that had completed are not run again: their outputs come from
//     the journal; nodes not started yet start when their wave goes on;
//   - sub-agents that were working are closed as cancelled, and their
//     delegating call gets an error result (a restarted parent delegates
//     again on its own);
//   - a run that was already ending (a node failed, or it was being
//     cancelled) ends: its open lanes are closed and run_error follows.

// agentRestore puts an agent back where it was parked.
type agentRestore struct {
	interrupt *replayInterrupt
	lane      *replayLane
	call      int // index of the pending call (tool approval, info request); -1 for a node gate
}

// recoverSessions is the engine actor's part: it runs before any new run.
// It reads only what it needs: the journal's catalogue names the runs that
// had not ended, and only their sessions' events from their starts on are
// read (retention never trims those: journal.Journal.Trim). Ended runs
// stay in the catalogue, not in memory.
func (a *engineActor) recoverSessions(ctx actor.Context) error {
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
// run_started (runs of those versions carried it); LocalTenant if none.
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

// recoverSession rebuilds the live runs of one session from their events.
func (a *engineActor) recoverSession(ctx actor.Context, jkey messages.SessionID, live []journal.RunInfo) error {
	bg := context.Background()
	k, scoped := sessKeyOf(jkey)
	if !scoped {
		k = sessKey{a.e.legacyTenant[jkey], jkey}
	}
	runs := map[messages.RunID]*replayRun{}
	ids := map[messages.RunID]bool{}
	order := make([]*replayRun, 0, len(live))
	from := live[0].FirstSeq
	for _, info := range live {
		r := newReplayRun(info.Run, k.id)
		runs[info.Run], ids[info.Run] = r, true
		order = append(order, r)
		from = min(from, info.FirstSeq)
	}
	var envs []*messages.Envelope
	if err := a.e.scanRuns(bg, jkey, from, 0, ids, func(env *messages.Envelope) bool {
		runs[env.RunID].apply(env)
		envs = append(envs, env)
		return true
	}); err != nil {
		return fmt.Errorf("actors: recovery: %w", err)
	}
	s, err := a.openSession(ctx, k)
	if err != nil {
		return err
	}
	for _, r := range order {
		q := ""
		if r.started != nil {
			q = r.started.Question
		}
		a.e.index.Register(k.tenant, r.runID, k.id, q, r.startedAt)
	}
	for _, env := range envs {
		a.e.index.Apply(k.tenant, env) // no terminal among them: the runs are live
	}
	for _, r := range order {
		if r.ended || r.started == nil {
			continue
		}
		if err := a.resumeRun(ctx, s, k.tenant, r); err != nil {
			a.e.cfg.Logger.Error("recovery: run cannot resume", "run", r.runID, "err", err)
		}
	}
	return nil
}

// resumeRun closes what cannot continue and starts the run's supervisor
// from its replay.
func (a *engineActor) resumeRun(ctx actor.Context, s *sessionEntry, tenant messages.TenantID, r *replayRun) error {
	st := r.started
	sc := messages.Scenario{}
	if st.Scenario != nil {
		sc = *st.Scenario
	}
	m, err := a.e.cfg.Models(sc)
	if err != nil {
		// It cannot go on (its model cannot be built any more): it ends
		// now, its open lanes closed, instead of staying live for ever.
		r.failing, r.unresumable = true, "cannot resume after a restart: "+err.Error()
		r.failMsg = r.unresumable
	}
	spec := &runSpec{
		tenant: tenant, runID: r.runID, session: r.session, question: st.Question, hitl: st.HITL,
		scenario: st.Scenario, concurrency: st.Concurrency, model: m,
		approvalTimeout: time.Duration(st.ApprovalTimeoutSeconds) * time.Second, timeoutAction: st.ApprovalTimeoutAction,
		advisor: st.Advisor, maxDelegationRounds: st.MaxDelegationRounds, // 0: delegation.Limits defaults it
	}
	if spec.concurrency == 0 {
		spec.concurrency = a.e.cfg.Concurrency
	}
	if spec.approvalTimeout == 0 {
		spec.approvalTimeout = a.e.cfg.InterruptTimeout
	}
	if spec.timeoutAction == "" {
		spec.timeoutAction = messages.DecisionReject
	}
	spec.out = a.newOutbox(spec, s.pid, r.events)
	emit := func(agent string, lane messages.Lane, p messages.Payload) { spec.post(ctx, agent, lane, p) }
	// Team and debate nodes are not resumed: the lanes open inside them
	// close (deepest first), and the run ends as interrupted (below, with
	// the node's own lane cancelled).
	if len(r.composite) > 0 {
		lanes := make([]*nestedLane, 0, len(r.nested))
		for _, l := range r.nested {
			lanes = append(lanes, l)
		}
		slices.SortFunc(lanes, func(x, y *nestedLane) int { return deepestFirst(x.lane, y.lane) })
		for _, l := range lanes {
			if p := closingOf(l); p != nil {
				emit(l.agent, l.lane, p)
			}
		}
		// A team's open wave ends: its unstarted nodes skipped, then
		// wave_completed, before the team's own lane closes.
		for _, w := range r.teamWaves {
			wc := &messages.WaveCompletedPayload{Wave: w.wave.Wave, Team: w.wave.Team}
			for _, id := range w.wave.NodeIDs {
				switch st, seen := w.outcome[id]; {
				case !seen:
					emit(id, w.lane.Child(messages.NodeStream(id)), &messages.NodeSkippedPayload{NodeID: id, Reason: "lost in a server restart"})
					wc.Skipped++
				case st == nodeCompleted:
					wc.Completed++
				case st == nodeFailed:
					wc.Failed++
				case st == nodeSkipped:
					wc.Skipped++
				default: // running (closed as cancelled above) or cancelled
					wc.Cancelled++
				}
			}
			emit(w.agent, w.lane, wc)
		}
		ids := make([]string, 0, len(r.composite))
		for _, id := range r.composite {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		r.failing = true
		if r.failMsg == "" {
			r.failMsg = "server restarted while team or debate nodes were running (" + strings.Join(ids, ", ") + "); they are not resumed"
		}
	}
	// Steering notes waiting for a boundary are lost with the process.
	for _, env := range r.steering {
		it := env.Payload.(*messages.SteeringReceivedPayload)
		emit(env.AgentID, env.Lane, &messages.WarningPayload{Code: "steering_rejected", Message: "steering " + it.SteeringID + " lost in a server restart"})
		emit(env.AgentID, env.Lane, &messages.SteeringRejectedPayload{SteeringID: it.SteeringID, Diff: it.Diff, Error: "lost in a server restart"})
	}
	// Sub-agents do not survive: close their lanes; a parked parent gets an
	// error result for each delegating call left without one.
	// Deepest first: a sub-agent's lane closes before its parent's.
	subLanes := make([]*replayLane, 0, len(r.lanes))
	for _, l := range r.lanes {
		if l.lane.Depth >= 2 {
			subLanes = append(subLanes, l)
		}
	}
	slices.SortFunc(subLanes, func(x, y *replayLane) int { return deepestFirst(x.lane, y.lane) })
	for _, l := range subLanes {
		emit(l.agentID, l.lane, &messages.SubagentFinishedPayload{SubagentID: l.agentID, Outcome: messages.OutcomeCancelled, Error: "lost in a server restart"})
		delete(r.lanes, l.lane.StreamID)
	}
	// A spawn gate's request is not journaled (only the worker's tool
	// call): the gate ends as cancelled and the sub-team is not spawned.
	for id, in := range r.interrupts {
		if in.raised.Kind == messages.InterruptSpawnApproval {
			emit(in.agentID, in.lane, &messages.InterruptResolvedPayload{InterruptID: id, Kind: in.raised.Kind, Decision: messages.DecisionCancel,
				Reason: "lost in a server restart: the sub-team is not spawned"})
			delete(r.interrupts, id)
		}
	}
	if r.failing { // it was ending: close the lanes it had open, then end it
		for id, l := range r.lanes {
			switch {
			case id == messages.DirectorStream:
				emit(l.agentID, l.lane, &messages.PlanningFailedPayload{Error: "server restarted"})
			case id == messages.SynthesisStream:
				emit(l.agentID, l.lane, &messages.SynthesisFailedPayload{Error: "server restarted"})
			default:
				emit(l.agentID, l.lane, &messages.NodeCancelledPayload{NodeID: l.agentID, Reason: r.failMsg})
				r.node(l.agentID).state = nodeCancelled
			}
			delete(r.lanes, id)
		}
	}
	return a.spawnRun(ctx, spec, r)
}

// resume is the run supervisor's start after a restart.
func (r *runActor) resume(ctx actor.Context) {
	rp := r.replay
	r.replay = nil
	defer r.e.restoring.Done() // agents it rebuilds parked were added before this Done
	r.watchBudget(ctx)
	r.start = rp.startedAt
	r.usage = rp.usage
	if rp.laneFailed != "" { // the director or the synthesiser had failed: the run was ending
		r.setPlanIfAny(rp)
		code := messages.ErrCodeSynthesis
		if rp.plan == nil {
			code = messages.ErrCodePlanningFailed
		}
		r.fail(ctx, code, rp.laneFailed)
		return
	}
	if rp.plan == nil && rp.unresumable == "" { // still planning: the director starts again
		r.phase = phasePlanning
		r.restartAgent(ctx, model.RoleDirector, directorAgentID, messages.RunLane().Child(messages.DirectorStream), model.Request{Goal: r.spec.question}, nil, rp.lanes[messages.DirectorStream])
		return
	}
	r.setPlanIfAny(rp)
	if !rp.costEstimated && !rp.gateDecided && !rp.failing {
		r.emitCostEstimate(ctx) // the process died between plan_proposed and its estimate
	}
	r.wave, r.inWave = max(rp.wave, 0), rp.wave >= 0 && !rp.waveDone
	switch {
	case rp.failing:
		code := messages.ErrCodeInterrupted
		switch {
		case rp.unresumable != "":
			code = messages.ErrCodeInternal
		case r.counts.Failed > 0:
			code = messages.ErrCodeNodeFailed
		}
		d, _ := r.spec.outcome.claim(decision{code: code, msg: rp.failMsg}) // an abort that came first stands
		r.failCode, r.failMsg = d.code, d.msg
		r.phase = phaseExecuting
		r.maybeEndFailure(ctx)
	case !rp.gateDecided:
		if in := rp.pendingOfKind(messages.InterruptPlanApproval, ""); in != nil {
			r.target().reattach(ctx, in, func(res *messages.Resolution) { r.planDecided(ctx, res) })
			return
		}
		r.planGate(ctx)
	case rp.rejected:
		r.fail(ctx, messages.ErrCodePlanRejected, "plan rejected")
	case rp.answer != nil: // the answer was written; only run_finished was missing
		r.phase = phaseSynthesizing
		r.finish(ctx, &messages.RunFinishedPayload{Answer: *rp.answer})
	case rp.synthesis:
		r.phase = phaseSynthesizing
		shared := &agentShared{opened: true, attempts: 1, lastPanic: "server restarted"}
		if l := rp.lanes[messages.SynthesisStream]; l != nil {
			shared.attempts = l.attempts
		}
		r.startSynthesisWith(ctx, shared)
	case rp.wave < 0 || rp.waveDone:
		r.phase = phaseExecuting
		r.boundary(ctx, rp.wave+1) // steering notes posted since were rejected above; citations already numbered stay
	default: // inside a wave: put back the nodes that were working or parked, queue the rest
		r.phase = phaseExecuting
		r.queue = r.queue[:0]
		for _, id := range r.waves[r.wave] {
			switch r.node(id).state {
			case nodePending:
				if in := rp.pendingOfKind(messages.InterruptNodeApproval, id); in != nil {
					r.startNodeWith(ctx, id, &agentShared{}, &agentRestore{interrupt: in, call: -1})
				} else {
					r.queue = append(r.queue, id)
				}
			case nodeRunning:
				l := rp.lanes[messages.NodeStream(id)]
				if in := rp.interruptOn(messages.NodeStream(id)); in != nil && l != nil {
					if i := callIndex(l, in.raised.CallID); i >= 0 {
						shared := &agentShared{opened: true, attempts: l.attempts, subSeq: l.subSeq, approved: true}
						r.startNodeWith(ctx, id, shared, &agentRestore{interrupt: in, lane: l, call: i})
						continue
					}
				}
				shared := &agentShared{opened: true, attempts: 1, approved: true, lastPanic: "server restarted"}
				if l != nil {
					shared.attempts, shared.subSeq = l.attempts, l.subSeq
				}
				r.startNodeWith(ctx, id, shared, nil)
			}
		}
		r.advance(ctx)
	}
}

// setPlanIfAny restores the plan and node states of a run that is ending.
func (r *runActor) setPlanIfAny(rp *replayRun) {
	if rp.plan == nil {
		return
	}
	r.setPlan(*rp.plan, rp.waves)
	r.fixed = map[string]int{}
	for w := 0; w <= rp.wave && w < len(rp.waves); w++ {
		for _, id := range rp.waves[w] {
			r.fixed[id] = w
		}
	}
	if h, err := citations.FromHandoff(rp.citations); err == nil {
		r.cites = h
	}
	for id, n := range rp.nodes {
		if _, ok := r.pos[id]; !ok {
			continue
		}
		r.node(id).state, r.node(id).output, r.node(id).cites = n.state, n.output, n.cites
		switch n.state {
		case nodeCompleted:
			r.counts.Completed++
		case nodeFailed:
			r.counts.Failed++
		case nodeCancelled:
			r.counts.Cancelled++
		case nodeSkipped:
			r.counts.Skipped++
		}
	}
}

// restartAgent starts an agent again after a restart: it announces
// agent_restarted on its lane (or opens it, if it never did).
func (r *runActor) restartAgent(ctx actor.Context, role model.Role, id string, lane messages.Lane, req model.Request, node *nodeInfo, l *replayLane) {
	shared := &agentShared{lastPanic: "server restarted"}
	if l != nil {
		shared.opened, shared.attempts, shared.subSeq = true, l.attempts, l.subSeq
	}
	r.spawnWith(ctx, role, id, lane, req, node, shared, nil)
}

func callIndex(l *replayLane, callID string) int {
	for i, id := range l.callIDs {
		if id == callID {
			return i
		}
	}
	return -1
}

// reattach puts a rebuilt agent back on its pending interrupt.
func (a *agentActor) reattach(ctx actor.Context, rs *agentRestore) {
	defer a.spec.e.restoring.Done()
	if rs.call < 0 { // the node gate
		t := a.target()
		t.lane = messages.RunLane()
		t.reattach(ctx, rs.interrupt, func(res *messages.Resolution) { a.nodeDecided(ctx, res) })
		return
	}
	l := rs.lane
	a.turn = l.turn
	a.text.WriteString(l.text.String())
	a.usage = l.usage
	a.calls, a.callIDs = l.calls, l.callIDs
	a.results = make([]model.ToolResult, len(l.calls))
	for i, c := range l.calls {
		a.results[i] = model.ToolResult{CallID: c.ID, Name: c.Name}
		if res := l.results[l.callIDs[i]]; res != nil {
			a.results[i].Content, a.results[i].IsError = *res, l.errs[l.callIDs[i]]
		} else if i < rs.call {
			// Started before the restart and never answered (a lost
			// sub-agent): the model learns it failed.
			a.toolResult(ctx, i, "", fmt.Errorf("%s was interrupted by a server restart", c.Name))
		}
	}
	a.next = rs.call + 1
	c := a.calls[rs.call]
	switch rs.interrupt.raised.Kind {
	case messages.InterruptInfoRequest:
		a.target().reattach(ctx, rs.interrupt, func(res *messages.Resolution) { a.answered(ctx, rs.call, res) })
	default:
		a.target().reattach(ctx, rs.interrupt, func(res *messages.Resolution) { a.approved(ctx, rs.call, c, res) })
	}
}

// deepestFirst orders lanes to close: deeper lanes first (a child's
// before its parent's), then by stream id, so the order is deterministic.
func deepestFirst(x, y messages.Lane) int {
	return cmp.Or(y.Depth-x.Depth, strings.Compare(string(x.StreamID), string(y.StreamID)))
}
