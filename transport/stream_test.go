package transport

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/actors/feed"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/testkit"
)

// fakeFramer records what a stream writes. It flags overlapping calls (only
// the stream's one writer may call it), and can block writeEvents on a gate.
type fakeFramer struct {
	gate    chan struct{} // when non-nil, writeEvents waits for it to close
	pingErr error         // returned by writePing

	busy      atomic.Bool
	overlap   atomic.Bool
	aborted   atomic.Bool
	abortOnce sync.Once
	entered   chan struct{} // capacity 1: writeEvents started
	changed   chan struct{} // capacity 1: something was recorded

	mu      sync.Mutex // guards the fields below
	seqs    []uint64
	writes  int
	replies int
	pings   int
	finals  []error
	closes  int
}

var _ framer = (*fakeFramer)(nil)

func newFakeFramer() *fakeFramer {
	return &fakeFramer{entered: make(chan struct{}, 1), changed: make(chan struct{}, 1)}
}

func (f *fakeFramer) enter() {
	if f.busy.Swap(true) {
		f.overlap.Store(true)
	}
}

func (f *fakeFramer) exit() {
	f.busy.Store(false)
	select {
	case f.changed <- struct{}{}:
	default:
	}
}

func (f *fakeFramer) writeEvents(evs []*messages.Encoded) error {
	f.enter()
	defer f.exit()
	select {
	case f.entered <- struct{}{}:
	default:
	}
	if f.gate != nil {
		<-f.gate
	}
	if f.aborted.Load() {
		return errors.New("fake: write aborted")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, e := range evs {
		f.seqs = append(f.seqs, e.Seq)
	}
	f.writes++
	return nil
}

func (f *fakeFramer) writeReplies(replies [][]byte) error {
	f.enter()
	defer f.exit()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.replies += len(replies)
	return nil
}

func (f *fakeFramer) writePing() error {
	f.enter()
	defer f.exit()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pings++
	return f.pingErr
}

// abort releases a gated writeEvents, which then fails.
func (f *fakeFramer) abort() {
	f.aborted.Store(true)
	f.abortOnce.Do(func() {
		if f.gate != nil {
			close(f.gate)
		}
	})
}

func (f *fakeFramer) writeFinal(reason *CloseReason) error {
	f.enter()
	defer f.exit()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.finals = append(f.finals, reason)
	return nil
}

func (f *fakeFramer) close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closes++
	return nil
}

func (f *fakeFramer) transport() string { return "fake" }

type framerState struct {
	seqs          []uint64
	writes, pings int
	finals        []error
	closes        int
}

func (f *fakeFramer) state() framerState {
	f.mu.Lock()
	defer f.mu.Unlock()
	return framerState{seqs: append([]uint64(nil), f.seqs...), writes: f.writes, pings: f.pings,
		finals: append([]error(nil), f.finals...), closes: f.closes}
}

// waitUntil waits (bounded, no sleeping) until cond holds for the framer's state.
func (f *fakeFramer) waitUntil(t *testing.T, what string, cond func(framerState) bool) framerState {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		st := f.state()
		if cond(st) {
			return st
		}
		select {
		case <-f.changed:
		case <-timeout:
			t.Fatalf("timed out waiting for %s; framer state: %d seqs (last %v), %d writes, %d pings, finals %v, %d closes",
				what, len(st.seqs), lastOf(st.seqs), st.writes, st.pings, st.finals, st.closes)
		}
	}
}

func lastOf(s []uint64) any {
	if len(s) == 0 {
		return "none"
	}
	return s[len(s)-1]
}

// streamFixture is an engine with one session whose run has ended, and a
// server (not listening) to attach streams to.
type streamFixture struct {
	t       *testing.T
	e       *actors.Engine
	srv     *Server
	session messages.SessionID
	head    uint64 // last seq of the session after its run
	pub     int
}

func newStreamFixture(t *testing.T, cfg Config) *streamFixture {
	t.Helper()
	e := testkit.NewEngine(t, actors.Config{})
	ref, events := testkit.RunCouncil(t, e, messages.StartRun{Question: "q", Scenario: &messages.Scenario{Nodes: 1, Tokens: 1, SynthesisTokens: 1}})
	cfg.Engine = e
	if cfg.Logger == nil {
		cfg.Logger = testkit.TestLogger(t, slog.LevelWarn)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // before the engine's shutdown (cleanups run last-in first-out)
		ctx, cancel := context.WithTimeout(context.Background(), testkit.Watchdog)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("server shutdown: %v", err)
		}
	})
	return &streamFixture{t: t, e: e, srv: srv, session: ref.SessionID, head: events[len(events)-1].Seq}
}

func (fx *streamFixture) subscribe(after uint64) *actors.Subscription {
	fx.t.Helper()
	sub, err := fx.e.Subscribe(context.Background(), messages.Subscribe{SessionID: fx.session, After: after})
	if err != nil {
		fx.t.Fatal(err)
	}
	return sub
}

// stream starts a stream of the session after the cursor.
func (fx *streamFixture) stream(f *fakeFramer, after uint64) *streamConn {
	fx.t.Helper()
	c := fx.srv.newStreamConn(f, newFlight(nil), nil, messages.LocalTenant, fx.session, fx.subscribe(after))
	c.start()
	return c
}

// publish injects n events into the session; it returns the last seq they
// will get (they are numbered in order after the previous ones).
func (fx *streamFixture) publish(n int) uint64 {
	fx.t.Helper()
	for range n {
		fx.pub++
		emit := &messages.Emit{RunID: "sim", AgentID: "sim", Lane: messages.RunLane(),
			Payload: &messages.TextDeltaPayload{Delta: fmt.Sprint(fx.pub)}}
		if err := fx.e.Publish(context.Background(), "", fx.session, emit); err != nil {
			fx.t.Fatal(err)
		}
	}
	return fx.head + uint64(fx.pub)
}

func assertSeqs(t *testing.T, got []uint64, from, to uint64) {
	t.Helper()
	if uint64(len(got)) != to-from+1 {
		t.Fatalf("wrote %d events, want %d (%d..%d)", len(got), to-from+1, from, to)
	}
	for i, s := range got {
		if s != from+uint64(i) {
			t.Fatalf("position %d has seq %d, want %d", i, s, from+uint64(i))
		}
	}
}

func waitEntered(t *testing.T, f *fakeFramer) {
	t.Helper()
	select {
	case <-f.entered:
	case <-time.After(30 * time.Second):
		t.Fatal("the writer never started writing")
	}
}

func waitDone(t *testing.T, c *streamConn, what string) {
	t.Helper()
	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("stream did not end: %s", what)
	}
}

// TestStreamConn_ReadyHammer: while events are published, several
// goroutines call ready as fast as they can. Every event is written exactly
// once, in order, by one writer at a time.
func TestStreamConn_ReadyHammer(t *testing.T) {
	t.Parallel()
	for _, delay := range []time.Duration{0, 200 * time.Microsecond} {
		t.Run(fmt.Sprint("FlushDelay=", delay), func(t *testing.T) {
			t.Parallel()
			fx := newStreamFixture(t, Config{FlushDelay: delay})
			f := newFakeFramer()
			c := fx.stream(f, 0) // replay, then live
			stop := make(chan struct{})
			var hammers sync.WaitGroup
			for range 4 {
				hammers.Go(func() {
					for {
						select {
						case <-stop:
							return
						default:
							c.ready()
						}
					}
				})
			}
			last := fx.publish(2000)
			st := f.waitUntil(t, "every published event", func(s framerState) bool { return lastOf(s.seqs) == last })
			close(stop)
			hammers.Wait()
			assertSeqs(t, st.seqs, 1, last)
			if f.overlap.Load() {
				t.Fatal("two goroutines wrote to the connection at once")
			}
			// A clean end: the final frame once, the connection closed once.
			c.shutdown()
			waitDone(t, c, "after shutdown")
			st = f.state()
			assertSeqs(t, st.seqs, 1, last)
			if len(st.finals) != 1 || !errors.Is(st.finals[0], ErrShutdown) || st.closes != 1 {
				t.Fatalf("finals %v, closes %d; want one shutdown frame and one close", st.finals, st.closes)
			}
			c.ready() // a late wake-up of an ended stream is harmless
		})
	}
}

// TestStreamConn_IdleHandoff runs in virtual time so that wake-ups land
// exactly when the writer's linger ends (the timer fires in the same
// instant), just before and just after: every wake-up is served, whether the
// running writer keeps going or a new one takes over. A lost wake-up leaves
// an event unwritten, which synctest.Wait makes visible at once.
func TestStreamConn_IdleHandoff(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		fx := newStreamFixture(t, Config{Heartbeat: time.Hour})
		f := newFakeFramer()
		c := fx.stream(f, fx.head)
		offsets := []time.Duration{0, -time.Nanosecond, time.Nanosecond, -time.Microsecond, time.Millisecond, linger}
		var last uint64
		for i := range 120 {
			time.Sleep(linger + offsets[i%len(offsets)])
			var wakers sync.WaitGroup
			for range i % 4 { // extra wake-ups racing the hub's
				wakers.Go(c.ready)
			}
			last = fx.publish(1 + i%3)
			wakers.Wait()
			synctest.Wait()
			if st := f.state(); lastOf(st.seqs) != last {
				t.Fatalf("round %d (wake-up at linger%+v): last written %v, want %d: a wake-up was lost", i, offsets[i%len(offsets)], lastOf(st.seqs), last)
			}
		}
		assertSeqs(t, f.state().seqs, fx.head+1, last)
		if f.overlap.Load() {
			t.Fatal("two goroutines wrote to the connection at once")
		}
		// An idle stream has no writer goroutine and keeps no batch buffer.
		time.Sleep(linger)
		synctest.Wait()
		if c.running.Load() || c.buf != nil {
			t.Fatalf("after linger: running=%v, buffer of cap %d", c.running.Load(), cap(c.buf))
		}
	})
}

// TestStreamConn_BlockedWriterBlocksNoOne: a writer stuck in writeEvents
// (a client that reads nothing) neither blocks ready, which the hub calls,
// nor the hub itself; once it unblocks it writes everything, in order.
func TestStreamConn_BlockedWriterBlocksNoOne(t *testing.T) {
	t.Parallel()
	fx := newStreamFixture(t, Config{})
	f := newFakeFramer()
	f.gate = make(chan struct{})
	c := fx.stream(f, fx.head)
	fx.publish(1)
	waitEntered(t, f)

	readies := make(chan struct{})
	go func() {
		defer close(readies)
		for range 10000 {
			c.ready()
		}
	}()
	select {
	case <-readies:
	case <-time.After(30 * time.Second):
		t.Fatal("ready blocked behind a writer stuck in writeEvents")
	}

	// The hub keeps going: another subscriber gets the next events, far more
	// than the blocked stream's live queue holds.
	probe, err := testkit.NewProbe(context.Background(), fx.e, "", fx.session, fx.head+1)
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close()
	last := fx.publish(3 * feed.DefaultQueue)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := probe.Until(ctx, func(e *messages.Envelope) bool { return e.Seq == last }); err != nil {
		t.Fatalf("hub stalled behind a blocked stream: %v", err)
	}
	if st := f.state(); len(st.seqs) != 0 {
		t.Fatalf("the blocked writer recorded %v", st.seqs)
	}

	close(f.gate)
	st := f.waitUntil(t, "the backlog", func(s framerState) bool { return lastOf(s.seqs) == last })
	assertSeqs(t, st.seqs, fx.head+1, last)
	if f.overlap.Load() {
		t.Fatal("two goroutines wrote to the connection at once")
	}
}

// TestStreamConn_ResubscribeKeepsInFlightBatch pins down what a WebSocket
// subscribe frame guarantees: a batch the writer already took from the old
// subscription is still written, then the stream continues from the new
// cursor, gapless.
func TestStreamConn_ResubscribeKeepsInFlightBatch(t *testing.T) {
	t.Parallel()
	fx := newStreamFixture(t, Config{})
	f := newFakeFramer()
	f.gate = make(chan struct{})
	c := fx.stream(f, fx.head)
	last := fx.publish(1)
	waitEntered(t, f) // writing head+1, held
	c.resubscribe(fx.subscribe(2))
	close(f.gate)
	st := f.waitUntil(t, "the replay", func(s framerState) bool { return len(s.seqs) == 1+int(last-2) })
	if st.seqs[0] != last {
		t.Fatalf("first write %v, want the in-flight seq %d", st.seqs, last)
	}
	assertSeqs(t, st.seqs[1:], 3, last)
	more := fx.publish(5)
	st = f.waitUntil(t, "live events after the resubscribe", func(s framerState) bool { return lastOf(s.seqs) == more })
	assertSeqs(t, st.seqs[1:], 3, more)
}

// TestStreamConn_HeartbeatPingsIdleStream: in virtual time, an idle stream
// is pinged exactly a heartbeat after its last write (the loop checks every
// quarter heartbeat), and a ping counts as a write.
func TestStreamConn_HeartbeatPingsIdleStream(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const hb = 10 * time.Second
		fx := newStreamFixture(t, Config{Heartbeat: hb})
		f := newFakeFramer()
		c := fx.stream(f, fx.head)
		pingsAt := func(d time.Duration, want int) {
			t.Helper()
			time.Sleep(d)
			synctest.Wait()
			if st := f.state(); st.pings != want {
				t.Fatalf("%d pings, want %d", st.pings, want)
			}
		}
		pingsAt(hb-time.Nanosecond, 0)
		pingsAt(time.Nanosecond, 1) // hb after the stream opened
		pingsAt(hb-time.Nanosecond, 1)
		pingsAt(time.Nanosecond, 2) // hb after the first ping
		// An event resets the clock: no ping until hb after it.
		time.Sleep(hb / 4)
		fx.publish(1)
		pingsAt(hb-time.Nanosecond, 2)
		pingsAt(hb/4, 3) // first tick at or after hb since the event
		if st := f.state(); len(st.seqs) != 1 || f.overlap.Load() {
			t.Fatalf("seqs %v, overlap %v", st.seqs, f.overlap.Load())
		}
		time.Sleep(linger)
		synctest.Wait()
		if c.running.Load() {
			t.Fatal("writer still running a linger after the ping")
		}
	})
}

// TestStreamConn_HeartbeatSkipsBusyStream: a stream that writes at least
// once per heartbeat is never pinged (SSE needs no comment then).
func TestStreamConn_HeartbeatSkipsBusyStream(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const hb = 10 * time.Second
		fx := newStreamFixture(t, Config{Heartbeat: hb})
		f := newFakeFramer()
		fx.stream(f, fx.head)
		var last uint64
		for range 20 {
			time.Sleep(hb / 2)
			last = fx.publish(1)
			synctest.Wait()
		}
		st := f.state()
		assertSeqs(t, st.seqs, fx.head+1, last)
		if st.pings != 0 {
			t.Fatalf("%d pings on a busy stream", st.pings)
		}
		time.Sleep(hb)
		synctest.Wait()
		if st := f.state(); st.pings != 1 {
			t.Fatalf("%d pings once idle, want 1", st.pings)
		}
	})
}

// TestStreamConn_FailedPingEndsStream: a ping that cannot be written means
// the client is gone: the stream closes the connection and its
// subscription, without a final frame.
func TestStreamConn_FailedPingEndsStream(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const hb = 10 * time.Second
		fx := newStreamFixture(t, Config{Heartbeat: hb})
		f := newFakeFramer()
		f.pingErr = errors.New("broken pipe")
		c := fx.stream(f, fx.head)
		time.Sleep(hb)
		synctest.Wait()
		select {
		case <-c.done:
		default:
			t.Fatal("stream still open after a failed ping")
		}
		st := f.state()
		if st.pings != 1 || st.closes != 1 || len(st.finals) != 0 {
			t.Fatalf("pings %d closes %d finals %v; want 1, 1, none", st.pings, st.closes, st.finals)
		}
		if _, err := c.current().Poll(context.Background(), nil, 1); !errors.Is(err, feed.ErrClosed) {
			t.Fatalf("subscription after the end: %v, want closed", err)
		}
		if n := len(fx.srv.streams.snapshot()); n != 0 {
			t.Fatalf("%d streams still registered", n)
		}
	})
}

// TestStreamConn_ShutdownDeliversThenCloses: shutdown lets the writer send
// what is pending, then the final frame, then close.
func TestStreamConn_ShutdownDeliversThenCloses(t *testing.T) {
	t.Parallel()
	fx := newStreamFixture(t, Config{})
	f := newFakeFramer()
	f.gate = make(chan struct{})
	c := fx.stream(f, 0)
	waitEntered(t, f) // replaying, held
	last := fx.publish(600)
	// The hub has them once a probe sees the last one.
	probe, err := testkit.NewProbe(context.Background(), fx.e, "", fx.session, 0)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := probe.Until(ctx, func(e *messages.Envelope) bool { return e.Seq == last }); err != nil {
		t.Fatal(err)
	}
	probe.Close()
	c.shutdown()
	close(f.gate)
	waitDone(t, c, "after shutdown")
	st := f.state()
	assertSeqs(t, st.seqs, 1, last)
	if len(st.finals) != 1 || !errors.Is(st.finals[0], ErrShutdown) || st.closes != 1 {
		t.Fatalf("finals %v closes %d", st.finals, st.closes)
	}
}

// TestStreamConn_ResubscribeAfterEndClosesSubscription: a subscribe frame
// that is handled just as the stream ends (the writer found the client
// gone) must not leave a live subscription behind.
//
// Fails today: resubscribe (stream.go) installs the new subscription even
// when the stream has ended; end has already closed the old one and will
// not run again, so the new subscription stays registered with the session
// hub (which keeps offering it events) until the session's hub stops.
// Fix: in resubscribe, under c.mu, if the stream ended (or is shutting
// down, see the next test), close the new subscription instead of
// installing it; have end mark the stream ended under c.mu before it closes
// c.sub, so the two cannot interleave.
func TestStreamConn_ResubscribeAfterEndClosesSubscription(t *testing.T) {
	t.Parallel()
	fx := newStreamFixture(t, Config{})
	f := newFakeFramer()
	c := fx.stream(f, fx.head)
	c.end()
	sub := fx.subscribe(fx.head)
	t.Cleanup(sub.Close)
	c.resubscribe(sub)
	if _, err := sub.Poll(context.Background(), nil, 1); !errors.Is(err, feed.ErrClosed) {
		t.Fatalf("subscription installed on an ended stream is still open (Poll: %v)", err)
	}
}

// TestStreamConn_ShutdownWinsOverResubscribe: a subscribe frame handled
// while the server shuts the stream down must not revive it.
//
// Fails today: shutdown closes the current subscription and wakes the
// writer; if resubscribe then installs a new one before the writer polls,
// the writer sees the old one closed, finds it replaced (drain's
// "replaced by a resubscribe" branch) and carries on with the new one. The
// stream never sends its final frame or ends, so streamSet.closeAll, and
// with it Server.Shutdown, waits until its context expires (and the
// engine, if still running, keeps the stream alive). Fix: shutdown sets a
// flag under c.mu that resubscribe checks (closing the new subscription,
// and wsCommand then answering 1001).
func TestStreamConn_ShutdownWinsOverResubscribe(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		fx := newStreamFixture(t, Config{Heartbeat: time.Hour})
		f := newFakeFramer()
		f.gate = make(chan struct{})
		c := fx.stream(f, fx.head)
		fx.publish(1)
		synctest.Wait() // the writer is in writeEvents, held
		c.shutdown()
		c.resubscribe(fx.subscribe(fx.head)) // a subscribe frame arrives meanwhile
		close(f.gate)
		synctest.Wait()
		select {
		case <-c.done:
		default:
			t.Fatalf("stream revived by a resubscribe during shutdown: final frames %v", f.state().finals)
		}
		if st := f.state(); len(st.finals) != 1 || !errors.Is(st.finals[0], ErrShutdown) {
			t.Fatalf("finals %v, want one shutdown frame", st.finals)
		}
	})
}

// TestServer_ShutdownEndsStreamStartedDuringShutdown: a stream request that
// passed the closing check before Shutdown began can start its stream after
// streamSet.closeAll took its snapshot (http.Server.Shutdown stops waiting
// for a connection as soon as the handler hijacks it). That stream must
// still get its final frame and be closed.
//
// Fails today: streamSet.add accepts streams after closeAll, so such a
// stream is never shut down: an SSE connection stays open with a live
// subscription, and a WebSocket's reader goroutine keeps Server.Shutdown
// waiting for up to 2.5 heartbeats. Fix: give streamSet a closed flag, set
// by closeAll under s.mu; add reports false once it is set, and start then
// ends the stream at once (shutdown: final frame, close).
func TestServer_ShutdownEndsStreamStartedDuringShutdown(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		fx := newStreamFixture(t, Config{Heartbeat: time.Hour})
		sub := fx.subscribe(fx.head)                  // validated and subscribed before Shutdown began
		fx.srv.closing.Store(true)                    // Shutdown, up to ...
		fx.srv.streams.closeAll(context.Background()) // ... its snapshot of the open streams
		f := newFakeFramer()
		c := fx.srv.newStreamConn(f, newFlight(nil), nil, messages.LocalTenant, fx.session, sub)
		c.start() // the handler, after its hijack
		synctest.Wait()
		select {
		case <-c.done:
		default:
			t.Fatal("a stream started during Shutdown is left open")
		}
		if st := f.state(); len(st.finals) != 1 || !errors.Is(st.finals[0], ErrShutdown) || st.closes != 1 {
			t.Fatalf("finals %v closes %d, want the shutdown frame and a close", st.finals, st.closes)
		}
	})
}

// TestStreamSet_CloseAllHonoursDeadline: a stream whose writes are stuck (a
// reader too slow to take its tail) does not hold Server.Shutdown past its
// context: closeAll cuts it and returns ctx.Err().
func TestStreamSet_CloseAllHonoursDeadline(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		fx := newStreamFixture(t, Config{Heartbeat: time.Hour})
		f := newFakeFramer()
		f.gate = make(chan struct{})
		c := fx.stream(f, fx.head)
		fx.publish(1)
		synctest.Wait() // the writer is in writeEvents, held
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := fx.srv.streams.closeAll(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("closeAll = %v, want context.DeadlineExceeded", err)
		}
		select {
		case <-c.done:
		default:
			t.Fatal("stream not ended after the deadline")
		}
		if st := f.state(); st.closes != 1 {
			t.Fatalf("connection closed %d times, want 1", st.closes)
		}
		close(f.gate) // the stuck write fails or returns; the writer exits
		synctest.Wait()
	})
}

// TestCoalesce: a woken stream waits FlushDelay, longer while its writes
// carry fewer than coalesceTarget events (up to maxCoalesce × FlushDelay),
// and FlushDelay again once they are big enough or the stream went idle.
func TestCoalesce(t *testing.T) {
	const d = 5 * time.Millisecond
	for _, tt := range []struct {
		last int
		want time.Duration
	}{
		{0, d},                       // a new (or idle) stream
		{1, maxCoalesce * d},         // a trickle: wait longest
		{2, min(4*d, maxCoalesce*d)}, // coalesceTarget/2
		{coalesceTarget - 1, d * coalesceTarget / (coalesceTarget - 1)},
		{coalesceTarget, d},
		{500, d},
	} {
		c := &streamConn{lastBatch: tt.last}
		if got := c.coalesce(d); got != tt.want {
			t.Errorf("last batch %d: wait %v, want %v", tt.last, got, tt.want)
		}
	}
	if got := (&streamConn{lastBatch: 1}).coalesce(0); got != 0 {
		t.Errorf("FlushDelay 0 stays 0, got %v", got)
	}
}
