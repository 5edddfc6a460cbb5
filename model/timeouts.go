package model

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Timeouts bound a streamed turn in time. A zero or negative field is no
// bound.
type Timeouts struct {
	// Idle bounds the wait for each chunk: from the start of the turn to
	// its first chunk (a server that never sends its headers, or sends
	// only SSE keep-alive comments, sends no chunk), then each wait of
	// Recv for the next one (the caller's time between Recvs is not
	// counted).
	Idle time.Duration
	// Turn bounds the whole turn, from Stream to its last chunk.
	Turn time.Duration
}

// WithTimeouts returns m with each turn bounded by t: a turn that goes
// silent for longer than t.Idle, or lasts longer than t.Turn, ends with an
// *Error of CodeTimeout (from Stream or Recv), and the inner stream's
// context is cancelled, which closes its connection. Cancelling the
// caller's context still ends the turn with the context's error. With
// both bounds off it returns m.
func WithTimeouts(m Model, t Timeouts) Model {
	if t.Idle <= 0 && t.Turn <= 0 {
		return m
	}
	return &timedModel{Model: m, t: t}
}

type timedModel struct {
	Model
	t Timeouts
}

// errTimedOut is the cancellation cause of a bound that fired; Stream and
// Recv turn it into the *Error.
type errTimedOut struct{ err *Error }

func (e *errTimedOut) Error() string { return e.err.Error() }

func (m *timedModel) Stream(ctx context.Context, req Request) (Stream, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	s := &timedStream{ctx: ctx, cancel: cancel, t: m.t}
	// The timers' funcs only cancel ctx; Close stops them. Neither holds a
	// goroutine while it waits.
	if m.t.Turn > 0 {
		s.turn = time.AfterFunc(m.t.Turn, func() {
			cancel(&errTimedOut{&Error{Code: CodeTimeout, Message: fmt.Sprintf("the turn outlasted its deadline of %v", m.t.Turn)}})
		})
	}
	if m.t.Idle > 0 {
		s.idle = time.AfterFunc(m.t.Idle, s.idleFired)
	}
	st, err := m.Model.Stream(ctx, req)
	if err != nil {
		err = s.classify(err)
		s.stop()
		return nil, err
	}
	s.inner = st
	s.pause()
	return s, nil
}

// timedStream is a Stream under Timeouts. Used by one goroutine, as every
// Stream; the timers' funcs touch only cancel, which is safe.
type timedStream struct {
	ctx        context.Context
	cancel     context.CancelCauseFunc
	t          Timeouts
	inner      Stream
	idle, turn *time.Timer // nil when off
}

func (s *timedStream) idleFired() {
	s.cancel(&errTimedOut{&Error{Code: CodeTimeout, Message: fmt.Sprintf("no chunk for %v (idle timeout)", s.t.Idle)}})
}

// Recv returns the inner stream's next chunk. The idle timer runs only
// while Recv waits: time the caller spends with a chunk (publishing it,
// held back by a slow journal) is not the model's silence.
func (s *timedStream) Recv() (Chunk, error) {
	if s.idle != nil {
		s.idle.Reset(s.t.Idle) // a timer that fired has cancelled ctx already: Reset changes nothing that matters
	}
	c, err := s.inner.Recv()
	s.pause()
	if err != nil {
		return nil, s.classify(err)
	}
	return c, nil
}

// pause stops the idle timer between Recvs.
func (s *timedStream) pause() {
	if s.idle != nil {
		s.idle.Stop()
	}
}

// Close stops the timers and closes the inner stream.
func (s *timedStream) Close() error {
	s.stop()
	return s.inner.Close()
}

func (s *timedStream) stop() {
	if s.idle != nil {
		s.idle.Stop()
	}
	if s.turn != nil {
		s.turn.Stop()
	}
	s.cancel(nil)
}

// classify returns the *Error of a bound that fired and ended the turn,
// err itself otherwise (the caller's cancellation included).
func (s *timedStream) classify(err error) error {
	if s.ctx.Err() == nil {
		return err
	}
	var to *errTimedOut
	if errors.As(context.Cause(s.ctx), &to) {
		return to.err
	}
	return err
}
