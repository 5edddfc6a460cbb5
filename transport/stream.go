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
	// writeFinal sends the last frame, saying why the stream ends.
	writeFinal(reason error) error
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
type streamConn struct {
	srv     *Server
	f       framer
	ctx     context.Context // cancelled when the stream ends
	cancel  context.CancelFunc
	session messages.SessionID
	tenant  messages.TenantID

	mu      sync.Mutex // guards sub (a WebSocket resubscribe replaces it) and replies
	sub     *actors.Subscription
	replies [][]byte // answers to client requests, written by the writer

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
	stopping bool // under mu: shutdown or end began; a resubscribe must not revive the stream
	ended    atomic.Bool
	done     chan struct{} // closed when the stream has ended

	buf []*messages.Encoded // writer-owned; released when the writer exits
}

func (s *Server) newStreamConn(f framer, tenant messages.TenantID, session messages.SessionID, sub *actors.Subscription) *streamConn {
	ctx, cancel := context.WithCancel(context.Background())
	c := &streamConn{srv: s, f: f, ctx: ctx, cancel: cancel, tenant: tenant, session: session, sub: sub,
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
	c.sub = sub
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
		if d := c.srv.cfg.FlushDelay; d > 0 { // let more events join this write
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
		c.running.Store(false)
		// A wake-up that came after the timer but before the Store saw a
		// running writer and left only a token: take over again if so.
		if len(c.wake) == 0 || !c.running.CompareAndSwap(false, true) {
			return
		}
	}
}

// drain writes everything pending. It reports false when the stream ended.
func (c *streamConn) drain() bool {
	for {
		if c.pingBusy && c.needPing.Swap(false) { // WebSocket: ping even while behind
			if err := c.f.writePing(); err != nil {
				return false
			}
			c.lastPing.Store(c.srv.cfg.Now().UnixNano())
		}
		if r := c.takeReplies(); len(r) > 0 {
			if err := c.f.writeReplies(r); err != nil {
				return false
			}
		}
		sub := c.current()
		evs, err := sub.Poll(c.ctx, c.buf, maxBatch)
		c.buf = evs[:0]
		if len(evs) > 0 {
			if werr := c.f.writeEvents(evs); werr != nil {
				c.srv.cfg.Logger.Debug("stream: client gone", "transport", c.f.transport(), "session", c.session, "err", werr)
				return false
			}
			c.lastWrite.Store(c.srv.cfg.Now().UnixNano())
			c.srv.metrics.delivered.WithLabelValues(c.f.transport()).Add(float64(len(evs)))
			c.srv.metrics.writes.WithLabelValues(c.f.transport()).Inc()
			clear(evs) // drop references to delivered events
		}
		if err != nil {
			if errors.Is(err, feed.ErrClosed) && sub != c.current() {
				continue // replaced by a resubscribe
			}
			if errors.Is(err, feed.ErrClosed) || errors.Is(err, context.Canceled) {
				err = errShutdown
			}
			_ = c.f.writeFinal(err)
			return false
		}
		if len(evs) == 0 {
			if c.needPing.Swap(false) { // only when idle: a busy stream's writes are its heartbeat
				if err := c.f.writePing(); err != nil {
					return false
				}
				now := c.srv.cfg.Now().UnixNano()
				c.lastWrite.Store(now)
				c.lastPing.Store(now)
			}
			return true
		}
	}
}

var errShutdown = errors.New("server shutting down")

// end closes the stream once: connection, subscription, registry.
func (c *streamConn) end() {
	if !c.ended.CompareAndSwap(false, true) {
		return
	}
	c.mu.Lock()
	c.stopping = true
	c.mu.Unlock()
	c.cancel()
	_ = c.f.close()
	c.current().Close()
	c.srv.streams.remove(c)
	c.srv.metrics.connections.WithLabelValues(c.f.transport()).Dec()
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

func (s *streamSet) maxLag() uint64 {
	var lag uint64
	for _, c := range s.snapshot() {
		sub := c.current()
		if l := sub.Lag(); l > lag {
			lag = l
		}
	}
	return lag
}

func (s *streamSet) catchup() uint64 {
	var n uint64
	for _, c := range s.snapshot() {
		n += c.current().Dropped()
	}
	return n
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
