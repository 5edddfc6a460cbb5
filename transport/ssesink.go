package transport

import (
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// sseSink is how an SSE stream's bytes reach its client: the only part of
// a stream that differs between a hijacked HTTP/1.1 connection (connSink)
// and a response written through the handler's ResponseWriter
// (responseSink: HTTP/2, HTTP/3, wrapped writers that hide Hijack). The
// framer (sseFramer) encodes; the stream (streamConn) decides what to send
// and when; the sink only delivers.
//
// The stream's writer calls write and deadline, one call at a time; abort
// and close may be called from any goroutine, also while a write blocks,
// and after close.
type sseSink interface {
	// write sends bufs, in order, to the client, and returns the bytes it
	// wrote. One call is one batch: it is on its way to the client (sent
	// or flushed) when write returns.
	write(bufs net.Buffers) (int64, error)
	// abort makes the write under way (or the next one) fail, so that a
	// stream cut for lagging can send its final frame (see finalWait).
	abort()
	// deadline bounds the writes that follow (the final frame); zero
	// removes the bound.
	deadline(t time.Time)
	// close ends the response; a write blocked on the client fails.
	// Idempotent.
	close() error
}

var (
	_ sseSink = (*connSink)(nil)
	_ sseSink = (*responseSink)(nil)
)

// connSink writes to a hijacked HTTP/1.1 connection: a batch is one writev
// straight to the socket, and abort and close act on the socket. The
// connection's end is noticed by the heartbeat loop, which peeks at the
// idle socket (sendQueue.PeerClosed).
type connSink struct {
	conn net.Conn  // closes and takes deadlines (the tracked connection)
	w    io.Writer // writes: the socket itself where possible, so a batch is one writev
	once sync.Once
}

func newConnSink(conn net.Conn) *connSink {
	var w io.Writer = conn
	if tc, ok := conn.(*trackedConn); ok {
		w = tc.Conn // net.Buffers writes with writev only to the socket type itself
	}
	return &connSink{conn: conn, w: w}
}

func (s *connSink) write(bufs net.Buffers) (int64, error) { return bufs.WriteTo(s.w) }

// abort: a deadline in the past fails the write at once.
func (s *connSink) abort() { _ = s.conn.SetWriteDeadline(time.Unix(1, 0)) }

func (s *connSink) deadline(t time.Time) { _ = s.conn.SetWriteDeadline(t) }

func (s *connSink) close() error {
	var err error
	s.once.Do(func() { err = s.conn.Close() })
	return err
}

// responseSink writes through the handler's ResponseWriter, where the
// connection cannot be taken over: each batch is written and flushed with
// http.ResponseController on the handler's goroutine, which serves the
// stream for its whole life (streamConn.run). The client's leaving is
// noticed through the request's context (streamConn.gone).
//
// Deadlines go through the ResponseController, which reaches the writer's
// own SetWriteDeadline or an unwrapped one (HTTP/2 streams and HTTP/1.1
// connections have them). On HTTP/2 a write deadline that passes resets
// the stream: a write cannot be cut and the stream still end with a frame.
// So abort gives the write under way finalWait to finish instead of
// failing it at once, and the final frame follows within that bound, as
// on the hijacked path. A writer without deadlines cannot be cut at all:
// a write to a stalled client then ends only when its connection fails
// (docs/api.md).
//
// Once the handler has returned, its ResponseWriter must not be used
// (HTTP/2's panics). The writer calls close before the stream's handler
// returns (streamConn.end), and the calls from other goroutines (abort,
// close) touch rc only under mu while the sink is open or a write is under
// way, so never after the handler has returned.
type responseSink struct {
	w  http.ResponseWriter
	rc *http.ResponseController

	mu      sync.Mutex // guards closed and writing; held around every call on rc but Write and Flush
	closed  bool
	writing bool // the writer is in Write or Flush (on the handler's goroutine, which has not returned)
}

// errSinkClosed is a write to a response the stream has ended.
var errSinkClosed = errors.New("transport: stream response closed")

func newResponseSink(w http.ResponseWriter, rc *http.ResponseController) *responseSink {
	return &responseSink{w: w, rc: rc}
}

func (s *responseSink) write(bufs net.Buffers) (int64, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return 0, errSinkClosed
	}
	s.writing = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.writing = false
		s.mu.Unlock()
	}()
	var n int64
	for _, b := range bufs {
		m, err := s.w.Write(b)
		n += int64(m)
		if err != nil {
			return n, err
		}
	}
	// Bytes the flush fails to send are counted as written: the response
	// is broken then, and nothing is written after them but the attempt
	// at the final frame.
	return n, s.rc.Flush()
}

func (s *responseSink) abort() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		_ = s.rc.SetWriteDeadline(time.Now().Add(finalWait)) // wall clock: the connection's deadline
	}
}

func (s *responseSink) deadline(t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		_ = s.rc.SetWriteDeadline(t)
	}
}

// close marks the response ended: later writes fail without touching it,
// and a write blocked on the client is cut (a deadline in the past; on
// HTTP/2 the stream is reset). Called by the writer itself at a clean end,
// no write is under way: the handler then returns and net/http ends the
// response normally (END_STREAM, or the last chunk).
func (s *responseSink) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if s.writing {
		_ = s.rc.SetWriteDeadline(time.Unix(1, 0))
	}
	return nil
}

// finish is called by the handler after the stream ended, before it
// returns: a write deadline left on an HTTP/1.1 connection would outlive
// the response and cut the connection's next request.
func (s *responseSink) finish() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	_ = s.rc.SetWriteDeadline(time.Time{})
}

// canFlush reports whether http.ResponseController can flush w: whether w,
// or a writer it unwraps to, has FlushError or Flush. It walks the chain
// as ResponseController.Flush does, without flushing (which would send the
// response's header before the stream is known to be servable).
func canFlush(w http.ResponseWriter) bool {
	for {
		switch t := w.(type) {
		case interface{ FlushError() error }, http.Flusher:
			return true
		case interface{ Unwrap() http.ResponseWriter }:
			w = t.Unwrap()
		default:
			return false
		}
	}
}
