package transport

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/conclave-ai/conclave/messages"
)

// Private WebSocket close codes (RFC 6455 reserves 4000–4999 for
// applications). docs/api.md documents each.
const (
	// CloseBadFrame: a client frame was not valid JSON or not a JSON object.
	CloseBadFrame = 4000
	// CloseUnknownType: a client frame had a type other than "subscribe".
	CloseUnknownType = 4001
	// CloseCursorAhead: a subscribe asked for events after a seq the session does not have yet.
	CloseCursorAhead = 4002
	// CloseBinaryFrame: the client sent a binary frame; only text frames are accepted.
	CloseBinaryFrame = 4003
	// CloseSessionGone: the session's journal failed; the stream cannot continue.
	CloseSessionGone = 4004
	// CloseLagging: the client was more than the server's maximum lag
	// behind (Config.MaxLagEvents, MaxLagBytes); reconnect from the last seq.
	CloseLagging = 4005
)

// wsBufferPool lends write buffers to connections only while they write.
var wsBufferPool sync.Pool

func (s *Server) upgrader() *websocket.Upgrader {
	return &websocket.Upgrader{
		ReadBufferSize: 512, // client frames are small; bigger ones are refused by the read limit
		// One batch of events is one WebSocket message; gorilla flushes a
		// fragment each time its write buffer fills, so a 4 KB buffer (the
		// default) costs 2 syscalls for a typical 5-7 KB batch. Pooled, so an
		// idle stream holds none of it.
		WriteBufferSize: 64 << 10,
		WriteBufferPool: &wsBufferPool,
		CheckOrigin:     s.wsOriginAllowed,
		Error: func(w http.ResponseWriter, r *http.Request, status int, reason error) {
			code := codeBadRequest
			if status == http.StatusForbidden {
				code = "origin_not_allowed"
			}
			writeError(w, errorf(status, code, reason.Error()))
		},
	}
}

// http1Only answers 505 http_version_not_supported to a request that did
// not come over HTTP/1.x, whatever its method: a WebSocket stream starts
// with HTTP/1.1's Upgrade handshake and takes the connection over
// (gorilla/websocket hijacks it), which HTTP/2 and HTTP/3 have no way to
// do. WebSockets over HTTP/2 (RFC 8441's extended CONNECT, which Go's
// server only accepts with GODEBUG=http2xconnect=1) are not supported
// either. The SSE stream works over every version.
func http1Only(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor != 1 {
			writeError(w, errorf(http.StatusHTTPVersionNotSupported, codeHTTPVersion,
				"WebSocket streams need HTTP/1.1 (an Upgrade request), and this request came over "+r.Proto+
					"; connect over HTTP/1.1, or use the SSE stream (/api/v1/events/stream), which works over HTTP/2"))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// wsOriginAllowed: a browser page may open a WebSocket if its origin is
// listed, or is the server's own (sameOrigin).
func (s *Server) wsOriginAllowed(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	return s.originAllowed(origin) || s.sameOrigin(r, origin)
}

// wsStream: GET /api/v1/events/ws?session_id=...[&after=N]. Validation
// errors are JSON answers before the upgrade. After it, every server message
// is a text frame holding one or more envelopes, one JSON object per line
// (NDJSON), in seq order; the client may send {"type":"subscribe","after":N}
// to restart the stream after seq N.
func (s *Server) wsStream(w http.ResponseWriter, r *http.Request, tenant messages.TenantID) {
	if !websocket.IsWebSocketUpgrade(r) {
		writeError(w, errorf(http.StatusBadRequest, codeBadRequest, "this endpoint needs a WebSocket upgrade request"))
		return
	}
	if !s.wsOriginAllowed(r) { // checked before subscribing, so a refused origin costs nothing
		writeError(w, errorf(http.StatusForbidden, "origin_not_allowed", "origin "+r.Header.Get("Origin")+" is not allowed"))
		return
	}
	release, aerr := s.caps.acquire(tenant)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	sub, session, aerr := s.subscribe(r, tenant)
	if aerr != nil {
		release()
		writeError(w, aerr)
		return
	}
	conn, err := s.upgrader().Upgrade(w, r, nil)
	if err != nil { // the upgrader has answered
		sub.Close()
		release()
		return
	}
	// Validated: the request's deadlines no longer apply (wsRead sets the
	// pong deadline; writes have none: a slow reader is never cut).
	_ = conn.NetConn().SetDeadline(time.Time{})
	conn.SetReadLimit(s.cfg.WSReadLimit)
	f := &wsFramer{conn: conn, fl: newFlight(newSendQueue(conn.NetConn()))}
	c := s.newStreamConn(f, f.fl, release, tenant, session, sub)
	c.pingBusy = true
	pongWait := s.pongWait()
	c.alive = func() { _ = conn.SetReadDeadline(time.Now().Add(pongWait)) }
	c.start()
	if !s.writers.Go(func() { s.wsRead(c, f) }) {
		c.shutdown()
	}
}

// wsRead is the connection's reader: gorilla needs one to handle pings,
// pongs and close frames, and it takes the client's subscribe frames.
func (s *Server) wsRead(c *streamConn, f *wsFramer) {
	conn := f.conn
	pongWait := s.pongWait()
	// Socket deadlines are wall-clock instants: time.Now, not the injected
	// clock (which only drives event timestamps and heartbeat decisions).
	_ = conn.SetReadDeadline(time.Now().Add(pongWait))
	conn.SetPongHandler(func(string) error { return conn.SetReadDeadline(time.Now().Add(pongWait)) })
	for {
		typ, data, err := conn.ReadMessage()
		if err != nil {
			if errors.Is(err, websocket.ErrReadLimit) {
				f.closeWith(websocket.CloseMessageTooBig, fmt.Sprintf("frames are limited to %d bytes", s.cfg.WSReadLimit))
				c.setEnd(endProtocol)
			}
			c.end() // client gone, closed, or silent (no pong, and receiving nothing) for pongWait
			return
		}
		_ = conn.SetReadDeadline(time.Now().Add(pongWait))
		if typ != websocket.TextMessage {
			f.closeWith(CloseBinaryFrame, "only text frames are accepted")
			c.setEnd(endProtocol)
			c.end()
			return
		}
		if code, reason := s.wsCommand(c, data); code != 0 {
			f.closeWith(code, reason)
			c.setEnd(endProtocol)
			c.end()
			return
		}
	}
}

// pongWait is how long a WebSocket client may stay silent (no frame, no
// pong) while it also receives nothing: 2.5 heartbeats. A client that
// receives, however slowly, is alive (streamConn.alive).
func (s *Server) pongWait() time.Duration { return 2*s.cfg.Heartbeat + s.cfg.Heartbeat/2 }

// parseWSFrame decodes a client frame with messages.DecodeStrict: exactly
// one JSON object, no unknown fields, nothing after it, valid UTF-8.
func parseWSFrame(data []byte) (messages.WSClientMessage, error) {
	var m messages.WSClientMessage
	if t := bytes.TrimLeft(data, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return m, errors.New("a frame must be a JSON object")
	}
	err := messages.DecodeStrict(data, &m)
	return m, err
}

// wsCommand handles one client frame; a non-zero code closes the connection.
func (s *Server) wsCommand(c *streamConn, data []byte) (int, string) {
	m, err := parseWSFrame(data)
	if err != nil {
		return CloseBadFrame, truncateReason("bad frame: " + err.Error())
	}
	switch m.Type {
	case messages.WSSubscribe:
	case messages.WSResume:
		s.wsResume(c, &m)
		return 0, ""
	default:
		return CloseUnknownType, truncateReason(fmt.Sprintf("unknown message type %q", m.Type))
	}
	ctx, cancel := context.WithTimeout(c.ctx, engineTimeout)
	defer cancel()
	sub, err := s.engine.Subscribe(ctx, messages.Subscribe{Tenant: c.tenant, SessionID: c.session, After: m.After})
	if err != nil {
		aerr := engineError(err)
		if aerr.Code == codeCursorAhead {
			return CloseCursorAhead, truncateReason(err.Error())
		}
		return websocket.CloseInternalServerErr, truncateReason(err.Error())
	}
	c.resubscribe(sub)
	return 0, ""
}

// wsResume answers an interrupt from a resume frame; the outcome goes back
// as a reply line (the stream itself shows interrupt_resolved).
func (s *Server) wsResume(c *streamConn, m *messages.WSClientMessage) {
	res := m.Resume
	res.Tenant, res.InterruptID = c.tenant, m.InterruptID
	reply := messages.WSReply{ReplyTo: messages.WSResume, RequestID: m.RequestID, InterruptID: m.InterruptID, OK: true, Status: http.StatusOK}
	if info, err := s.engine.Resume(res); err != nil {
		aerr := resumeError(err)
		reply.OK, reply.Status = false, aerr.Status
		reply.Error = &messages.APIError{Code: aerr.Code, Message: aerr.Message}
	} else {
		reply.Status = resumedStatus(info)
	}
	b, _ := json.Marshal(reply)
	c.reply(b)
}

// truncateReason keeps a close reason within the 123 bytes a close frame allows.
func truncateReason(s string) string {
	if len(s) > 120 {
		return s[:120]
	}
	return s
}

// wsFramer writes NDJSON text frames with gorilla/websocket. Writes have
// no deadline: a slow reader is never cut (abort cuts a lagging one).
type wsFramer struct {
	conn *websocket.Conn
	fl   *flight
	once sync.Once
}

func (f *wsFramer) writeEvents(evs []*messages.Encoded) error {
	size := len(evs) - 1
	for _, e := range evs {
		size += len(e.JSON)
	}
	f.fl.begin(size, len(evs))
	w, err := f.conn.NextWriter(websocket.TextMessage)
	if err != nil {
		f.fl.done(0)
		return err
	}
	for i, e := range evs {
		if i > 0 {
			if _, err := w.Write([]byte{'\n'}); err != nil {
				f.fl.done(0)
				return err
			}
		}
		if _, err := w.Write(e.JSON); err != nil {
			f.fl.done(0)
			return err
		}
	}
	err = w.Close()
	if err == nil {
		f.fl.done(size)
	} else {
		f.fl.done(0)
	}
	return err
}

func (f *wsFramer) writeReplies(replies [][]byte) error {
	w, err := f.conn.NextWriter(websocket.TextMessage)
	if err != nil {
		return err
	}
	for i, b := range replies {
		if i > 0 {
			if _, err := w.Write([]byte{'\n'}); err != nil {
				return err
			}
		}
		if _, err := w.Write(b); err != nil {
			return err
		}
	}
	return w.Close()
}

// writePing: no deadline either; a ping queued behind events waits for them.
func (f *wsFramer) writePing() error {
	return f.conn.WriteControl(websocket.PingMessage, nil, time.Time{})
}

// abort makes the write under way fail (a deadline in the past on the
// socket). gorilla then refuses every later write, the close frame too:
// a client cut in the middle of a message gets no close code (1006).
func (f *wsFramer) abort() { _ = f.conn.NetConn().SetWriteDeadline(time.Unix(1, 0)) }

func (f *wsFramer) writeFinal(reason *CloseReason) error {
	code := websocket.CloseGoingAway
	switch reason.Code {
	case CloseCodeSessionGone:
		code = CloseSessionGone
	case CloseCodeLagging:
		code = CloseLagging
	}
	f.closeWith(code, truncateReason(reason.Message))
	return nil
}

// closeWith sends a close frame (safe from any goroutine), waiting at most
// finalWait for the connection to take it.
func (f *wsFramer) closeWith(code int, reason string) {
	_ = f.conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, reason), time.Now().Add(finalWait))
}

func (f *wsFramer) close() error {
	var err error
	f.once.Do(func() { err = f.conn.Close() })
	return err
}

func (f *wsFramer) transport() string { return "ws" }
