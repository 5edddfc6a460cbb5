package actors

import (
	"encoding/json"
	"errors"
	"fmt"

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

//
// In consult mode (advisor mode "consult") the gate is off; instead a
// worker's consult_advisor call runs an advisor model turn (quiet, like a
// check) on its question, and the advice is the call's result. Each agent
// has max_consults consults; a call beyond them is an error result saying
// the budget is spent. A turn's consults run one at a time, in call order.

// adviceState is an agent's advisor gate, or its consults.
type adviceState struct {
	gate     *advisor.Gate
	checking bool   // an advisor turn is running
	checks   int    // advisor turns so far (the scripted advisor counts them)
	guidance string // a redirect for the next turn

	consults   *advisor.Consults
	consulting int          // the call whose consult turn is running, -1 for none
	queued     []consultReq // consults of the turn waiting for the running one
}

// consultReq is a consult_advisor call waiting for its advisor turn.
type consultReq struct {
	idx      int
	question string
}

// adviserOn reports whether the advisor checks this agent's terminating turns.
func (s *agentSpec) adviserOn() bool {
	return s.run.advisor != nil && !s.run.consultMode() && s.role == model.RoleWorker
}

// consult answers call i, a consult_advisor call: an error result when the
// run's advisor is not in consult mode, when the agent is not a worker or
// when its budget is spent; otherwise the call works until the advisor's
// answer (consulted).
func (a *agentActor) consult(ctx actor.Context, i int, c model.ToolCall) {
	var in struct {
		Question string `json:"question"`
	}
	if err := json.Unmarshal(c.Args, &in); err != nil || in.Question == "" {
		a.toolResult(ctx, i, "", errors.New(`consult_advisor needs {"question": "<what you want advice on>"}`))
		return
	}
	if !a.spec.run.consultMode() || a.spec.role != model.RoleWorker {
		a.toolResult(ctx, i, "", errors.New("consult_advisor: this run has no advisor in consult mode for you"))
		return
	}
	if a.advice.consults == nil {
		a.advice.consults, a.advice.consulting = advisor.NewConsults(*a.spec.run.advisor), -1
	}
	if err := a.advice.consults.Take(); err != nil {
		a.toolResult(ctx, i, "", err)
		return
	}
	a.batch.startWorking(a.spec.e.cfg.Now(), i)
	if a.advice.consultingNow() {
		a.advice.queued = append(a.advice.queued, consultReq{i, in.Question})
		return
	}
	a.cur = a.advice.startConsult(ctx, a.spec, a.text.String(), consultReq{i, in.Question})
}

func (s *adviceState) consultingNow() bool { return s.consults != nil && s.consulting >= 0 }

// startConsult runs the advisor's model turn on consult q of the agent of
// spec sp, whose answer so far is review; the turn is the agent's to hold.
func (s *adviceState) startConsult(ctx actor.Context, sp *agentSpec, review string, q consultReq) *turnHandle {
	s.consulting = q.idx
	s.checks++
	req := model.Request{Role: model.RoleAdvisor, RunID: sp.run.runID, AgentID: sp.agentID, Question: sp.run.question,
		Goal: sp.req.Goal, Review: review, Consult: q.question, Turn: s.checks, Attempt: sp.shared.attempts}
	return startModelTurn(ctx, sp.e, sp.run, sp.agentID, sp.lane, req, true)
}

// consulted takes the advisor's answer to the running consult: the
// advice is its call's result (a failed turn, an error result), then the
// next queued consult starts.
func (a *agentActor) consulted(ctx actor.Context, m *turnDone) {
	i := a.advice.consulting
	a.advice.consulting = -1
	if len(a.advice.queued) > 0 {
		next := a.advice.queued[0]
		a.advice.queued = a.advice.queued[1:]
		a.cur = a.advice.startConsult(ctx, a.spec, a.text.String(), next)
	}
	if m.err != nil {
		a.callAnswered(ctx, i, answer{err: fmt.Errorf("the advisor could not answer: %w", m.err)})
		return
	}
	a.callAnswered(ctx, i, answer{out: advisor.Advice(m.text)})
}

// startCheck starts the advisor's check of review, the answer so far of
// the agent of spec sp; the turn is the agent's to hold.
func (s *adviceState) startCheck(ctx actor.Context, sp *agentSpec, review string) *turnHandle {
	if s.gate == nil {
		s.gate = advisor.NewGate(*sp.run.advisor)
	}
	s.checking = true
	s.checks++
	req := model.Request{Role: model.RoleAdvisor, RunID: sp.run.runID, AgentID: sp.agentID, Question: sp.run.question,
		Goal: sp.req.Goal, Review: review, Turn: s.checks, Attempt: sp.shared.attempts}
	return startModelTurn(ctx, sp.e, sp.run, sp.agentID, sp.lane, req, true)
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
