// Package testkit helps test code built on Conclave: an engine harness that
// shuts down cleanly, a probe that records a session's events, helpers to
// run a council to its end, faults to inject into tools and models
// (NewFaultyTool, NewFaultyModel), and the invariant checker for every
// ordering guarantee in docs/events.md (Check, AssertInvariants).
//
// NewEngine, NewProbe, Follow and RunCouncil work on the lower-level
// engine of package actors. A program built on the root package
// (conclave.New) tests with package testkit/conclavetest instead, which
// takes its conclave.Options; the faults and the checker here take the
// root package's types as they are (they are aliases).
//
// Everything here works inside testing/synctest bubbles: the scripted
// model's token delays and the faults' delays run on the bubble's virtual
// clock.
package testkit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/actors/feed"
	"github.com/conclave-ai/conclave/messages"
)

// Watchdog bounds every wait in this package. It is wall-clock time outside
// a synctest bubble and virtual time inside one.
const Watchdog = 2 * time.Minute

// Eventually polls cond until it holds, failing t after Watchdog. It is
// for conditions nothing signals (a background store, a counter); prefer
// waiting on an event when there is one.
func Eventually(t testing.TB, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(Watchdog)
	for wait := time.Millisecond; !cond(); wait = min(2*wait, 50*time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("testkit: condition not met within %v", Watchdog)
		}
		time.Sleep(wait) // polling with a deadline, not synchronising: nothing signals cond
	}
}

// NewEngine starts an engine for t and shuts it down (checking the error)
// when the test ends.
//
// Without cfg.Logger, warnings and errors of the engine go to t.Log.
func NewEngine(t testing.TB, cfg actors.Config) *actors.Engine {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = TestLogger(t, slog.LevelWarn)
	}
	e, err := actors.New(cfg)
	if err != nil {
		t.Fatalf("actors.New: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), Watchdog)
		defer cancel()
		if err := e.Shutdown(ctx); err != nil {
			t.Errorf("engine shutdown: %v", err)
		}
		SettleDeadLetters()
	})
	return e
}

// SettleDeadLetters, called inside a testing/synctest bubble once its
// engines have shut down, lets protoactor's dead-letter throttle finish;
// outside a bubble it does nothing. That throttle is a goroutine that
// waits one interval (1 s) on a ticker, started by the first dead letter
// (a message to an actor that stopped, as happens when runs are stopped).
// A bubble's time stops once its main goroutine returns, so that goroutine
// would be left blocked and synctest would report a deadlock. NewEngine's
// cleanup calls it; call it at the end of a bubble that created an engine
// with actors.New.
func SettleDeadLetters() {
	if InBubble() {
		time.Sleep(deadLetterThrottleInterval + time.Millisecond)
	}
}

// deadLetterThrottleInterval is protoactor's (actor.Config's default,
// which the engine keeps).
const deadLetterThrottleInterval = time.Second

// InBubble reports whether the caller runs in a testing/synctest bubble
// (synctest.Wait panics outside one). Inside one it waits, as
// synctest.Wait does, until every other goroutine of the bubble is
// durably blocked.
func InBubble() (in bool) {
	defer func() {
		if recover() != nil {
			in = false
		}
	}()
	synctest.Wait()
	return true
}

// TestLogger returns a logger that writes records at level or above to t.Log.
func TestLogger(t testing.TB, level slog.Level) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: level}))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// LockedBuffer is a bytes.Buffer that goroutines may write concurrently
// (a logger's handler, a child process's output) while a test reads it.
type LockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *LockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns what was written so far.
func (l *LockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Probe records the events of one session subscription. Until hands them
// out up to an event of interest and keeps the rest for the next call, so a
// test can wait for a moment in the run, act, and carry on without losing
// anything. Use it from one goroutine.
type Probe struct {
	sub     *actors.Subscription
	buf     []*messages.Encoded
	pending []*messages.Envelope
	seen    []*messages.Envelope
}

// NewProbe subscribes to a session of tenant ("" = the local tenant) after the given cursor.
func NewProbe(ctx context.Context, e *actors.Engine, tenant messages.TenantID, session messages.SessionID, after uint64) (*Probe, error) {
	sub, err := e.Subscribe(ctx, messages.Subscribe{Tenant: tenant, SessionID: session, After: after})
	if err != nil {
		return nil, err
	}
	return &Probe{sub: sub}, nil
}

// Until returns the events up to and including the first for which stop
// returns true.
func (p *Probe) Until(ctx context.Context, stop func(*messages.Envelope) bool) ([]*messages.Envelope, error) {
	var out []*messages.Envelope
	for {
		for i, env := range p.pending {
			if stop(env) {
				out = append(out, p.pending[:i+1]...)
				p.pending = p.pending[i+1:]
				return out, nil
			}
		}
		out = append(out, p.pending...)
		p.pending = p.pending[:0]
		var err error
		p.buf, err = p.sub.Next(ctx, p.buf, 512)
		for _, enc := range p.buf {
			env, derr := enc.Envelope()
			if derr != nil {
				return out, fmt.Errorf("testkit: decode seq %d: %w", enc.Seq, derr)
			}
			p.pending = append(p.pending, env)
			p.seen = append(p.seen, env)
		}
		if err != nil && len(p.buf) == 0 {
			if errors.Is(err, feed.ErrClosed) {
				return out, fmt.Errorf("testkit: subscription closed before the awaited event: %w", err)
			}
			return out, err
		}
	}
}

// Seen returns every event the probe has read so far, in order.
func (p *Probe) Seen() []*messages.Envelope { return p.seen }

// Close ends the subscription.
func (p *Probe) Close() { p.sub.Close() }

// TerminalOf returns a stop function for Until that matches the terminal
// event of run.
func TerminalOf(run messages.RunID) func(*messages.Envelope) bool {
	return func(env *messages.Envelope) bool { return env.RunID == run && env.Type.Terminal() }
}

// Follow subscribes to ref's session from after and collects until the run's terminal event.
func Follow(ctx context.Context, e *actors.Engine, ref actors.RunRef, after uint64) ([]*messages.Envelope, error) {
	p, err := NewProbe(ctx, e, ref.Tenant, ref.SessionID, after)
	if err != nil {
		return nil, err
	}
	defer p.Close()
	return p.Until(ctx, TerminalOf(ref.RunID))
}

// RunCouncil starts cmd on e, waits for its terminal event and returns every
// event of the session from seq 1 up to it. It fails t on any error.
func RunCouncil(t testing.TB, e *actors.Engine, cmd messages.StartRun) (actors.RunRef, []*messages.Envelope) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Watchdog)
	defer cancel()
	ref, err := e.StartRun(ctx, cmd)
	if err != nil {
		t.Fatalf("StartRun: %v", err)
	}
	events, err := Follow(ctx, e, ref, 0)
	if err != nil {
		t.Fatalf("follow run %s: %v (after %d events)", ref.RunID, err, len(events))
	}
	return ref, events
}

// Terminal returns the run's terminal event, or nil.
func Terminal(events []*messages.Envelope, run messages.RunID) *messages.Envelope {
	for i := len(events) - 1; i >= 0; i-- {
		if events[i].RunID == run && events[i].Type.Terminal() {
			return events[i]
		}
	}
	return nil
}

// Count returns how many events of type t events holds.
func Count(events []*messages.Envelope, t messages.EventType) int {
	n := 0
	for _, e := range events {
		if e.Type == t {
			n++
		}
	}
	return n
}
