package a2a

import (
	"context"
	"errors"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/actors/feed"
	"github.com/conclave-ai/conclave/messages"
)

// follower reads a session's events through an ordinary engine
// subscription (the same hub, journal and fan-out as every other stream:
// A2A adds no pipeline of its own) and folds those of one run into a
// Projector, one event at a time.
type follower struct {
	sub     *actors.Subscription
	proj    *Projector
	buf     []*messages.Encoded // reused by Next; pending points into it
	pending []*messages.Encoded // read, not yet applied
	last    uint64              // seq of the last applied event (of any run)
}

// follow subscribes to the session of sum after seq after.
func (c *call) follow(sum messages.RunSummary, after uint64) (*follower, *RPCError) {
	sub, err := c.h.engine.Subscribe(c.ctx, messages.Subscribe{Tenant: c.tenant, SessionID: sum.SessionID, After: after})
	if err != nil {
		return nil, engineError(err)
	}
	return &follower{sub: sub, proj: NewProjector(sum), last: after}, nil
}

func (f *follower) close() { f.sub.Close() }

// fill reads the next batch when nothing is pending, waiting for one.
func (f *follower) fill(ctx context.Context) error {
	if len(f.pending) > 0 {
		return nil
	}
	evs, err := f.sub.Next(ctx, f.buf, 256)
	f.buf, f.pending = evs, evs
	if len(evs) > 0 {
		return nil // an error comes back on the next read
	}
	return err
}

// step applies the next pending event and returns its frames.
func (f *follower) step() ([]StreamResponse, error) {
	enc := f.pending[0]
	f.pending[0] = nil
	f.pending = f.pending[1:]
	f.last = enc.Seq
	env, err := enc.Envelope()
	if err != nil {
		return nil, err
	}
	return f.proj.Apply(env), nil
}

// foldUntil applies events, dropping their frames, until done holds
// (checked before each event).
func (f *follower) foldUntil(ctx context.Context, done func() bool) error {
	for !done() {
		if err := f.fill(ctx); err != nil {
			return err
		}
		if _, err := f.step(); err != nil {
			return err
		}
	}
	return nil
}

// foldToHead applies every event up to the session's head as of now.
func (c *call) foldToHead(f *follower) *RPCError {
	head, err := c.h.engine.Head(c.ctx, c.tenant, messages.SessionID(f.proj.contextID))
	if err != nil {
		return engineError(err)
	}
	if err := f.foldUntil(c.ctx, func() bool { return f.last >= head }); err != nil {
		return c.readError(err)
	}
	return nil
}

// readError maps a failure to read a task's events.
func (c *call) readError(err error) *RPCError {
	var gap *feed.GapError
	switch {
	case c.ctx.Err() != nil:
		return ctxError(c.ctx)
	case errors.Is(err, feed.ErrClosed):
		return rpcErrorf(CodeInternal, "server shutting down")
	case errors.As(err, &gap):
		return rpcErrorf(CodeInternal, "the task's events are no longer retained")
	}
	return rpcErrorf(CodeInternal, "reading the task's events: %v", err)
}
