// Package conclavetest tests a program that embeds Conclave through the
// root package: it runs a conclave.Engine built from the program's own
// conclave.Options (its model, its tools, its journal) for one test, with
// probes on its runs and restarts on the same journal, and shuts it down
// when the test ends. Check what a run did with testkit.Check or
// testkit.AssertInvariants, and inject faults into the program's tools
// and model with testkit.NewFaultyTool and testkit.NewFaultyModel.
//
// Everything works inside a testing/synctest bubble, where the engine's
// timers (tool and model timeouts, a fault's delay, retries' backoff) run
// on the bubble's virtual clock:
//
//	synctest.Test(t, func(t *testing.T) {
//		h := conclavetest.New(t, conclave.Options{Tools: []tool.Tool{myTool}})
//		_, events := h.Run(conclave.RunRequest{Question: "…"})
//		testkit.AssertInvariants(t, events)
//	})
//
// (It is a package of its own, not part of testkit, because the root
// package depends on packages whose own tests use testkit.)
package conclavetest

import (
	"context"
	"errors"
	"iter"
	"log/slog"
	"testing"
	"time"

	"github.com/conclave-ai/conclave"
	"github.com/conclave-ai/conclave/journal"
	"github.com/conclave-ai/conclave/testkit"
)

// BubbleWatchdog bounds every wait of a Harness inside a testing/synctest
// bubble, in virtual time: long enough for any of the engine's own
// timeouts (a model's idle timeout is 5 minutes by default), and free,
// since virtual time only jumps. Outside a bubble waits are bounded by
// testkit.Watchdog of wall-clock time.
const BubbleWatchdog = 24 * time.Hour

// Harness is an engine under test: a conclave.Engine built from the
// Options given to New, replaced by a new one on the same journal at
// each Restart. Its methods fail the test on any error. Use it from the
// test's goroutine.
type Harness struct {
	t        testing.TB
	opts     conclave.Options
	owned    journal.Journal // the journal New made, closed at the end
	e        *conclave.Engine
	probes   []*Probe
	watchdog time.Duration
	restarts int
}

// New starts an engine from opts for t, and shuts it down when the test
// ends (checking the error), before closing the journal if New made it.
//
// Differences from conclave.New(opts): without a Journal, New makes an
// in-memory one that outlives each engine, so that Restart has something
// to restart on; KeepRunsOnShutdown is always on, so that a restart (and
// the end of the test) freezes the runs still going instead of ending
// them; and without a Logger the engine's warnings and errors go to t.Log.
func New(t testing.TB, opts conclave.Options) *Harness {
	t.Helper()
	h := &Harness{t: t, watchdog: testkit.Watchdog}
	if testkit.InBubble() {
		h.watchdog = BubbleWatchdog
	}
	if opts.Logger == nil {
		opts.Logger = testkit.TestLogger(t, slog.LevelWarn)
	}
	if opts.Journal == nil {
		h.owned = journal.NewMemory()
		opts.Journal = h.owned
	}
	opts.KeepRunsOnShutdown = true
	h.opts = opts
	t.Cleanup(h.cleanup)
	h.e = h.start()
	return h
}

func (h *Harness) start() *conclave.Engine {
	h.t.Helper()
	e, err := conclave.New(h.opts)
	if err != nil {
		h.t.Fatalf("conclavetest: conclave.New: %v", err)
	}
	return e
}

func (h *Harness) cleanup() {
	h.closeProbes()
	if h.e != nil {
		if err := h.shutdown(); err != nil {
			h.t.Errorf("conclavetest: engine shutdown: %v", err)
		}
	}
	if h.owned != nil {
		if err := h.owned.Close(); err != nil {
			h.t.Errorf("conclavetest: close the journal: %v", err)
		}
	}
	testkit.SettleDeadLetters()
}

func (h *Harness) shutdown() error {
	ctx, cancel := context.WithTimeout(context.Background(), h.watchdog)
	defer cancel()
	err := h.e.Shutdown(ctx)
	h.e = nil
	return err
}

func (h *Harness) closeProbes() {
	for _, p := range h.probes {
		p.Close()
	}
	h.probes = nil
}

// Engine is the engine under test (a new one after each Restart).
func (h *Harness) Engine() *conclave.Engine { return h.e }

// Restarts counts the restarts so far.
func (h *Harness) Restarts() int { return h.restarts }

// Restart stops the engine as a crash would leave it for the next one:
// the runs still going are frozen where they were, nothing is ended, and
// their tool calls and model turns in flight are cancelled. Then it starts
// a new engine from the same Options on the same journal, which resumes
// them (a parked run stays parked on the same interrupts). Probes taken
// before end; take new ones, which replay from the journal. (A crash that
// also loses what the disk had not synced is testkit/sim's.)
func (h *Harness) Restart() {
	h.t.Helper()
	h.closeProbes()
	if err := h.shutdown(); err != nil {
		h.t.Fatalf("conclavetest: restart: shutdown: %v", err)
	}
	h.restarts++
	h.e = h.start()
}

// Start starts a run and returns it; the run goes on in the background.
func (h *Harness) Start(req conclave.RunRequest) conclave.RunRef {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), h.watchdog)
	defer cancel()
	run, err := h.e.Start(ctx, req)
	if err != nil {
		h.t.Fatalf("conclavetest: start a run: %v", err)
	}
	return run
}

// Run starts a run, waits for its end, and returns every event of its
// session from the first up to the run's terminal event: what
// testkit.Check takes.
func (h *Harness) Run(req conclave.RunRequest) (conclave.RunRef, []*conclave.Envelope) {
	h.t.Helper()
	run := h.Start(req)
	return run, h.Wait(run)
}

// Wait waits for run's end and returns every event of its session from the
// first up to the run's terminal event (after a Restart too: they are read
// from the journal).
func (h *Harness) Wait(run conclave.RunRef) []*conclave.Envelope {
	h.t.Helper()
	p := h.Probe(run)
	defer p.Close()
	p.Until(testkit.TerminalOf(run.RunID))
	return p.Seen()
}

// Probe follows run's session from its first event, for a test that waits
// for a moment of the run, acts, and carries on. It ends at Close, at a
// Restart, or when the test ends.
func (h *Harness) Probe(run conclave.RunRef) *Probe {
	h.t.Helper()
	if run.SessionID == "" {
		sum, err := h.e.Run(run)
		if err != nil {
			h.t.Fatalf("conclavetest: probe run %s: %v", run.RunID, err)
		}
		run.SessionID = sum.SessionID
	}
	ctx, cancel := context.WithTimeout(context.Background(), h.watchdog)
	next, stop := iter.Pull2(h.e.Events(ctx, run.Tenant, run.SessionID, 0))
	p := &Probe{t: h.t, next: next, stop: stop, cancel: cancel, watchdog: h.watchdog}
	h.probes = append(h.probes, p)
	return p
}

// Probe reads the events of one session in order. Until hands them out
// up to an event of interest, so a test can wait for a moment in a run,
// act, and carry on without losing anything. Use it from one goroutine.
type Probe struct {
	t        testing.TB
	next     func() (*conclave.Envelope, error, bool)
	stop     func()
	cancel   context.CancelFunc
	watchdog time.Duration
	seen     []*conclave.Envelope
	closed   bool
}

// Until returns the events read since the last call, up to and including
// the first for which stop returns true. It fails the test if the session's
// events end first (the engine shut down or restarted), or after the
// watchdog (testkit.Watchdog; BubbleWatchdog in a synctest bubble).
func (p *Probe) Until(stop func(*conclave.Envelope) bool) []*conclave.Envelope {
	p.t.Helper()
	from := len(p.seen)
	for {
		env, err, ok := p.next()
		switch {
		case !ok:
			p.t.Fatalf("conclavetest: probe: the events ended before the awaited one (after %d events)", len(p.seen))
		case errors.Is(err, context.DeadlineExceeded):
			p.t.Fatalf("conclavetest: probe: no awaited event within %v (after %d events)", p.watchdog, len(p.seen))
		case err != nil:
			p.t.Fatalf("conclavetest: probe: %v (after %d events)", err, len(p.seen))
		}
		p.seen = append(p.seen, env)
		if stop(env) {
			return p.seen[from:]
		}
	}
}

// UntilType returns the next event of type typ (reading, and keeping in
// Seen, every event before it).
func (p *Probe) UntilType(typ conclave.EventType) *conclave.Envelope {
	p.t.Helper()
	got := p.Until(func(env *conclave.Envelope) bool { return env.Type == typ })
	return got[len(got)-1]
}

// Seen returns every event the probe has read, in order.
func (p *Probe) Seen() []*conclave.Envelope { return p.seen }

// Close ends the probe; it is idempotent.
func (p *Probe) Close() {
	if p.closed {
		return
	}
	p.closed = true
	p.stop()
	p.cancel()
}
