package actors

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/conclave-ai/conclave/actors/interrupts"
	"github.com/conclave-ai/conclave/actors/runstate"
	"github.com/conclave-ai/conclave/internal/regress"
	"github.com/conclave-ai/conclave/messages"
)

// parking is an actor's pending interrupt: while it is set the actor's
// mailbox is suspended, so messages that arrive stay queued, in order.
//
// The pattern (shared/design/protoactor-notes.md §4, variant D): the actor
// suspends its own mailbox with a system message, and waits on a future
// with ReenterAfter. The continuation is a system message, so it runs
// although the mailbox is suspended; it applies the outcome and resumes the
// mailbox. No goroutine waits: the future and the registry's timer are all
// a parked actor holds.
//
// The interrupt registry decides the outcome (a human's answer, the
// timeout, or cancellation) and completes the future through Deliver.
// An actor stopped while parked cancels its interrupt in its Stopping
// handler, while it is still registered, so the continuation never goes to
// a dead actor.
type parking struct {
	id     string
	kind   messages.InterruptKind
	lane   messages.Lane
	future *actor.PID // completed by the registry's Deliver, or by cancelParked when the run falls asleep
}

// interruptTarget is what raiseInterrupt needs to know of the raising actor.
type interruptTarget struct {
	e      *Engine
	run    *runSpec
	agent  string
	lane   messages.Lane
	parked **parking // the actor's field; set while parked
}

// raiseInterrupt publishes interrupt_raised, registers the interrupt and
// parks the actor. onResolved runs on the actor (as a continuation) with
// the outcome; for an expired interrupt it runs after interrupt_expired,
// for an answered one after interrupt_resolved, and for a cancelled one
// after interrupt_resolved{decision: cancel}.
func (t interruptTarget) raiseInterrupt(ctx actor.Context, p *messages.InterruptRaisedPayload, onResolved func(*messages.Resolution)) {
	p.InterruptID = t.e.cfg.NewID().String()
	timeout := t.run.approvalTimeout
	p.TimeoutSeconds = int(timeout.Seconds())
	created := t.e.cfg.Now()
	p.ExpiresAt = created.Add(timeout).UTC()
	signing := t.signing(p, t.lane, nil) // sets p.Approval when the policy covers it
	p.TimeoutAction = interrupts.TimeoutDecision(p.Kind, p.Approval != nil, t.run.timeoutAction)
	t.park(ctx, p, t.lane, created, p.ExpiresAt, signing, onResolved)
	// Published last: whoever sees interrupt_raised can resume it at once.
	t.run.post(ctx, t.agent, t.lane, p)
}

// reattach parks the actor again on an interrupt raised before a restart,
// with the same id and expiry; interrupt_raised is already in the journal.
func (t interruptTarget) reattach(ctx actor.Context, in *runstate.Interrupt, onResolved func(*messages.Resolution)) {
	t.parkAt(ctx, in.Raised, in.Seq, in.Lane, in.RaisedAt, in.ExpiresAt, t.signing(in.Raised, in.Lane, in.Signatures), onResolved)
}

// park suspends the actor's mailbox and registers the interrupt, which
// the registry lists once its interrupt_raised is journaled.
func (t interruptTarget) park(ctx actor.Context, p *messages.InterruptRaisedPayload, lane messages.Lane, created, expires time.Time, signing *interrupts.Signing, onResolved func(*messages.Resolution)) {
	t.parkAt(ctx, p, 0, lane, created, expires, signing, onResolved)
}

// parkAt is park for an interrupt whose interrupt_raised has seq (0: not
// journaled yet).
func (t interruptTarget) parkAt(ctx actor.Context, p *messages.InterruptRaisedPayload, seq uint64, lane messages.Lane, created, expires time.Time, signing *interrupts.Signing, onResolved func(*messages.Resolution)) {
	id := p.InterruptID
	emit := func(pl messages.Payload) {
		t.run.post(ctx, t.agent, lane, pl)
	}
	f := actor.NewFuture(ctx.ActorSystem(), -1) // no timeout: the registry owns the timer
	self := ctx.Self()
	proc, _ := ctx.ActorSystem().ProcessRegistry.Get(self)
	proc.SendSystemMessage(self, &actor.SuspendMailbox{}) // applies before the next user message
	*t.parked = &parking{id: id, kind: p.Kind, lane: lane, future: f.PID()}
	ctx.ReenterAfter(f, func(res any, err error) {
		if _, asleep := res.(fellAsleep); asleep {
			return // the run fell asleep: the interrupt stays pending for the actor that parks on it next
		}
		selfCancelled := *t.parked == nil // cancelParked already emitted the outcome
		*t.parked = nil
		r, _ := res.(*messages.Resolution)
		if r == nil { // cannot happen: only the registry completes the future
			r = &messages.Resolution{Resume: messages.Resume{InterruptID: id, Decision: messages.DecisionCancel}, Kind: p.Kind, Cancelled: true}
		}
		switch {
		case selfCancelled:
			// The actor is stopping: cancelParked published the outcome.
			// A resume that won the race to the registry is dropped, so the
			// interrupt has one outcome and nothing runs on a closed lane.
		case r.Expired:
			emit(&messages.InterruptExpiredPayload{InterruptID: id, Kind: p.Kind, Action: r.Decision})
		default:
			emit(&messages.InterruptResolvedPayload{InterruptID: id, Kind: p.Kind, Decision: r.Decision, Feedback: r.Feedback,
				Response: r.Response, EditedArgs: r.EditedArgs, Choices: r.Choices, Plan: r.Plan, Reason: r.Reason, Signers: r.Signers})
		}
		t.e.interrupts.Done(id)
		if !r.Cancelled && !selfCancelled {
			onResolved(r)
		}
		proc.SendSystemMessage(self, &actor.ResumeMailbox{})
	})
	info := messages.Interrupt{InterruptRaisedPayload: p, SessionID: t.run.session, RunID: t.run.runID, AgentID: t.agent, Lane: lane, Seq: seq}
	t.e.interrupts.RaiseAt(t.run.tenant, info, created, expires, t.run.timeoutAction, func(r *messages.Resolution) {
		t.e.system.Root.Send(f.PID(), r)
	}, signing)
}

// cancelParked cancels the actor's pending interrupt, if any, from its
// Stopping or Restarting handler. It publishes interrupt_resolved{cancel}
// right away, so it precedes the lane's closing event (which the parent
// emits once the actor has stopped).
//
// When the run is falling asleep (asleep.go) it says nothing and leaves
// the interrupt pending: the registry keeps it for the actor that parks
// on it again once the run is rebuilt. It only completes the future, so
// that nothing of the stopped actor stays in protoactor's registry.
func (t interruptTarget) cancelParked(ctx actor.Context) {
	p := *t.parked
	if p == nil {
		return
	}
	*t.parked = nil
	if t.run.out.silent() {
		ctx.Send(p.future, fellAsleep{})
		return
	}
	if regress.OrphanParkedInterrupts.Load() {
		return
	}
	t.run.post(ctx, t.agent, p.lane, &messages.InterruptResolvedPayload{InterruptID: p.id, Kind: p.kind, Decision: messages.DecisionCancel})
	t.e.interrupts.Cancel(p.id)
}

// fellAsleep completes the future of an actor that stopped parked because
// its run fell asleep; its continuation, if it runs, sees the actor no
// longer parked and does nothing.
type fellAsleep struct{}
