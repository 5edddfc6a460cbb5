package transport

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/messages"
)

// sseHeader is written on the hijacked connection. The body is
// close-delimited (no chunked framing), which every SSE client accepts; the
// stream ends when the connection closes.
const sseHeader = "HTTP/1.1 200 OK\r\n" +
	"Content-Type: text/event-stream\r\n" +
	"Cache-Control: no-cache\r\n" +
	"X-Accel-Buffering: no\r\n" +
	"Connection: close\r\n"

// sseStream: GET /api/v1/events/stream?session_id=...[&after=N], or the
// Last-Event-ID header. Everything is validated, and errors answered as
// JSON, before the first byte of the stream.
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
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		sub.Close()
		release()
		writeError(w, errorf(http.StatusInternalServerError, codeInternal, "streaming is not supported on this connection"))
		return
	}
	_ = brw // the client sends nothing more on a GET; its buffers are dropped with it
	// The stream is validated: no read or write deadline of the request
	// applies to it any more. It ends on the client's error or close, on
	// shutdown, or over the maximum lag; never for being slow.
	_ = conn.SetDeadline(time.Time{})
	var hdr []byte
	hdr = append(hdr, sseHeader...)
	if origin := r.Header.Get("Origin"); origin != "" && s.originAllowed(origin) {
		hdr = append(hdr, "Access-Control-Allow-Origin: "+origin+"\r\nVary: Origin\r\n"...)
	}
	hdr = append(hdr, "\r\n"...)
	// retry: tells EventSource how soon to reconnect after the stream
	// ends (browsers default to seconds); once, before any event.
	hdr = append(hdr, "retry: "+strconv.FormatInt(s.cfg.SSERetry.Milliseconds(), 10)+"\n\n"...)
	f := newSSEFramer(conn)
	if err := f.write(hdr); err != nil {
		sub.Close()
		release()
		_ = conn.Close()
		return
	}
	c := s.newStreamConn(f, f.fl, release, tenant, session, sub)
	c.until = until
	c.start()
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
// ": ping\n\n" comments, and a final "event: stream_closed" frame.
type sseFramer struct {
	conn net.Conn  // closes and takes deadlines (the tracked connection)
	w    io.Writer // writes: the socket itself where possible, so a batch is one writev
	fl   *flight
	once sync.Once
	// tail is the unwritten rest of a frame an aborted write cut; the
	// final frame follows it so the client's parser stays in step.
	tail []byte
}

func newSSEFramer(conn net.Conn) *sseFramer {
	var w io.Writer = conn
	if tc, ok := conn.(*trackedConn); ok {
		w = tc.Conn // net.Buffers writes with writev only to the socket type itself
	}
	return &sseFramer{conn: conn, w: w, fl: newFlight(newSendQueue(conn))}
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
	keep := bufs
	f.fl.begin(size, len(evs))
	n, err := bufs.WriteTo(f.w) // one writev for the whole batch
	f.fl.done(int(n))
	if err != nil && n > 0 {
		// Find the frame the write cut, if it cut one, from the frames
		// themselves (WriteTo consumed the slice headers in keep).
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
	clear(keep)
	*bp = keep[:0]
	frameBufs.Put(bp)
	return err
}

func (f *sseFramer) write(b []byte) error {
	f.fl.begin(len(b), 0)
	n, err := f.w.Write(b)
	f.fl.done(n)
	if err != nil && n > 0 && n < len(b) {
		f.tail = b[n:]
	}
	return err
}

// writeReplies is never called: SSE clients send nothing.
func (f *sseFramer) writeReplies([][]byte) error { return nil }

func (f *sseFramer) writePing() error { return f.write([]byte(": ping\n\n")) }

// abort makes the write under way fail (a deadline in the past).
func (f *sseFramer) abort() { _ = f.conn.SetWriteDeadline(time.Unix(1, 0)) }

// writeFinal sends "event: stream_closed" with the CloseReason as data,
// after the rest of a frame an abort cut. A stream cut for lagging gets
// finalWait to take it; at shutdown the server's grace bounds it.
func (f *sseFramer) writeFinal(reason *CloseReason) error {
	deadline := time.Time{}
	if reason.Code == CloseCodeLagging {
		deadline = time.Now().Add(finalWait) // wall clock: a socket deadline
	}
	_ = f.conn.SetWriteDeadline(deadline)
	data, _ := json.Marshal(reason)
	b := append(append([]byte(nil), f.tail...), "event: stream_closed\ndata: "...)
	f.tail = nil
	return f.write(append(append(b, data...), "\n\n"...))
}

func (f *sseFramer) close() error {
	var err error
	f.once.Do(func() { err = f.conn.Close() })
	return err
}

func (f *sseFramer) transport() string { return "sse" }
