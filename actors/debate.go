package actors

import (
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/conclave-ai/conclave/actors/debate"
	"github.com/conclave-ai/conclave/actors/runstate"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/model"
)

// debateActor runs a debate node: rounds in which every agent speaks once,
// in order (each turn a lane of its own under the node's lane), an
// optional judge after each round that may stop the debate early on
// consensus once min_rounds are done, compaction of rounds older than
// compact_after, the stance map, the debate synthesis (the node's output)
// and a dissent event for each overruled position. Model turns run in
// goroutines it owns, one at a time (turn.go).
type debateActor struct {
	spec *agentSpec // role worker; node is the debate node
	cfg  *messages.DebateConfig

	round     int
	speaker   int
	phase     debatePhase
	cur       *turnHandle
	sub       *messages.Lane // the open turn, judge or synthesis lane
	usage     messages.Usage
	tr        debate.Transcript
	compacted int // rounds compacted so far
	declared  map[string]messages.Stance
	finished  bool
	stopping  bool
	// restore puts a debate that was running before a restart back where
	// it was (resume).
	restore *runstate.Debate
	// attempt is which run of the current round this is (1-based);
	// restarts counts the debate's round restarts (all-for-one: a failed
	// turn or judge restarts its whole round); before are the stances
	// declared before the round, which a restart goes back to; backoff
	// delays a restarted round (roundRetry).
	attempt  int
	restarts int
	before   map[string]messages.Stance
	backoff  *time.Timer
	retry    *roundRetry
	// speaking is the current turn's agent when the debaters have tools
	// (debatetools.go).
	speaking *speaker
}

// roundRetry: a restarted round's backoff is over; its first speaker starts.
type roundRetry struct{}

type debatePhase int

const (
	debateTurn debatePhase = iota + 1
	debateJudge
	debateSynthesis
)

func (w *graphRunner) spawnDebate(ctx actor.Context, info *nodeInfo, req model.Request, shared *agentShared, res *nodeResume) {
	r := w.r
	req.Role, req.RunID, req.AgentID, req.Question, req.Files = model.RoleWorker, r.spec.runID, info.node.ID, r.spec.question, r.spec.files
	spec := &agentSpec{e: r.e, run: r.spec, role: model.RoleWorker, agentID: info.node.ID, lane: r.nodeLane(info.node.ID), req: req, node: info, shared: shared}
	var restore *runstate.Debate
	if res != nil {
		restore = res.debate
	}
	props := r.e.props(func() actor.Actor { return &debateActor{spec: spec, cfg: info.node.Debate, restore: restore} },
		actor.WithSupervisor(noChildren(r.e.cfg)), actor.WithMailbox(actor.UnboundedLockfree()))
	r.agents.spawnChild(ctx, props, debateNamePrefix+localID(info.node.ID), &child{agentID: info.node.ID, lane: r.nodeLane(info.node.ID), role: model.RoleWorker, shared: shared})
}

func (d *debateActor) emitOn(ctx actor.Context, lane messages.Lane, p messages.Payload) {
	d.spec.run.post(ctx, d.spec.agentID, lane, p)
}

func (d *debateActor) emit(ctx actor.Context, p messages.Payload) { d.emitOn(ctx, d.spec.lane, p) }

func (d *debateActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		if rs := d.restore; rs != nil {
			d.restore = nil // a restart after a panic starts afresh
			d.resume(ctx, rs)
			return
		}
		sh := d.spec.shared
		sh.attempts++
		if !sh.opened {
			sh.opened = true
			n := d.spec.node
			d.emit(ctx, &messages.NodeStartedPayload{NodeID: n.node.ID, Wave: n.wave, Goal: n.node.Goal, Deps: n.node.Deps, Kind: messages.KindDebate, Role: n.node.Role})
		} else {
			d.emit(ctx, &messages.AgentRestartedPayload{Attempt: sh.attempts, Reason: sh.lastPanic})
		}
		d.declared = map[string]messages.Stance{}
		d.startRound(ctx, 1)
	case *turnDone:
		if !d.finished && !d.stopping {
			d.cur = nil
			d.turnDone(ctx, m)
		}
	case *turnPanicked:
		if !d.finished && !d.stopping && d.restartRound(ctx, fmt.Sprint(m.value)) {
			return
		}
		d.spec.shared.lastPanic = fmt.Sprint(m.value)
		panic(m.value)
	case *messages.AgentDone:
		if s := d.speaking; s != nil && ctx.Sender() != nil && ctx.Sender().Id == s.pid.Id && !d.finished && !d.stopping {
			d.speakerDone(ctx, m)
		}
	case *actor.Terminated:
		if s := d.speaking; s != nil && m.Who.Id == s.pid.Id && !d.finished && !d.stopping {
			d.speakerTerminated(ctx)
		}
	case *roundRetry:
		if m == d.retry && !d.stopping {
			d.backoff, d.retry = nil, nil
			d.startSpeaker(ctx)
		}
	case *actor.Stopping, *actor.Restarting:
		d.stopping = true
		if d.backoff != nil {
			d.backoff.Stop()
		}
		d.cur.stop()
		d.cur = nil
		d.stopSpeaker(ctx)
		d.closeSub(ctx)
	}
}

func (d *debateActor) nodeID() string { return d.spec.node.node.ID }

func (d *debateActor) startRound(ctx actor.Context, round int) {
	d.round, d.speaker, d.attempt = round, 0, 1
	d.before = maps.Clone(d.declared)
	d.emit(ctx, &messages.DebateRoundStartedPayload{NodeID: d.nodeID(), Round: round})
	// Rounds older than the last compact_after are summarised in context.
	keep := d.cfg.EffectiveCompactAfter()
	for d.compacted < round-1-keep {
		d.compacted++
		d.emit(ctx, &messages.DebateRoundCompactedPayload{NodeID: d.nodeID(), Round: d.compacted, Summary: d.tr.CompactRound(d.compacted)})
	}
	d.startSpeaker(ctx)
}

func (d *debateActor) startSpeaker(ctx actor.Context) {
	ag := d.cfg.Agents[d.speaker]
	lane := d.spec.lane.Child(messages.DebateTurnStreamAt(d.nodeID(), d.round, d.attempt, ag.ID))
	d.phase, d.sub = debateTurn, &lane
	name, color, contentiousness := ag.Display(d.speaker)
	d.emitOn(ctx, lane, &messages.DebateTurnStartedPayload{NodeID: d.nodeID(), AgentID: ag.ID, Persona: ag.Persona, Round: d.round,
		AgentName: name, Color: color, Contentiousness: contentiousness, Attempt: d.attemptField()})
	if len(d.cfg.Tools) > 0 {
		d.spawnSpeaker(ctx, lane, false)
		return
	}
	d.turn(ctx, lane, d.speakerRequest())
}

func (d *debateActor) speakerRequest() model.Request {
	ag := d.cfg.Agents[d.speaker]
	_, _, contentiousness := ag.Display(d.speaker)
	return model.Request{Role: model.RoleDebater, AgentID: d.nodeID() + ":" + ag.ID, Persona: ag.Persona, Round: d.round,
		Transcript: d.tr.Lines(d.cfg.EffectiveCompactAfter()), Temperature: &contentiousness}
}

func (d *debateActor) judgeRequest() model.Request {
	return model.Request{Role: model.RoleJudge, AgentID: d.nodeID() + ":judge", Round: d.round, Transcript: d.tr.Lines(d.cfg.EffectiveCompactAfter())}
}

func (d *debateActor) synthesisRequest() model.Request {
	return model.Request{Role: model.RoleSynthesizer, AgentID: d.nodeID() + ":synthesis",
		Goal: "Give the debate's verdict on: " + d.spec.req.Goal, Context: d.tr.Lines(d.cfg.EffectiveCompactAfter())}
}

// startJudge opens the round's judge lane and asks the judge.
func (d *debateActor) startJudge(ctx actor.Context) {
	lane := d.spec.lane.Child(messages.JudgeStreamAt(d.nodeID(), d.round, d.attempt))
	d.phase, d.sub = debateJudge, &lane
	d.emitOn(ctx, lane, &messages.DebateJudgeStartedPayload{NodeID: d.nodeID(), Round: d.round, Attempt: d.attemptField()})
	d.turn(ctx, lane, d.judgeRequest())
}

// startSynthesis gives the stance map, then asks for the debate's verdict.
func (d *debateActor) startSynthesis(ctx actor.Context, stanceMap bool) {
	if stanceMap {
		d.emit(ctx, &messages.DebateStanceMapPayload{NodeID: d.nodeID(), Rounds: d.round, Stances: d.stances()})
	}
	lane := d.spec.lane.Child(messages.SynthesisStreamOf(d.nodeID()))
	d.phase, d.sub = debateSynthesis, &lane
	d.emitOn(ctx, lane, &messages.SynthesisStartedPayload{Inputs: len(d.tr.Lines(d.cfg.EffectiveCompactAfter()))})
	d.turn(ctx, lane, d.synthesisRequest())
}

// resume puts a debate that was running before a restart back where its
// events left it: same round, same speaker; a turn, judge or synthesis
// that was streaming restarts on its lane (agent_restarted), and the
// debate's own lane stays as it was.
func (d *debateActor) resume(ctx actor.Context, rs *runstate.Debate) {
	d.declared, d.before = map[string]messages.Stance{}, map[string]messages.Stance{}
	for _, t := range rs.Turns {
		d.tr.Add(t.Round, t.Agent, t.Text)
		d.declared[t.Agent] = t.Stance
		if t.Round < rs.Round {
			d.before[t.Agent] = t.Stance
		}
	}
	d.round, d.compacted, d.attempt, d.restarts = rs.Round, rs.Compacted, max(rs.Attempt, 1), rs.Restarts
	spoken := 0
	for _, t := range rs.Turns {
		if t.Round == d.round {
			spoken++
		}
	}
	judged := rs.Judged != nil && rs.Judged.Round == d.round
	switch {
	case rs.Synthesis.Answer != nil:
		d.finish(ctx, *rs.Synthesis.Answer)
	case rs.Open != nil:
		o := rs.Open
		lane := o.Lane
		d.emitOn(ctx, lane, &messages.AgentRestartedPayload{Attempt: 2, Reason: "server restarted"})
		d.sub = &lane
		switch o.Kind {
		case messages.DebateTurnStarted:
			d.phase, d.speaker = debateTurn, d.agentIndex(o.Agent)
			if len(d.cfg.Tools) > 0 {
				d.spawnSpeaker(ctx, lane, true)
				break
			}
			d.turn(ctx, lane, d.speakerRequest())
		case messages.DebateJudgeStarted:
			d.phase = debateJudge
			d.turn(ctx, lane, d.judgeRequest())
		default:
			d.phase = debateSynthesis
			d.turn(ctx, lane, d.synthesisRequest())
		}
	case rs.StanceMap != nil:
		d.startSynthesis(ctx, false)
	case d.round == 0:
		d.startRound(ctx, 1)
	case spoken < len(d.cfg.Agents):
		d.speaker = spoken
		d.startSpeaker(ctx)
	case d.cfg.Judge && !judged:
		d.startJudge(ctx)
	default:
		d.nextRound(ctx, judged && rs.Judged.EarlyStop)
	}
}

// agentIndex is the place of agent id among the debate's agents.
func (d *debateActor) agentIndex(id string) int {
	for i, a := range d.cfg.Agents {
		if a.ID == id {
			return i
		}
	}
	return 0
}

// turn starts a model turn on lane; goal and context are the node's.
func (d *debateActor) turn(ctx actor.Context, lane messages.Lane, req model.Request) {
	req.RunID, req.Question, req.Files, req.Turn, req.Attempt = d.spec.run.runID, d.spec.run.question, d.spec.run.files, 1, d.spec.shared.attempts
	if d.phase == debateTurn || d.phase == debateJudge {
		req.Attempt = max(req.Attempt, d.attempt) // the round's restarts are its agents' attempts
	}
	if req.Goal == "" {
		req.Goal, req.Context = d.spec.req.Goal, d.spec.req.Context
	}
	d.cur = startModelTurn(ctx, d.spec.e, d.spec.run, req.AgentID, lane, req, false)
}

func (d *debateActor) turnDone(ctx actor.Context, m *turnDone) {
	d.usage = d.usage.Add(m.usage)
	if m.err == nil && len(m.calls) > 0 {
		m.err = errors.New("debate agents have no tools (the debate's config gives them none)")
	}
	if m.err != nil && errors.Is(m.err, model.ErrTransient) && d.restartRound(ctx, m.err.Error()) {
		return
	}
	if m.err != nil {
		d.fail(ctx, m.err)
		return
	}
	switch d.phase {
	case debateTurn:
		ag := d.cfg.Agents[d.speaker]
		stance, body := debate.ParseStance(m.text)
		d.declared[ag.ID] = stance
		d.tr.Add(d.round, ag.ID, body)
		d.emitOn(ctx, *d.sub, &messages.DebateTurnCompletedPayload{NodeID: d.nodeID(), AgentID: ag.ID, Round: d.round, Text: body, Stance: stance,
			Attempt: d.attemptField()})
		d.sub = nil
		d.speaker++
		switch {
		case d.speaker < len(d.cfg.Agents):
			d.startSpeaker(ctx)
		case d.cfg.Judge:
			d.startJudge(ctx)
		default:
			d.nextRound(ctx, false)
		}
	case debateJudge:
		consensus := debate.ParseJudge(m.text)
		early := consensus && d.round >= d.cfg.EffectiveMinRounds()
		d.emitOn(ctx, *d.sub, &messages.DebateJudgeSummaryPayload{NodeID: d.nodeID(), Round: d.round, Consensus: consensus, EarlyStop: early,
			Assessment: m.text, Attempt: d.attemptField()})
		d.sub = nil
		d.nextRound(ctx, early)
	case debateSynthesis:
		d.emitOn(ctx, *d.sub, &messages.SynthesisCompletedPayload{Answer: m.text})
		d.sub = nil
		d.finish(ctx, m.text)
	}
}

// attemptField is the attempt payloads carry: 0 (absent) for a round's
// first run.
func (d *debateActor) attemptField() int {
	if d.attempt <= 1 {
		return 0
	}
	return d.attempt
}

// restartRound is the debate's all-for-one supervision of its agents: a
// turn or the judge failed (a panic, a transient model error), and since
// the round's agents build on each other's turns, the whole round starts
// again from its first speaker, after a backoff, on the lanes of its next
// attempt. The failed lane closes with restarted: true; the round's turns
// and stances so far are forgotten. It reports false, and changes
// nothing, outside a round's turns, when the debater role's supervision
// is stop, or past its restart limit (counted over the whole debate): the
// failure then ends the debate node as before.
func (d *debateActor) restartRound(ctx actor.Context, reason string) bool {
	p := d.spec.run.policy(d.spec.e.cfg, roleDebater)
	if (d.phase != debateTurn && d.phase != debateJudge) || d.sub == nil || p.Strategy == messages.SupervisionStop || d.restarts >= p.Limit {
		return false
	}
	d.cur = nil
	lane := *d.sub
	d.sub = nil
	if d.phase == debateTurn {
		d.emitOn(ctx, lane, &messages.DebateTurnCompletedPayload{NodeID: d.nodeID(), AgentID: d.cfg.Agents[d.speaker].ID, Round: d.round,
			Stance: messages.StanceHeld, Restarted: true, Attempt: d.attemptField()})
	} else {
		d.emitOn(ctx, lane, &messages.DebateJudgeSummaryPayload{NodeID: d.nodeID(), Round: d.round, Restarted: true, Attempt: d.attemptField()})
	}
	d.restarts++
	d.attempt++
	d.tr.DropRound(d.round)
	d.declared = maps.Clone(d.before)
	d.speaker, d.phase = 0, debateTurn
	d.emit(ctx, &messages.DebateRoundRestartedPayload{NodeID: d.nodeID(), Round: d.round, Attempt: d.attempt, Reason: reason})
	wait := p.Wait(string(d.spec.run.runID)+"\x00"+d.nodeID(), d.restarts)
	if wait <= 0 {
		d.startSpeaker(ctx)
		return true
	}
	root, self, retry := ctx.ActorSystem().Root, ctx.Self(), &roundRetry{}
	d.backoff, d.retry = time.AfterFunc(wait, func() { root.Send(self, retry) }), retry
	return true
}

// nextRound starts the next round, or ends the rounds: stance map, then
// the debate synthesis.
func (d *debateActor) nextRound(ctx actor.Context, stop bool) {
	if !stop && d.round < d.cfg.Rounds {
		d.startRound(ctx, d.round+1)
		return
	}
	d.startSynthesis(ctx, true)
}

// finish resolves the debate: every overruled position is kept as a
// dissent, then the node completes with the synthesis.
func (d *debateActor) finish(ctx actor.Context, verdict string) {
	for _, p := range debate.Dissents(d.nodeID(), d.stances(), d.tr.Opening()) {
		d.emit(ctx, &p)
	}
	closing := &messages.NodeCompletedPayload{NodeID: d.nodeID(), Output: verdict, Attempts: d.spec.shared.attempts, Usage: d.usage}
	d.emit(ctx, closing)
	d.report(ctx, &messages.AgentDone{AgentID: d.nodeID(), Output: verdict, Usage: d.usage, Attempts: d.spec.shared.attempts, Closing: closing})
}

// stances are the agents' final stances, in agent order.
func (d *debateActor) stances() []messages.AgentStance {
	ids := make([]string, len(d.cfg.Agents))
	for i, a := range d.cfg.Agents {
		ids[i] = a.ID
	}
	return debate.FinalStances(ids, d.declared)
}

func (d *debateActor) fail(ctx actor.Context, err error) {
	d.closeSub(ctx)
	closing := &messages.NodeFailedPayload{NodeID: d.nodeID(), Error: err.Error(), Attempts: d.spec.shared.attempts, Code: model.CodeOf(err)}
	d.emit(ctx, closing)
	d.report(ctx, &messages.AgentDone{AgentID: d.nodeID(), Usage: d.usage, Attempts: d.spec.shared.attempts, Err: err, Closing: closing})
}

// closeSub closes the open turn, judge or synthesis lane of a debate that
// stops or fails in the middle of it.
func (d *debateActor) closeSub(ctx actor.Context) {
	if d.sub == nil {
		return
	}
	lane := *d.sub
	d.sub = nil
	switch d.phase {
	case debateTurn:
		d.emitOn(ctx, lane, &messages.DebateTurnCompletedPayload{NodeID: d.nodeID(), AgentID: d.cfg.Agents[d.speaker].ID, Round: d.round,
			Stance: messages.StanceHeld, Cancelled: true, Attempt: d.attemptField()})
	case debateJudge:
		d.emitOn(ctx, lane, &messages.DebateJudgeSummaryPayload{NodeID: d.nodeID(), Round: d.round, Cancelled: true, Attempt: d.attemptField()})
	case debateSynthesis:
		d.emitOn(ctx, lane, &messages.SynthesisFailedPayload{Error: "the debate stopped"})
	}
}

func (d *debateActor) report(ctx actor.Context, done *messages.AgentDone) {
	d.finished = true
	d.spec.shared.done.Store(done)
	ctx.Request(ctx.Parent(), done)
}
