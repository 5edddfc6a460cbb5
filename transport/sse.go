package transport

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/messages"
)

// sseStream: GET /api/v1/events/stream?session_id=...[&after=N], or the
// Last-Event-ID header. Everything is validated, and errors answered as
// JSON, before the first byte of the stream.
//
// Then the connection is hijacked (HTTP/1.1): the stream holds no goroutine
// while idle. Where it cannot be (HTTP/2 and HTTP/3, or a ResponseWriter
// that hides Hijack even through http.ResponseController, as some
// middleware's wrappers do), the stream is written through the
// ResponseWriter and flushed, on this handler's goroutine, which it then
// holds until the stream ends. Both are the same stream (streamConn,
// sseFramer); only the sink differs (ssesink.go).
func (s *Server) sseStream(w http.ResponseWriter, r *http.Request, tenant messages.TenantID) {
	release, aerr := s.caps.acquire(tenant)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	until, aerr := untilFrom(r)
	if aerr != nil {
		release()
		writeError(w, aerr)
		return
	}
	sub, session, aerr := s.subscribe(r, tenant)
	if aerr == nil && until != nil {
		aerr = s.checkUntil(r, tenant, session, until)
	}
	if aerr != nil {
		if sub != nil {
			sub.Close()
		}
		release()
		writeError(w, aerr)
		return
	}
	rc := http.NewResponseController(w)
	conn, brw, err := rc.Hijack()
	switch {
	case err == nil:
		_ = brw // the client sends nothing more on a GET; its buffers are dropped with it
		s.sseHijacked(conn, r, tenant, session, sub, release, until)
	case errors.Is(err, http.ErrNotSupported) && canFlush(w):
		s.sseHeld(w, r, rc, tenant, session, sub, release, until)
	default:
		sub.Close()
		release()
		writeError(w, errorf(http.StatusInternalServerError, codeInternal,
			"streaming is not supported on this connection: its ResponseWriter can neither be hijacked nor flushed"))
	}
}

// sseHijacked serves a stream on a hijacked HTTP/1.1 connection. The body
// is close-delimited (no chunked framing), which every SSE client accepts;
// the stream ends when the connection closes.
func (s *Server) sseHijacked(conn net.Conn, r *http.Request, tenant messages.TenantID, session messages.SessionID,
	sub *actors.Subscription, release func(), until *untilRun) {
	// The stream is validated: no read or write deadline of the request
	// applies to it any more. It ends on the client's error or close, on
	// shutdown, or over the maximum lag; never for being slow.
	_ = conn.SetDeadline(time.Time{})
	h := make(http.Header, 6)
	s.sseHeader(h, r)
	var buf bytes.Buffer
	buf.WriteString("HTTP/1.1 200 OK\r\n")
	_ = h.Write(&buf)
	buf.WriteString("Connection: close\r\n\r\n")
	buf.Write(s.sseRetry())
	f := newSSEFramer(newConnSink(conn), newSendQueue(conn))
	if err := f.write(buf.Bytes()); err != nil {
		sub.Close()
		release()
		_ = f.out.close()
		return
	}
	c := s.newStreamConn(f, f.fl, release, tenant, session, sub)
	c.until = until
	c.start()
}

// sseHeld serves a stream through the ResponseWriter (see sseStream) and
// returns when it has ended. The body is framed by the protocol (HTTP/2
// DATA frames, HTTP/1.1 chunks), and ends cleanly with the stream.
func (s *Server) sseHeld(w http.ResponseWriter, r *http.Request, rc *http.ResponseController, tenant messages.TenantID,
	session messages.SessionID, sub *actors.Subscription, release func(), until *untilRun) {
	// As on the hijacked path, the request's deadlines no longer apply: a
	// read deadline left on an HTTP/1.1 connection would end the stream
	// (net/http's background read fails and cancels the request). A writer
	// that takes no deadlines keeps the server's (docs/api.md).
	_ = rc.SetReadDeadline(time.Time{})
	_ = rc.SetWriteDeadline(time.Time{})
	s.sseHeader(w.Header(), r)
	w.WriteHeader(http.StatusOK)
	out := newResponseSink(w, rc)
	defer out.finish()
	f := newSSEFramer(out, noSendQueue{}) // no socket to probe: bytes handed to net/http count as received
	if err := f.write(s.sseRetry()); err != nil {
		sub.Close()
		release()
		return
	}
	c := s.newStreamConn(f, f.fl, release, tenant, session, sub)
	c.until = until
	c.run(r.Context().Done())
}

// sseHeader sets the headers of an SSE stream's response on h, for both
// paths: the hijacked one writes them itself, the held one through the
// ResponseWriter (where cors has already set the CORS ones).
func (s *Server) sseHeader(h http.Header, r *http.Request) {
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	if origin := r.Header.Get("Origin"); origin != "" && s.originAllowed(origin) {
		allowOrigin(h, origin)
	}
}

// sseRetry is the block that starts every SSE stream: retry: tells
// EventSource how soon to reconnect after the stream ends (browsers
// default to seconds); once, before any event.
func (s *Server) sseRetry() []byte {
	return []byte("retry: " + strconv.FormatInt(s.cfg.SSERetry.Milliseconds(), 10) + "\n\n")
}

// untilRun is the end of an SSE stream asked for with ?until=run_end: the
// stream ends with its final frame (code run_ended) right after the first
// terminal event (run_finished or run_error) after the cursor of the run
// named by ?run_id=, or of any run of the session without it.
type untilRun struct {
	run messages.RunID // "": any run
	// passed: the named run's terminal event is at or before the cursor,
	// so the stream ends at once. Set before the stream starts.
	passed bool
}

// match reports whether e is the event the stream ends after.
func (u *untilRun) match(e *messages.Encoded) bool {
	return e.Type.Terminal() && (u.run == "" || e.RunID == u.run)
}

// untilValue is the one value ?until= takes.
const untilValue = "run_end"

// untilFrom reads ?until= and ?run_id= (nil without until).
func untilFrom(r *http.Request) (*untilRun, *apiError) {
	q := r.URL.Query()
	until, run := q.Get("until"), q.Get("run_id")
	switch {
	case until == "" && run == "":
		return nil, nil
	case until == "":
		return nil, errorf(http.StatusBadRequest, codeBadRequest, "run_id is only used with until=run_end")
	case until != untilValue:
		return nil, errorf(http.StatusBadRequest, codeBadRequest, "until must be run_end")
	}
	u := &untilRun{}
	if run != "" {
		id, err := messages.NewRunID(run)
		if err != nil {
			return nil, errorf(http.StatusBadRequest, codeBadRequest, "run_id: "+err.Error())
		}
		u.run = id
	}
	return u, nil
}

// checkUntil checks the run u names (404 when it is unknown or another
// tenant's, 400 when it is another session's) and whether its terminal
// event is at or before the stream's cursor.
func (s *Server) checkUntil(r *http.Request, tenant messages.TenantID, session messages.SessionID, u *untilRun) *apiError {
	if u.run == "" {
		return nil
	}
	sum, err := s.engine.Run(tenant, u.run)
	if err != nil {
		return engineError(err)
	}
	if sum.SessionID != session {
		return errorf(http.StatusBadRequest, codeBadRequest, "run_id names a run of another session")
	}
	after, aerr := cursorFrom(r)
	if aerr != nil {
		return aerr
	}
	u.passed = sum.Status.Terminal() && sum.LastSeq <= after
	return nil
}

// subscribe validates a stream request and subscribes it.
func (s *Server) subscribe(r *http.Request, tenant messages.TenantID) (*actors.Subscription, messages.SessionID, *apiError) {
	if s.closing.Load() {
		return nil, "", errorf(http.StatusServiceUnavailable, codeUnavailable, "server is shutting down")
	}
	session, err := messages.NewSessionID(r.URL.Query().Get("session_id"))
	if err != nil {
		return nil, "", errorf(http.StatusBadRequest, codeBadRequest, "session_id: "+err.Error())
	}
	after, aerr := cursorFrom(r)
	if aerr != nil {
		return nil, "", aerr
	}
	ctx, cancel := context.WithTimeout(r.Context(), engineTimeout)
	defer cancel()
	sub, err := s.engine.Subscribe(ctx, messages.Subscribe{Tenant: tenant, SessionID: session, After: after})
	if err != nil {
		return nil, "", engineError(err)
	}
	return sub, session, nil
}

// sseFramer writes SSE frames: each event as
// "id: <seq>\nevent: <type>\ndata: <envelope>\n\n" (LF only), heartbeats as
// ": ping\n\n" comments, and a final "event: stream_closed" frame. Its
// sink delivers them (ssesink.go).
type sseFramer struct {
	out sseSink
	fl  *flight
	// tail is the unwritten rest of a frame an aborted write cut; the
	// final frame follows it so the client's parser stays in step.
	tail []byte
}

func newSSEFramer(out sseSink, q sendQueue) *sseFramer {
	return &sseFramer{out: out, fl: newFlight(q)}
}

// frameBufs pools the slices of frames handed to writev.
var frameBufs = sync.Pool{New: func() any { b := make(net.Buffers, 0, maxBatch); return &b }}

func (f *sseFramer) writeEvents(evs []*messages.Encoded) error {
	bp := frameBufs.Get().(*net.Buffers)
	bufs := (*bp)[:0]
	size := 0
	for _, e := range evs {
		fr := e.SSEFrame() // built once per event, shared by every stream
		bufs = append(bufs, fr)
		size += len(fr)
	}
	f.fl.begin(size, len(evs))
	n, err := f.out.write(bufs) // one writev for the whole batch, or one flush
	f.fl.done(int(n))
	if err != nil && n > 0 {
		// Find the frame the write cut, if it cut one.
		off := n
		for _, e := range evs {
			fr := e.SSEFrame()
			if off < int64(len(fr)) {
				if off > 0 {
					f.tail = fr[off:]
				}
				break
			}
			off -= int64(len(fr))
		}
	}
	clear(bufs)
	*bp = bufs[:0]
	frameBufs.Put(bp)
	return err
}

func (f *sseFramer) write(b []byte) error {
	f.fl.begin(len(b), 0)
	n, err := f.out.write(net.Buffers{b})
	f.fl.done(int(n))
	if err != nil && n > 0 && n < int64(len(b)) {
		f.tail = b[n:]
	}
	return err
}

// writeReplies is never called: SSE clients send nothing.
func (f *sseFramer) writeReplies([][]byte) error { return nil }

func (f *sseFramer) writePing() error { return f.write([]byte(": ping\n\n")) }

// abort makes the write under way fail (sseSink.abort).
func (f *sseFramer) abort() { f.out.abort() }

// writeFinal sends "event: stream_closed" with the CloseReason as data,
// after the rest of a frame an abort cut. A stream cut for lagging gets
// finalWait to take it; at shutdown the server's grace bounds it.
func (f *sseFramer) writeFinal(reason *CloseReason) error {
	deadline := time.Time{}
	if reason.Code == CloseCodeLagging {
		deadline = time.Now().Add(finalWait) // wall clock: a socket deadline
	}
	f.out.deadline(deadline)
	data, _ := json.Marshal(reason)
	b := append(append([]byte(nil), f.tail...), "event: stream_closed\ndata: "...)
	f.tail = nil
	return f.write(append(append(b, data...), "\n\n"...))
}

func (f *sseFramer) close() error { return f.out.close() }

func (f *sseFramer) transport() string { return "sse" }
