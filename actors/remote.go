package actors

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/model"
	"github.com/conclave-ai/conclave/remote"
)

// A plan node whose Agent names a remote agent (Config.Remote) runs as
// that agent's task instead of model turns: its worker sends the node's
// goal and inputs as the task's message, and a goroutine it owns (the
// engine's turn group, as a model turn's) follows the task, publishing
// the lane's events as the remote.Agent reports them: remote_task first
// (journaled, with the task id, before anything else of the task), then
// text_delta and remote_task status updates. The worker alone decides
// what the result means: the answer closes the lane with node_completed,
// a remote failure with node_failed, a request for input parks the
// worker on an interrupt whose answer continues the remote task.
//
// The remote task id is kept in the agent's shared state (and folded from
// the journal after a restart: runstate.Lane.RemoteTask), so a restarted
// worker follows the same task again (SubscribeToTask) instead of
// starting another. A worker stopped because its run ends (an abort, a
// failure) cancels the remote task; one stopped to freeze or fall asleep
// does not: the run will follow it again.

// remoteCancelTimeout bounds the CancelTask of a stopped node's task.
const remoteCancelTimeout = 10 * time.Second

// remoteCall is agentRestore.call for a remote node parked on its
// remote's request for input.
const remoteCall = -2

// remoteFollower is an agent's follower of its remote task: the handle on
// the goroutine running the task's current call, and the task's ids,
// which it keeps in the agent's shared state (agentShared.remoteTask) when
// a call ends or stops. What a call's end means is the agent's to decide
// (remoteDone). The zero value follows nothing.
type remoteFollower struct {
	cur *remoteHandle // the running call, nil between calls
}

// remoteHandle is the worker's handle on the goroutine following its task.
type remoteHandle struct {
	turnHandle
	ids atomic.Pointer[remoteIDs] // the task's, once the remote named it
}

type remoteIDs struct{ task, context string }

// remoteDone is the end of one call of the task (the goroutine's last word).
type remoteDone struct {
	h   *remoteHandle
	res remote.Result
	err error
}

// remoteAgentName is the remote agent the worker's node names, or the
// one a sub-agent was delegated to ("" for a model-driven agent).
func (s *agentSpec) remoteAgentName() string {
	switch {
	case s.role == model.RoleSubagent:
		return s.remoteAgent
	case s.role != model.RoleWorker || s.node == nil || s.node.node == nil:
		return ""
	}
	return s.node.node.Agent
}

// start starts (or, after a restart, follows again) the task of remote
// agent name for the agent of spec sp; the error is a name not configured.
func (f *remoteFollower) start(ctx actor.Context, sp *agentSpec, name string) error {
	ag, err := sp.e.cfg.Remote.Lookup(name)
	if err != nil {
		return fmt.Errorf("node %s: %w", sp.agentID, err)
	}
	sh := sp.shared
	req := remote.Request{Text: remoteMessage(sp.req.Goal, sp.req.Context)}
	if sh.remoteTask != "" {
		req = remote.Request{TaskID: sh.remoteTask, ContextID: sh.remoteContext, Resubscribe: true}
	}
	f.run(ctx, sp, ag, req)
	return nil
}

// answer sends text, the human's answer to the remote's request for
// input, to the task, which goes on; the error is a name not configured.
func (f *remoteFollower) answer(ctx actor.Context, sp *agentSpec, text string) error {
	ag, err := sp.e.cfg.Remote.Lookup(sp.remoteAgentName())
	if err != nil {
		return fmt.Errorf("node %s: %w", sp.agentID, err)
	}
	sh := sp.shared
	f.run(ctx, sp, ag, remote.Request{TaskID: sh.remoteTask, ContextID: sh.remoteContext, Text: text})
	return nil
}

// remoteMessage is the task's message: the node's goal, then its inputs.
func remoteMessage(goal string, inputs []string) string {
	if len(inputs) == 0 {
		return goal
	}
	return goal + "\n\nInputs:\n" + strings.Join(inputs, "\n")
}

// run makes call req of the task on a goroutine of the engine's turn
// group; the worker receives a *remoteDone when it ends.
func (f *remoteFollower) run(ctx actor.Context, sp *agentSpec, ag remote.Agent, req remote.Request) {
	e, run := sp.e, sp.run
	tctx, cancel := context.WithCancel(context.Background())
	h := &remoteHandle{turnHandle: turnHandle{cancel: cancel, done: make(chan struct{})}}
	if req.TaskID != "" {
		h.ids.Store(&remoteIDs{task: req.TaskID, context: req.ContextID})
	}
	f.cur = h
	root, self := ctx.ActorSystem().Root, sendablePID(ctx.Self())
	tmpl := messages.Emit{RunID: run.runID, AgentID: sp.agentID, Lane: sp.lane}
	output := newTurnOutput(e.cfg.MaxDeltaBytes, -1)
	emit := func(p messages.Payload) error {
		em := tmpl
		switch p := p.(type) {
		case *messages.TextDeltaPayload:
			return output.pieces(p.Delta, func(d string) error {
				em.Payload = &messages.TextDeltaPayload{Delta: d}
				return run.out.send(tctx, root, &em)
			})
		case *messages.RemoteTaskPayload:
			em.Payload = p
			if h.ids.Load() == nil {
				// The task's id is journaled before anything else of it
				// is followed: a server killed from now on finds it.
				h.ids.Store(&remoteIDs{task: p.TaskID, context: p.ContextID})
				return run.out.postDurable(tctx, root, &em)
			}
		default:
			em.Payload = p
		}
		return run.out.send(tctx, root, &em)
	}
	follow := func() {
		defer close(h.done)
		res, err := ag.Run(tctx, req, emit)
		if tctx.Err() != nil {
			return // the worker is stopping and waits only for done
		}
		root.Send(self, &remoteDone{h: h, res: res, err: err})
	}
	if !e.turns.Go(follow) {
		cancel()
		close(h.done)
		ctx.Send(ctx.Self(), &remoteDone{h: h, err: ErrShuttingDown})
	}
}

// take reports whether m ends the running call (else it is stale: an
// instance's before a restart) and, if so, keeps the task's ids in sh.
func (f *remoteFollower) take(sh *agentShared, m *remoteDone) bool {
	if m.h != f.cur {
		return false
	}
	f.cur = nil
	if ids := m.h.ids.Load(); ids != nil {
		sh.remoteTask, sh.remoteContext, sh.remoteOpen = ids.task, ids.context, true
	}
	return true
}

// remoteDone takes the end of a call of the task.
func (a *agentActor) remoteDone(ctx actor.Context, m *remoteDone) {
	if a.finished || a.stopping || !a.remote.take(a.spec.shared, m) {
		return // stale: an instance's before a restart
	}
	sh := a.spec.shared
	name := a.spec.remoteAgentName()
	switch {
	case m.err != nil:
		a.finishFailed(ctx, fmt.Errorf("remote agent %s: %w", name, m.err))
	case m.res.Outcome == remote.Completed:
		sh.remoteOpen = false
		a.text.Reset()
		a.text.WriteString(m.res.Output)
		a.finishOK(ctx)
	case m.res.Outcome == remote.InputRequired && m.res.Input != nil:
		a.askForRemote(ctx, m.res.Input)
	default:
		sh.remoteOpen = false
		a.finishFailed(ctx, fmt.Errorf("remote agent %s: task %s: %s", name, m.res.TaskID, m.res.Reason))
	}
}

// askForRemote parks the worker on an interrupt for the remote's request
// for input: a tool approval when the remote asks for one, else a question.
func (a *agentActor) askForRemote(ctx actor.Context, in *remote.Input) {
	p := &messages.InterruptRaisedPayload{Kind: messages.InterruptInfoRequest, Question: in.Question,
		ContextSnippet: fmt.Sprintf("remote agent %s, task %s", a.spec.remoteAgentName(), a.spec.shared.remoteTask)}
	if in.Kind == messages.InterruptToolApproval {
		p = &messages.InterruptRaisedPayload{Kind: messages.InterruptToolApproval, ToolName: in.ToolName, ToolArgs: in.ToolArgs}
		if len(p.ToolArgs) == 0 {
			p.ToolArgs = []byte("{}")
		}
	}
	a.target().raiseInterrupt(ctx, p, func(res *messages.Resolution) { a.remoteAnswered(ctx, res) })
}

// remoteAnswered sends the human's answer to the remote task, which goes
// on; an unanswered question fails the node (and cancels the task).
func (a *agentActor) remoteAnswered(ctx actor.Context, res *messages.Resolution) {
	if res.Cancelled || a.finished || a.stopping {
		return
	}
	name := a.spec.remoteAgentName()
	text, err := remoteAnswer(res)
	if err != nil {
		a.finishFailed(ctx, fmt.Errorf("remote agent %s: %w", name, err))
		return
	}
	if err := a.remote.answer(ctx, a.spec, text); err != nil {
		a.finishFailed(ctx, err)
	}
}

// remoteAnswer is the text that answers a remote's request for input, as
// an A2A agent reads it (our server's convention: "approve", "reject",
// "reject: <feedback>", or the answer to a question).
func remoteAnswer(res *messages.Resolution) (string, error) {
	if res.Kind == messages.InterruptInfoRequest {
		if res.Expired {
			return "", errors.New("nobody answered its question before the timeout")
		}
		return res.Response, nil
	}
	switch res.Decision {
	case messages.DecisionApprove:
		return "approve", nil
	case messages.DecisionRevise:
		return "reject: the approver wanted to edit the arguments, which a remote agent cannot be given", nil
	}
	if res.Feedback != "" {
		return "reject: " + res.Feedback, nil
	}
	return "reject", nil
}

// stop ends the goroutine following the task of the agent of spec sp;
// when the run is ending (stopping: not freezing, not falling asleep) it
// cancels the remote task too, on a goroutine of the turn group bounded
// by remoteCancelTimeout.
func (f *remoteFollower) stop(sp *agentSpec, stopping bool) {
	if f.cur != nil {
		f.cur.stop()
		if ids := f.cur.ids.Load(); ids != nil {
			sh := sp.shared
			sh.remoteTask, sh.remoteContext, sh.remoteOpen = ids.task, ids.context, true
		}
		f.cur = nil
	}
	sh := sp.shared
	if !stopping || !sh.remoteOpen || sp.run.out.silent() {
		return
	}
	if _, ending := sp.run.outcome.decided(); !ending {
		return
	}
	ag, err := sp.e.cfg.Remote.Lookup(sp.remoteAgentName())
	if err != nil {
		return
	}
	sh.remoteOpen = false
	e, id, log := sp.e, sh.remoteTask, sp.e.cfg.Logger
	e.turns.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), remoteCancelTimeout)
		defer cancel()
		if err := ag.Cancel(ctx, id); err != nil {
			log.Warn("cancel of a remote task failed", "agent", sp.remoteAgentName(), "task_id", id, "error", err)
		}
	})
}
