package actors

import (
	"context"
	"io"
	"strings"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/model"
)

// turnHandle is the agent's handle on its running turn goroutine.
type turnHandle struct {
	cancel context.CancelFunc
	done   chan struct{} // closed when the goroutine has returned
}

// Messages a turn goroutine sends to its own agent.
type (
	turnDone struct {
		text  string
		calls []model.ToolCall
		usage messages.Usage
		err   error
	}
	turnPanicked struct{ value any }
)

// startTurn streams the next model turn in a goroutine owned by the engine's
// turn group. The goroutine publishes deltas straight to the hub (they keep
// their order: one sender, FIFO mailbox) and reports the turn's result to
// the agent, which alone decides what happens next.
func (a *agentActor) startTurn(ctx actor.Context) {
	a.turn++
	req := a.spec.req
	req.Turn, req.Attempt, req.ToolResults = a.turn, a.spec.shared.attempts, a.results
	a.results = nil

	tctx, cancel := context.WithCancel(context.Background())
	h := &turnHandle{cancel: cancel, done: make(chan struct{})}
	a.cur = h
	t := &turnRunner{
		e: a.spec.e, model: a.spec.run.model, req: req, root: ctx.ActorSystem().Root, self: sendablePID(ctx.Self()), hub: a.spec.run.hub,
		emit: messages.Emit{RunID: a.spec.run.runID, AgentID: a.spec.agentID, Lane: a.spec.lane},
	}
	if !a.spec.e.turns.Go(func() { t.run(tctx, h.done) }) {
		cancel()
		close(h.done)
		ctx.Send(ctx.Self(), &turnDone{err: ErrShuttingDown})
	}
}

// stopTurn cancels the running turn and waits for its goroutine, so no
// delta of this agent can reach the hub after the agent stopped.
func (a *agentActor) stopTurn() {
	if a.cur == nil {
		return
	}
	a.cur.cancel()
	<-a.cur.done
	a.cur = nil
}

type turnRunner struct {
	e     *Engine
	model model.Model
	req   model.Request
	root  *actor.RootContext
	self  *actor.PID
	hub   *actor.PID
	emit  messages.Emit // template: run, agent, lane
}

func (t *turnRunner) publish(p messages.Payload) {
	e := t.emit
	e.Payload = p
	t.e.publish(t.root, t.hub, &e)
}

func (t *turnRunner) run(ctx context.Context, done chan struct{}) {
	defer close(done)
	defer func() {
		// A panicking model must not crash the process: hand the panic to
		// the agent, which re-raises it under supervision.
		if v := recover(); v != nil {
			t.root.Send(t.self, &turnPanicked{value: v})
		}
	}()
	res := &turnDone{}
	stream, err := t.model.Stream(ctx, t.req)
	if err != nil {
		res.err = err
	} else {
		defer stream.Close()
		var text strings.Builder
		for {
			c, err := stream.Recv()
			if err == io.EOF {
				break
			}
			if err != nil {
				res.err = err
				break
			}
			switch c := c.(type) {
			case *model.Text:
				text.WriteString(c.Text)
				t.publish(&messages.TextDeltaPayload{Delta: c.Text})
			case *model.Reasoning:
				t.publish(&messages.ReasoningDeltaPayload{Delta: c.Text})
			case *model.Call:
				res.calls = append(res.calls, c.Call)
			case *model.Usage:
				res.usage = c.Usage
				t.publish(&messages.TokenUsagePayload{Model: c.Model, Turn: t.req.Turn, Usage: c.Usage})
			}
		}
		res.text = text.String()
	}
	if ctx.Err() != nil {
		return // the agent is stopping and waits only for done
	}
	t.root.Send(t.self, res)
}
