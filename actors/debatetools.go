package actors

import (
	"errors"
	"strconv"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/model"
)

// Debaters with tools (DebateConfig.Tools). A debater's turn is one model
// turn run by the debate actor, unless the debate gives its debaters
// tools: then the turn is an agent of its own (role debater, a child of
// the debate actor) on the turn's lane, which calls tools as any agent
// does (tool_call_started and tool_call_finished on the turn lane, a
// tool_approval under hitl tools or a policy, ask_human and ask_choice)
// and takes more model turns until it answers without calls. Its answer
// is the turn's text. The debate actor still opens and closes the turn
// lane (debate_turn_started, debate_turn_completed); the agent emits no
// opening or closing event of its own. A debater that panics is
// restarted by its supervisor as any agent is (agent_restarted on the
// turn lane); one that fails, or stops past its restart limit, fails the
// debate node.

// speaker is a debater's turn run as an agent.
type speaker struct {
	pid    *actor.PID
	shared *agentShared
}

// spawnSpeaker starts the current speaker's turn on lane as an agent with
// the debate's tools. restarted: the turn ran before a server restart, so
// its calls are this attempt's (ids "#2").
func (d *debateActor) spawnSpeaker(ctx actor.Context, lane messages.Lane, restarted bool) {
	req := d.speakerRequest()
	req.Role, req.RunID, req.Question, req.Attempt = model.RoleDebater, d.spec.run.runID, d.spec.run.question, max(d.spec.shared.attempts, d.attempt)
	req.Goal, req.Context = d.spec.req.Goal, d.spec.req.Context
	req.Tools = d.spec.e.cfg.Tools.Defs(d.cfg.Tools)
	sh := &agentShared{}
	if restarted {
		sh.attempts = 1
	}
	spec := &agentSpec{e: d.spec.e, run: d.spec.run, role: model.RoleDebater, agentID: req.AgentID, lane: lane, req: req, shared: sh, laneOwned: true}
	spec.policy = d.spec.run.policy(d.spec.e.cfg, roleDebater)
	var inst *agentActor
	props := d.spec.e.props(func() actor.Actor { inst = &agentActor{spec: spec}; return inst },
		actor.WithSupervisor(subagentStrategy(&inst)), actor.WithMailbox(actor.UnboundedLockfree()))
	name := "debater-r" + strconv.Itoa(d.round) + "." + strconv.Itoa(d.attempt) + "-" + d.cfg.Agents[d.speaker].ID
	if restarted {
		name += "-resumed"
	}
	pid, err := ctx.SpawnNamed(props, name)
	if err != nil {
		d.fail(ctx, err)
		return
	}
	d.speaking = &speaker{pid: pid, shared: sh}
}

// speakerDone takes the speaking agent's report (from its AgentDone, or
// from its shared state when its Terminated came first) as the turn's
// outcome. The finished agent is left idle, not stopped: it stops with
// the debate actor (at most agents x rounds x attempts of them, each
// idle with nothing running). Stopping each at once made protoactor
// send the already stopped agents a second Stop when the debate actor
// stopped, a dead letter.
func (d *debateActor) speakerDone(ctx actor.Context, done *messages.AgentDone) {
	d.speaking = nil
	d.turnDone(ctx, &turnDone{text: done.Output, usage: done.Usage, err: done.Err})
}

// speakerTerminated handles the speaking agent's end: with its report
// stored, as speakerDone; without one it stopped past its restart limit,
// and the debate fails.
func (d *debateActor) speakerTerminated(ctx actor.Context) {
	s := d.speaking
	if done := s.shared.done.Load(); done != nil {
		d.speakerDone(ctx, done)
		return
	}
	d.speaking = nil
	reason := "the debater stopped"
	if s.shared.lastPanic != "" {
		reason += ": " + s.shared.lastPanic
	}
	d.fail(ctx, errors.New(reason))
}

// stopSpeaker stops the speaking agent and waits (bounded by protoactor's
// future timeout) until it has stopped, so that nothing of it (a
// cancelled interrupt's event) reaches the turn lane after the debate
// closes it.
func (d *debateActor) stopSpeaker(ctx actor.Context) {
	if d.speaking == nil {
		return
	}
	_ = ctx.StopFuture(d.speaking.pid).Wait()
	d.speaking = nil
}
