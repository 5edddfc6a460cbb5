package transport

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
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
	sub, session, aerr := s.subscribe(r, tenant)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		sub.Close()
		writeError(w, errorf(http.StatusInternalServerError, codeInternal, "streaming is not supported on this connection"))
		return
	}
	_ = brw // the client sends nothing more on a GET; its buffers are dropped with it
	var hdr []byte
	hdr = append(hdr, sseHeader...)
	if origin := r.Header.Get("Origin"); origin != "" && s.originAllowed(origin) {
		hdr = append(hdr, "Access-Control-Allow-Origin: "+origin+"\r\nVary: Origin\r\n"...)
	}
	hdr = append(hdr, "\r\n"...)
	f := &sseFramer{conn: conn, timeout: s.cfg.WriteTimeout}
	if err := f.write(hdr); err != nil {
		sub.Close()
		_ = conn.Close()
		return
	}
	s.newStreamConn(f, tenant, session, sub).start()
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
	conn    net.Conn
	timeout time.Duration // write deadlines use time.Now: they are wall-clock instants
	once    sync.Once
}

// frameBufs pools the slices of frames handed to writev.
var frameBufs = sync.Pool{New: func() any { b := make(net.Buffers, 0, maxBatch); return &b }}

func (f *sseFramer) writeEvents(evs []*messages.Encoded) error {
	bp := frameBufs.Get().(*net.Buffers)
	bufs := (*bp)[:0]
	for _, e := range evs {
		bufs = append(bufs, e.SSEFrame()) // built once per event, shared by every stream
	}
	keep := bufs
	_ = f.conn.SetWriteDeadline(time.Now().Add(f.timeout))
	_, err := bufs.WriteTo(f.conn) // one writev for the whole batch
	clear(keep)
	*bp = keep[:0]
	frameBufs.Put(bp)
	return err
}

func (f *sseFramer) write(b []byte) error {
	_ = f.conn.SetWriteDeadline(time.Now().Add(f.timeout))
	_, err := f.conn.Write(b)
	return err
}

// writeReplies is never called: SSE clients send nothing.
func (f *sseFramer) writeReplies([][]byte) error { return nil }

func (f *sseFramer) writePing() error { return f.write([]byte(": ping\n\n")) }

// streamClosed is the data of the final SSE frame.
type streamClosed struct {
	Reason string `json:"reason"`
}

func (f *sseFramer) writeFinal(reason error) error {
	data, _ := json.Marshal(streamClosed{Reason: reason.Error()})
	return f.write(append(append([]byte("event: stream_closed\ndata: "), data...), "\n\n"...))
}

func (f *sseFramer) close() error {
	var err error
	f.once.Do(func() { err = f.conn.Close() })
	return err
}

func (f *sseFramer) transport() string { return "sse" }
