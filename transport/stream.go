package transport

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/actors/feed"
	"github.com/conclave-ai/conclave/messages"
)

const (
	// maxBatch bounds the events sent in one write.
	maxBatch = 512
	// linger is how long a writer goroutine waits for more events before it
	// exits and leaves the connection idle (no goroutine).
	linger = time.Second
)

// framer writes one transport's frames to one connection. Only the
// connection's writer goroutine calls it, one call at a time.
type framer interface {
	// writeEvents sends the events in one write.
	writeEvents(evs []*messages.Encoded) error
	// writePing keeps an idle stream alive (SSE comment, WebSocket ping).
	writePing() error
	// writeFinal sends the last frame, saying why the stream ends (after
	// the rest of a frame an aborted write left unfinished, if any).
	writeFinal(reason *CloseReason) error
	// abort makes a write under way (or the next one) fail at once; safe
	// from any goroutine. The stream then ends with its final frame.
	abort()
	// writeReplies sends answers to client requests (WebSocket only).
	writeReplies(replies [][]byte) error
	// close closes the connection.
	close() error
	transport() string
}

// streamConn is one SSE or WebSocket stream. Its lifecycle:
//
//   - The hub (through the subscription's OnReady) or the heartbeat loop
//     calls ready. If no writer goroutine runs, ready starts one; otherwise
//     it leaves a token in wake for the running one.
//   - The writer polls the subscription and writes everything pending in
//     one write, repeats until nothing is pending, then waits up to linger
//     for another wake-up before it exits. An idle stream has no goroutine.
//   - Write errors mean the client is gone; a closed subscription means the
//     server (or the hub) ended the stream: the writer sends the final frame.
//     Either way the writer closes the connection, once.
//
// A held stream (run) is the exception: where the connection cannot be
// taken over from net/http (HTTP/2 and HTTP/3, ResponseWriters that hide
// Hijack), the response lives only as long as its handler, so the
// handler's goroutine is the writer for the stream's whole life. It runs
// the same loop, woken the same way, but waits when idle instead of
// exiting, and also wakes when the request's context says the client has
// gone. Everything else (polling, batching, heartbeats, until, lag,
// shutdown) is the same code; only the framer's sink differs (ssesink.go).
type streamConn struct {
	srv     *Server
	f       framer
	fl      *flight         // what the framer handed to the connection and the client has not received
	release func()          // frees the stream's slot under the stream caps
	ctx     context.Context // cancelled when the stream ends
	cancel  context.CancelFunc
	session messages.SessionID
	tenant  messages.TenantID

	mu      sync.Mutex // guards sub (a WebSocket resubscribe replaces it), replies and caught
	sub     *actors.Subscription
	replies [][]byte // answers to client requests, written by the writer
	caught  uint64   // sub.Dropped() already added to the catch-up counter

	// aborted is why the server cuts the stream (max lag), set once, at
	// abortedAt (unix nanoseconds of Config.Now).
	aborted   atomic.Pointer[CloseReason]
	abortedAt atomic.Int64
	// received is the flight's received byte count when the heartbeat
	// loop last looked; owned by the heartbeat loop.
	received uint64

	wake      chan struct{} // capacity 1: a pending wake-up is remembered, ready never blocks
	running   atomic.Bool   // a writer goroutine owns the connection
	needPing  atomic.Bool
	lastWrite atomic.Int64 // unix nanoseconds
	lastPing  atomic.Int64 // unix nanoseconds
	// pingBusy: ping every heartbeat even while events flow. WebSocket
	// clients prove they are alive only by answering pings (the reader
	// drops a client silent for 2.5 heartbeats); SSE clients need
	// heartbeats only when the stream is idle.
	pingBusy bool
	// until, if set, ends the stream after a run's terminal event (SSE
	// ?until=run_end). Set before start, read by the writer only.
	until *untilRun
	// held: the writer is the goroutine that called run, for the stream's
	// whole life (see above). Set before start.
	held bool
	// gone is closed when the client has gone (a held stream's request
	// context); nil otherwise. Read by the writer only.
	gone <-chan struct{}
	// alive, if set, is called when the client received bytes since the
	// last check: a WebSocket client reading slowly answers pings late
	// (they queue behind the events), and this keeps its reader's
	// deadline from cutting it for being slow.
	alive    func()
	stopping bool // under mu: shutdown or end began; a resubscribe must not revive the stream
	// endReason labels conclave_stream_ends_total; the first reason set
	// (setEnd) wins.
	endReason atomic.Pointer[string]
	ended     atomic.Bool
	done      chan struct{} // closed when the stream has ended

	buf []*messages.Encoded // writer-owned; released when the writer exits
	// lastBatch is how many events the last write carried (writer-owned;
	// 0 once the stream went idle): see coalesce.
	lastBatch int
}

func (s *Server) newStreamConn(f framer, fl *flight, release func(), tenant messages.TenantID, session messages.SessionID, sub *actors.Subscription) *streamConn {
	ctx, cancel := context.WithCancel(context.Background())
	if release == nil {
		release = func() {}
	}
	c := &streamConn{srv: s, f: f, fl: fl, release: release, ctx: ctx, cancel: cancel, tenant: tenant, session: session, sub: sub,
		wake: make(chan struct{}, 1), done: make(chan struct{})}
	c.lastWrite.Store(s.cfg.Now().UnixNano())
	c.lastPing.Store(s.cfg.Now().UnixNano())
	return c
}

// start registers the stream and delivers what is already pending (replay).
func (c *streamConn) start() {
	c.srv.metrics.connections.WithLabelValues(c.f.transport()).Inc()
	c.current().OnReady(c.ready)
	if !c.srv.streams.add(c) { // the server is already closing its streams
		c.shutdown()
		return
	}
	c.ready()
}

// run serves a held stream on the calling goroutine (a request handler,
// which must outlive its response) and returns once the stream has ended;
// gone is closed when the client leaves (the request's context). ready
// never starts a writer goroutine for it: the caller is its writer.
func (c *streamConn) run(gone <-chan struct{}) {
	c.held, c.gone = true, gone
	c.running.Store(true) // for good: ready only leaves wake-up tokens
	c.start()
	c.writeLoop()
}

func (c *streamConn) current() *actors.Subscription {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sub
}

// resubscribe replaces the subscription (WebSocket "subscribe" frames).
func (c *streamConn) resubscribe(sub *actors.Subscription) {
	c.mu.Lock()
	if c.stopping { // ending: the new subscription must not keep it alive
		c.mu.Unlock()
		sub.Close()
		return
	}
	old := c.sub
	c.countCatchupLocked()
	c.sub, c.caught = sub, 0
	c.mu.Unlock()
	sub.OnReady(c.ready)
	old.Close()
	c.ready()
}

// reply queues an answer to a client request for the writer.
func (c *streamConn) reply(b []byte) {
	c.mu.Lock()
	c.replies = append(c.replies, b)
	c.mu.Unlock()
	c.ready()
}

// countCatchup adds the events the subscription read from the journal
// since the last call (because its live queue overflowed) to
// conclave_stream_catchup_events_total.
func (c *streamConn) countCatchup() {
	c.mu.Lock()
	c.countCatchupLocked()
	c.mu.Unlock()
}

// countCatchupLocked: must be called with c.mu held.
func (c *streamConn) countCatchupLocked() {
	if d := c.sub.Dropped(); d > c.caught {
		c.srv.metrics.catchup.Add(float64(d - c.caught))
		c.caught = d
	}
}

// lag is how far the client is behind: events not yet written plus the
// events and bytes written and not yet received (flight.lag).
func (c *streamConn) lag() (events, bytes uint64) {
	events, bytes = c.fl.lag()
	return events + c.current().Lag(), bytes
}

// abort cuts the stream with reason: a write blocked on the client
// returns, and the writer sends the final frame if the connection takes
// it within finalWait, then closes. Safe from any goroutine; the first
// reason wins.
func (c *streamConn) abort(reason *CloseReason) {
	if !c.aborted.CompareAndSwap(nil, reason) {
		return
	}
	c.abortedAt.Store(c.srv.cfg.Now().UnixNano())
	c.f.abort()
	c.ready()
}

func (c *streamConn) takeReplies() [][]byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.replies
	c.replies = nil
	return r
}

// ready wakes the writer. It never blocks: it runs on hub goroutines.
func (c *streamConn) ready() {
	if c.ended.Load() {
		return
	}
	select {
	case c.wake <- struct{}{}:
	default:
	}
	if c.running.CompareAndSwap(false, true) {
		if !c.srv.writers.Go(c.writeLoop) { // the server is shutting down
			c.running.Store(false)
			c.end()
		}
	}
}

func (c *streamConn) writeLoop() {
	var idle, delay *time.Timer
	defer func() {
		for _, t := range []*time.Timer{idle, delay} {
			if t != nil {
				t.Stop()
			}
		}
	}()
	for {
		select {
		case <-c.wake:
		default:
		}
		if d := c.coalesce(c.srv.cfg.FlushDelay); d > 0 { // let more events join this write
			if delay == nil {
				delay = time.NewTimer(d)
			} else {
				delay.Reset(d)
			}
			select {
			case <-delay.C:
			case <-c.ctx.Done():
			}
		}
		if !c.drain() {
			c.end()
			return
		}
		if c.held { // the handler's goroutine: it waits, and never leaves the stream idle without a writer
			select {
			case <-c.wake:
			case <-c.ctx.Done(): // drain sees the closed subscription
			case <-c.gone:
				c.setEnd(endClientGone)
				c.end()
				return
			}
			continue
		}
		if idle == nil {
			idle = time.NewTimer(linger)
		} else {
			idle.Reset(linger)
		}
		select {
		case <-c.wake:
			continue
		case <-c.ctx.Done():
			continue // drain sees the closed subscription
		case <-idle.C:
		}
		c.buf = nil // an idle stream keeps no batch buffer
		c.lastBatch = 0
		c.running.Store(false)
		// A wake-up that came after the timer but before the Store saw a
		// running writer and left only a token: take over again if so.
		if len(c.wake) == 0 || !c.running.CompareAndSwap(false, true) {
			return
		}
	}
}

// Coalescing: a woken stream waits FlushDelay so that the events that
// follow share its write. When events trickle in (a council between its
// bursts: one lane at a time, a wave's tail), a write after FlushDelay
// carries one or two events, and the cost of a delivery is the cost of a
// write. So the wait stretches while the last write was small, up to
// maxCoalesce × FlushDelay, until writes carry about coalesceTarget events;
// a stream that keeps up with a busy session writes every FlushDelay as
// before, and one that was idle starts from FlushDelay again.
const (
	coalesceTarget = 8
	maxCoalesce    = 4
)

// coalesce is how long the writer waits before its next write, given the
// last write's size (writer-owned: lastBatch).
func (c *streamConn) coalesce(d time.Duration) time.Duration {
	if d <= 0 || c.lastBatch <= 0 || c.lastBatch >= coalesceTarget {
		return d
	}
	return min(d*coalesceTarget/time.Duration(c.lastBatch), maxCoalesce*d)
}

// drain writes everything pending. It reports false when the stream ended.
func (c *streamConn) drain() bool {
	for {
		if r := c.aborted.Load(); r != nil {
			return c.final(r)
		}
		if c.pingBusy && c.needPing.Swap(false) { // WebSocket: ping even while behind
			if err := c.f.writePing(); err != nil {
				return c.failed(err)
			}
			c.lastPing.Store(c.srv.cfg.Now().UnixNano())
		}
		if r := c.takeReplies(); len(r) > 0 {
			if err := c.f.writeReplies(r); err != nil {
				return c.failed(err)
			}
		}
		if c.until != nil && c.until.passed {
			return c.final(&CloseReason{Code: CloseCodeRunEnded, Message: "run " + string(c.until.run) + " had ended before the cursor"})
		}
		sub := c.current()
		evs, err := sub.Poll(c.ctx, c.buf, maxBatch)
		c.buf = evs[:0]
		c.countCatchup()
		var endAfter *messages.Encoded
		if c.until != nil {
			for i, e := range evs {
				if c.until.match(e) {
					// The events after it are not sent: the stream ends here.
					evs, endAfter = evs[:i+1], e
					break
				}
			}
		}
		if len(evs) > 0 {
			c.lastBatch = len(evs)
			if werr := c.f.writeEvents(evs); werr != nil {
				return c.failed(werr)
			}
			c.lastWrite.Store(c.srv.cfg.Now().UnixNano())
			c.srv.metrics.delivered.WithLabelValues(c.f.transport()).Add(float64(len(evs)))
			c.srv.metrics.writes.WithLabelValues(c.f.transport()).Inc()
			clear(evs) // drop references to delivered events
		}
		if endAfter != nil {
			return c.final(&CloseReason{Code: CloseCodeRunEnded, Message: "run " + string(endAfter.RunID) + " ended"})
		}
		if err != nil {
			if errors.Is(err, feed.ErrClosed) && sub != c.current() {
				continue // replaced by a resubscribe
			}
			reason := &CloseReason{Code: CloseCodeSessionGone, Message: err.Error()}
			if errors.Is(err, feed.ErrClosed) || errors.Is(err, context.Canceled) {
				reason = ErrShutdown
			}
			return c.final(reason)
		}
		if len(evs) == 0 {
			if c.needPing.Swap(false) { // only when idle: a busy stream's writes are its heartbeat
				if err := c.f.writePing(); err != nil {
					return c.failed(err)
				}
				now := c.srv.cfg.Now().UnixNano()
				c.lastWrite.Store(now)
				c.lastPing.Store(now)
			}
			return true
		}
	}
}

// failed handles a failed write: the client is gone, or the write was
// aborted (then the final frame follows). It reports false.
func (c *streamConn) failed(err error) bool {
	if r := c.aborted.Load(); r != nil {
		return c.final(r)
	}
	c.srv.cfg.Logger.Debug("stream: client gone", "transport", c.f.transport(), "session", c.session, "err", err)
	c.setEnd(endClientGone)
	return false
}

// final sends the final frame. It reports false: the stream ends.
func (c *streamConn) final(r *CloseReason) bool {
	_ = c.f.writeFinal(r)
	c.setEnd(r.Code)
	return false
}

// Codes of CloseReason, and the reason label of conclave_stream_ends_total.
const (
	CloseCodeShutdown    = "shutdown"     // the server is shutting down
	CloseCodeSessionGone = "session_gone" // the session's journal failed
	CloseCodeLagging     = "lagging"      // the client fell over the server's maximum lag behind
	CloseCodeRunEnded    = "run_ended"    // SSE ?until=run_end: the run's terminal event was sent
	endClientGone        = "client_gone"  // not a close reason: the client closed or failed
	endProtocol          = "protocol"     // not a close reason: a WebSocket client broke the protocol
)

// CloseReason is why the server ends a stream: the data of the final SSE
// frame (event: stream_closed) and the reason of the WebSocket close frame.
type CloseReason struct {
	Code    string `json:"code"`
	Message string `json:"reason"`
}

func (r *CloseReason) Error() string { return r.Message }

// Close reasons the server gives.
var (
	ErrShutdown = &CloseReason{Code: CloseCodeShutdown, Message: "server shutting down"}
	ErrLagging  = &CloseReason{Code: CloseCodeLagging, Message: "the client is more than the server's maximum lag behind; reconnect from your last seq"}
)

// finalWait bounds the final frame of a stream cut for lagging: its client
// reads slowly, so the frame is sent only if the socket takes it soon.
const finalWait = time.Second

// setEnd records why the stream ends, unless a reason was recorded first.
func (c *streamConn) setEnd(reason string) { c.endReason.CompareAndSwap(nil, &reason) }

// end closes the stream once: connection, subscription, registry, slot.
func (c *streamConn) end() {
	if !c.ended.CompareAndSwap(false, true) {
		return
	}
	c.mu.Lock()
	c.stopping = true
	c.countCatchupLocked()
	c.mu.Unlock()
	c.cancel()
	_ = c.f.close()
	c.current().Close()
	c.srv.streams.remove(c)
	c.release()
	c.srv.metrics.connections.WithLabelValues(c.f.transport()).Dec()
	c.setEnd(endClientGone)
	c.srv.metrics.streamEnds.WithLabelValues(c.f.transport(), *c.endReason.Load()).Inc()
	close(c.done)
}

// shutdown ends the stream from outside: the subscription closes, and the
// writer delivers what is left, the final frame, and closes.
func (c *streamConn) shutdown() {
	c.mu.Lock()
	c.stopping = true
	sub := c.sub
	c.mu.Unlock()
	sub.Close()
	c.ready()
}

// streamSet is the registry of open streams, for heartbeats, metrics and shutdown.
type streamSet struct {
	mu     sync.Mutex // guards conns and closed
	conns  map[*streamConn]struct{}
	closed bool // closeAll ran: no new streams
}

func newStreamSet() *streamSet { return &streamSet{conns: map[*streamConn]struct{}{}} }

// add registers a stream; it refuses (false) once closeAll has run, so a
// stream started during shutdown cannot escape it.
func (s *streamSet) add(c *streamConn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.conns[c] = struct{}{}
	return true
}

func (s *streamSet) remove(c *streamConn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

func (s *streamSet) snapshot() []*streamConn {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*streamConn, 0, len(s.conns))
	for c := range s.conns {
		out = append(out, c)
	}
	return out
}

// closeAll ends every stream and waits until each has sent its final frame
// (or failed to). When ctx ends first, the streams still draining to slow
// readers are cut (connection closed without their tail) and ctx.Err() is
// returned.
func (s *streamSet) closeAll(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	conns := s.snapshot()
	for _, c := range conns {
		c.shutdown()
	}
	for i, c := range conns {
		select {
		case <-c.done:
		case <-ctx.Done():
			for _, c := range conns[i:] {
				c.end()
			}
			return ctx.Err()
		}
	}
	return nil
}

// maxLag is the largest lag of an open stream, in events and in bytes
// (not necessarily of the same stream).
func (s *streamSet) maxLag() (events, bytes uint64) {
	for _, c := range s.snapshot() {
		e, b := c.lag()
		events, bytes = max(events, e), max(bytes, b)
	}
	return events, bytes
}

// heartbeatLoop pings streams that have written nothing for a heartbeat
// interval. One goroutine serves every stream.
func (s *Server) heartbeatLoop() {
	tick := time.NewTicker(s.cfg.Heartbeat / 4)
	defer tick.Stop()
	for {
		select {
		case <-s.stopBeat:
			return
		case <-tick.C:
		}
		now := s.cfg.Now().UnixNano()
		for _, c := range s.streams.snapshot() {
			s.checkLag(c)
			if c.f.transport() == "sse" && now-c.lastWrite.Load() >= int64(s.cfg.Heartbeat/4) && c.fl.peerClosed() {
				// An idle SSE stream whose client left: nothing reads its
				// socket, so without this it would hold its slot (and its
				// session's hub) until a heartbeat write failed.
				c.setEnd(endClientGone)
				c.end()
				continue
			}
			last := c.lastWrite.Load()
			if c.pingBusy {
				last = c.lastPing.Load()
			}
			if now-last >= int64(s.cfg.Heartbeat) {
				c.needPing.Store(true)
				c.ready()
			}
		}
	}
}

// checkLag cuts a stream over the maximum lag and tells a WebSocket stream
// whose client is receiving (however slowly) that its client is alive.
// Called by the heartbeat loop only.
func (s *Server) checkLag(c *streamConn) {
	if c.aborted.Load() != nil {
		// The writer had its chance to send the final frame; a write that
		// started after the abort (gorilla resets the deadline for each
		// frame) must not keep the stream: close it.
		if s.cfg.Now().UnixNano()-c.abortedAt.Load() > int64(2*finalWait) {
			c.setEnd(c.aborted.Load().Code)
			c.end()
		}
		return
	}
	maxE, maxB := s.cfg.MaxLagEvents, s.cfg.MaxLagBytes
	if maxE == 0 && maxB == 0 && c.alive == nil {
		return
	}
	events, bytes := c.lag()
	if (maxE > 0 && events > maxE) || (maxB > 0 && bytes > maxB) {
		s.cfg.Logger.Info("stream: cut for lagging", "transport", c.f.transport(), "session", c.session, "tenant", c.tenant,
			"lag_events", events, "lag_bytes", bytes)
		c.abort(ErrLagging)
		return
	}
	if c.alive != nil {
		if got := c.fl.receivedBytes(bytes); got != c.received {
			c.received = got
			c.alive()
		}
	}
}
