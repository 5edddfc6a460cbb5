package actors

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.opentelemetry.io/otel/trace"

	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/model"
)

// maxKeptReasoning bounds the reasoning an agent keeps of a turn (for the
// evidence packages of its approvals).
const maxKeptReasoning = 16 << 10

// turnHandle is the agent's handle on its running turn goroutine.
type turnHandle struct {
	cancel context.CancelFunc
	done   chan struct{} // closed when the goroutine has returned
}

// Messages a turn goroutine sends to its own agent.
type (
	turnDone struct {
		text      string
		reasoning string
		calls     []model.ToolCall
		usage     messages.Usage
		err       error
	}
	turnPanicked struct{ value any }
)

// startTurn streams the next model turn in a goroutine owned by the engine's
// turn group. The goroutine publishes deltas straight to the hub (they keep
// their order: one sender, FIFO mailbox) and reports the turn's result to
// the agent, which alone decides what happens next.
func (a *agentActor) startTurn(ctx actor.Context) {
	if name := a.spec.remoteAgentName(); name != "" {
		// A remote agent's node runs no model turns.
		if err := a.remote.start(ctx, a.spec, name); err != nil {
			a.finishFailed(ctx, err)
		}
		return
	}
	if limit := a.spec.e.cfg.MaxAgentTurns; limit > 0 {
		switch {
		case a.turn >= limit:
			a.finishFailed(ctx, &model.Error{Code: model.CodeTurnLimit,
				Message: fmt.Sprintf("%s used its %d model turns (each called tools, so another was due)", a.spec.agentID, limit)})
			return
		case a.turn+1 == (limit*4+4)/5: // 80 %, rounded up
			a.emit(ctx, messages.NewWarning(messages.WarnTurnLimitNear,
				fmt.Sprintf("%s starts model turn %d of at most %d", a.spec.agentID, a.turn+1, limit)))
		}
	}
	a.turn++
	req := a.spec.req
	a.cites = a.deleg.mergeCitations(a.cites)
	if len(a.batch.calls) > 0 { // the last turn called tools: it and their results join the history
		a.history = append(a.history, model.Exchange{Text: a.turnText, Calls: a.batch.calls, Results: a.batch.results})
		a.batch.calls, a.batch.next = nil, 0
	}
	req.History = a.history
	req.Turn, req.Attempt, req.ToolResults = a.turn, a.spec.shared.attempts, a.batch.results
	req.AsyncTasks = a.deleg.tasks.Snapshot() // its own channel: never trimmed with the context
	req.Guidance, a.advice.guidance = a.advice.guidance, ""
	req.Injected = a.deleg.takeInjected()
	a.batch.results = nil

	a.cur = startModelTurn(ctx, a.spec.e, a.spec.run, a.spec.agentID, a.spec.lane, req, false)
}

// startModelTurn streams one model turn for the calling actor in a
// goroutine owned by the engine's turn group; the actor receives a
// *turnDone (or *turnPanicked) when it ends. Deltas and usage are
// published on lane as agentID; a quiet turn (an advisor's check, whose
// text is not the lane's output) publishes only its token_usage.
func startModelTurn(ctx actor.Context, e *Engine, run *runSpec, agentID string, lane messages.Lane, req model.Request, quiet bool) *turnHandle {
	tctx, cancel := context.WithCancel(context.Background())
	h := &turnHandle{cancel: cancel, done: make(chan struct{})}
	t := &turnRunner{
		model: model.WithTimeouts(run.model, model.Timeouts{Idle: e.cfg.ModelIdleTimeout, Turn: e.cfg.ModelTurnTimeout}),
		req:   req, root: ctx.ActorSystem().Root, self: sendablePID(ctx.Self()), out: run.out, quiet: quiet,
		emit:      messages.Emit{RunID: run.runID, AgentID: agentID, Lane: lane},
		output:    newTurnOutput(e.cfg.MaxDeltaBytes, e.cfg.MaxTurnOutputBytes),
		now:       e.cfg.Now,
		preflight: e.turnPreflight(run, agentID),
	}
	// turn_started goes out from the actor, before the turn's goroutine
	// exists: ahead of the turn's deltas on the lane, and at a point the
	// actor's dispatcher orders (the simulator's determinism); a model
	// that hangs shows as a turn started and not answered. A quiet turn
	// (an advisor's check) names its role, as its token_usage does.
	ts := &messages.TurnStartedPayload{Model: run.model.Name(), Turn: req.Turn, Attempt: req.Attempt}
	if quiet {
		ts.Role = req.Role.String()
	}
	run.post(ctx, agentID, lane, ts)
	if sc := turnSpan(e, run, lane, req, quiet); sc.IsValid() {
		tctx = trace.ContextWithRemoteSpanContext(tctx, sc)
	}
	if !e.turns.Go(func() { t.run(tctx, h.done) }) {
		cancel()
		close(h.done)
		ctx.Send(ctx.Self(), &turnDone{err: ErrShuttingDown})
	}
	return h
}

// stop cancels the turn and waits for its goroutine, so that nothing of
// it reaches the hub afterwards. A nil handle is a no-op.
func (h *turnHandle) stop() {
	if h == nil {
		return
	}
	h.cancel()
	<-h.done
}

type turnRunner struct {
	model model.Model
	req   model.Request
	root  *actor.RootContext
	self  *actor.PID
	out   *outbox
	quiet bool          // publish only token_usage (the caller gets the text in turnDone)
	emit  messages.Emit // template: run, agent, lane
	// output bounds the turn's deltas and its text (Config.MaxDeltaBytes,
	// Config.MaxTurnOutputBytes).
	output *turnOutput
	// now is the engine's clock (Config.Now): it times the turn for its
	// token_usage (duration and time to first token).
	now func() time.Time
	// preflight, when set, is the billing check before the model is
	// called (preflight.go): its error fails the turn.
	preflight func(context.Context) error
}

// checkBilling runs the turn's billing pre-flight, if any.
func (t *turnRunner) checkBilling(ctx context.Context) error {
	if t.preflight == nil {
		return nil
	}
	return t.preflight(ctx)
}

// publish sends a streamed event once the run's outbox has room for it
// (backpressure: the model is read only as fast as the hub journals). It
// fails only when ctx ends first.
func (t *turnRunner) publish(ctx context.Context, p messages.Payload) error {
	if t.quiet {
		u, ok := p.(*messages.TokenUsagePayload)
		if !ok {
			return nil // a quiet turn's text is not the lane's output
		}
		u.Role = t.req.Role.String() // its usage is still reported, as every model turn's
	}
	e := t.emit
	e.Payload = p
	return t.out.send(ctx, t.root, &e)
}

// progress is the event of a prompt-progress report: a worker's on its
// node lane, a synthesiser's on its synthesis lane; other roles' reports
// are not published.
func (t *turnRunner) progress(c *model.Progress) messages.Payload {
	pp := messages.PromptProgress{Processed: c.Processed, Total: c.Total, Cached: c.Cached, TimeMS: c.TimeMS}
	switch t.req.Role {
	case model.RoleWorker:
		return &messages.NodeProgressPayload{NodeID: t.req.AgentID, PromptProgress: pp}
	case model.RoleSynthesizer:
		return &messages.SynthesisProgressPayload{PromptProgress: pp}
	}
	return nil
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
	started := t.now()
	var firstToken time.Duration // 0 until the first chunk of output
	var stream model.Stream
	err := t.checkBilling(ctx)
	if err == nil {
		stream, err = t.model.Stream(ctx, t.req)
	}
	if err != nil {
		res.err = err
	} else {
		defer stream.Close()
		var text, reasoning strings.Builder
		for !t.output.cut {
			c, err := stream.Recv()
			if err == io.EOF {
				break
			}
			if err != nil {
				res.err = err
				break
			}
			switch c.(type) {
			case *model.Text, *model.Reasoning, *model.Call:
				if firstToken == 0 {
					firstToken = max(t.now().Sub(started), time.Nanosecond)
				}
			}
			switch c := c.(type) {
			case *model.Text:
				s := t.output.take(c.Text)
				text.WriteString(s)
				err = t.output.pieces(s, func(d string) error { return t.publish(ctx, &messages.TextDeltaPayload{Delta: d}) })
			case *model.Reasoning:
				s := t.output.take(c.Text)
				reasoning.WriteString(runePrefix(s, maxKeptReasoning-reasoning.Len()))
				err = t.output.pieces(s, func(d string) error { return t.publish(ctx, &messages.ReasoningDeltaPayload{Delta: d}) })
			case *model.Call:
				res.calls = append(res.calls, c.Call)
			case *model.Progress:
				if p := t.progress(c); p != nil {
					err = t.publish(ctx, p)
				}
			case *model.Usage:
				res.usage = c.Usage
				err = t.publish(ctx, &messages.TokenUsagePayload{Model: c.Model, Turn: t.req.Turn, Attempt: t.req.Attempt, Usage: c.Usage,
					DurationMS: t.now().Sub(started).Milliseconds(), FirstTokenMS: firstToken.Milliseconds()})
			}
			if err != nil { // cancelled while waiting for the outbox
				res.err = err
				break
			}
		}
		if t.output.cut && res.err == nil {
			// The turn ends here, as if the model had stopped: what it
			// said up to the bound is its text; calls it had not finished
			// are not made, and the usage it had not reported is unknown.
			res.calls = nil
			res.err = t.publish(ctx, messages.NewWarning(messages.WarnOutputTruncated, fmt.Sprintf(
				"the model's turn %d reached the bound of %d bytes of output; its text was cut there and the turn ended", t.req.Turn, t.output.max)))
		}
		res.text, res.reasoning = text.String(), reasoning.String()
	}
	if ctx.Err() != nil {
		return // the agent is stopping and waits only for done
	}
	t.root.Send(t.self, res)
}
