package actors

import (
	"errors"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/conclave-ai/conclave/actors/advisor"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/model"
)

// The advisor gate (run option StartRun.Advisor): when a worker's turn
// ends without tool calls (its terminating turn), an advisor model turn
// (role advisor, not streamed) checks the answer so far and signals
// CONTINUE, REDIRECT or HALT. The decision is an advisor event on the
// worker's lane: gate_continue finishes the node; gate_redirect runs one
// more turn with the guidance (the redirect budget is max_redirects per
// agent, then gate_budget); gate_halt and gate_budget are followed by
// escalation and node_failed, and the run ends with advisor_halt. A
// malformed answer halts unless the run says malformed_continues.

// adviceState is an agent's advisor gate.
type adviceState struct {
	gate     *advisor.Gate
	checking bool   // an advisor turn is running
	checks   int    // advisor turns so far (the scripted advisor counts them)
	guidance string // a redirect for the next turn
}

// adviserOn reports whether the advisor checks this agent's terminating turns.
func (a *agentActor) adviserOn() bool {
	return a.spec.run.advisor != nil && a.spec.role == model.RoleWorker
}

// advise starts the advisor's check of the answer so far.
func (a *agentActor) advise(ctx actor.Context) {
	if a.advice.gate == nil {
		a.advice.gate = advisor.NewGate(*a.spec.run.advisor)
	}
	a.advice.checking = true
	a.advice.checks++
	req := model.Request{Role: model.RoleAdvisor, RunID: a.spec.run.runID, AgentID: a.spec.agentID, Question: a.spec.run.question,
		Goal: a.spec.req.Goal, Review: a.text.String(), Turn: a.advice.checks, Attempt: a.spec.shared.attempts}
	a.cur = startModelTurn(ctx, a.spec.e, a.spec.run, a.spec.agentID, a.spec.lane, req, true)
}

// advised applies the advisor's answer.
func (a *agentActor) advised(ctx actor.Context, m *turnDone) {
	a.advice.checking = false
	if m.err != nil {
		a.finishFailed(ctx, m.err)
		return
	}
	d := a.advice.gate.Decide(m.text)
	a.emit(ctx, d.Payload(a.text.String()))
	switch {
	case d.Halts():
		a.emit(ctx, &messages.EscalationPayload{Reason: d.Detail})
		a.failCode(ctx, errors.New("advisor halt: "+d.Detail), messages.ErrCodeAdvisorHalt)
	case d.Kind == messages.AdvisorRedirect:
		a.advice.guidance = d.Detail
		a.startTurn(ctx)
	default:
		a.finishOK(ctx)
	}
}
