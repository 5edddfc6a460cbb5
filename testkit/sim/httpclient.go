package sim

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/gorilla/websocket"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/messages"
)

// streamURL is the URL of a stream endpoint of the simulated server.
func streamURL(scheme, path string, after uint64) string {
	q := url.Values{"session_id": {string(session)}}
	if after > 0 {
		q.Set("after", strconv.FormatUint(after, 10))
	}
	return scheme + "://sim" + path + "?" + q.Encode()
}

// refused turns a stream request's error answer into an error; a 404 (no
// such session yet) wraps actors.ErrSessionNotFound, as a direct client's
// Subscribe returns it.
func refused(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	var body messages.ErrorBody
	_ = json.Unmarshal(b, &body)
	err := fmt.Errorf("%s: %s: %s", resp.Status, body.Error.Code, body.Error.Message)
	if resp.StatusCode == http.StatusNotFound {
		return fmt.Errorf("%w (%v)", actors.ErrSessionNotFound, err)
	}
	return err
}

// connectSSE opens GET /api/v1/events/stream, resuming with the
// Last-Event-ID header (header) or ?after=, and reads it on a goroutine.
func (c *client) connectSSE(ctx context.Context, f *front, after uint64, header, slow bool, pace time.Duration, stop, done chan struct{}) error {
	cursor := after
	if header {
		after = 0
	}
	cctx, cancel := context.WithCancel(ctx)
	req, err := http.NewRequestWithContext(cctx, http.MethodGet, streamURL("http", "/api/v1/events/stream", after), nil)
	if err != nil {
		cancel()
		return err
	}
	if header {
		req.Header.Set("Last-Event-ID", strconv.FormatUint(cursor, 10))
	}
	resp, err := f.client.Do(req)
	if err != nil {
		cancel()
		return err
	}
	if resp.StatusCode != http.StatusOK {
		defer cancel()
		defer resp.Body.Close()
		return refused(resp)
	}
	c.hang = cancel // the transport closes the connection: the reader's Read fails
	go func() {     // owned by c: disconnect waits for it
		defer close(done)
		defer resp.Body.Close()
		c.readSSE(resp.Body, slow, pace, stop)
	}()
	return nil
}

// readSSE parses SSE frames (docs/api.md: "id: <seq>", "event: <type>",
// "data: <envelope>", a blank line; ": ping" comments; "retry:"; a final
// "event: stream_closed" without id) until the stream ends or stop.
func (c *client) readSSE(body io.Reader, slow bool, pace time.Duration, stop <-chan struct{}) {
	br := bufio.NewReaderSize(body, 64<<10)
	var id, event string
	var data []byte
	for {
		line, err := br.ReadBytes('\n')
		if err != nil {
			return // the connection closed (the server's end, or disconnect)
		}
		line = bytes.TrimSuffix(line, []byte("\n"))
		switch {
		case len(line) == 0: // the end of a frame
			c.sseFrame(id, event, data)
			id, event, data = "", "", nil
			if slow && br.Buffered() == 0 && !pause(pace, stop) {
				return
			}
		case line[0] == ':': // a heartbeat comment
		default:
			name, value, _ := bytes.Cut(line, []byte(":"))
			value = bytes.TrimPrefix(value, []byte(" "))
			switch string(name) {
			case "id":
				id = string(value)
			case "event":
				event = string(value)
			case "data":
				data = append(data, value...)
			case "retry":
			default:
				c.misread("sse: unknown field %q", name)
			}
		}
	}
}

// sseFrame takes one complete frame.
func (c *client) sseFrame(id, event string, data []byte) {
	switch {
	case event == "" && data == nil: // "retry:" alone
	case event == "stream_closed":
		var r struct {
			Code string `json:"code"`
		}
		if err := json.Unmarshal(data, &r); err != nil || id != "" {
			c.misread("sse: stream_closed frame with id %q, data %q", id, data)
		}
		c.closedWith(r.Code)
	default:
		seq, err := strconv.ParseUint(id, 10, 64)
		if err != nil {
			c.misread("sse: %s frame with id %q", event, id)
			return
		}
		c.add(messages.NewEncoded(seq, messages.EventType(event), "", data))
	}
}

// connectWS opens GET /api/v1/events/ws?after= (gorilla's client over
// the same in-memory dialer) and reads it on a goroutine.
func (c *client) connectWS(ctx context.Context, f *front, after uint64, slow bool, pace time.Duration, stop, done chan struct{}) error {
	conn, resp, err := f.ws.DialContext(ctx, streamURL("ws", "/api/v1/events/ws", after), nil)
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			defer resp.Body.Close()
			return refused(resp)
		}
		return err
	}
	c.hang, c.wsc = func() { _ = conn.Close() }, conn
	go func() { // owned by c: disconnect waits for it
		defer close(done)
		c.readWS(conn, slow, pace, stop)
	}()
	return nil
}

// wsLine is what a WebSocket client reads of each NDJSON line: an
// envelope's seq and type, or a reply's reply_to.
type wsLine struct {
	Seq     uint64             `json:"seq"`
	Type    messages.EventType `json:"type"`
	ReplyTo string             `json:"reply_to"`
}

// readWS reads messages (NDJSON lines of envelopes) until the connection
// ends or stop; gorilla answers the server's pings as it reads.
func (c *client) readWS(conn *websocket.Conn, slow bool, pace time.Duration, stop <-chan struct{}) {
	for {
		_, msg, err := conn.ReadMessage()
		if err != nil {
			if ce := (*websocket.CloseError)(nil); errors.As(err, &ce) {
				c.closedWith(strconv.Itoa(ce.Code))
			}
			return
		}
		for line := range bytes.SplitSeq(msg, []byte("\n")) {
			var l wsLine
			if err := json.Unmarshal(line, &l); err != nil || l.ReplyTo == "" && (l.Seq == 0 || l.Type == "") {
				c.misread("ws: line %.80q: %v", line, err)
				continue
			}
			if l.ReplyTo != "" {
				continue
			}
			c.addWS(messages.NewEncoded(l.Seq, l.Type, "", line))
		}
		if slow && !pause(pace, stop) {
			return
		}
	}
}

// restart is a subscribe frame a WebSocket client sent: the server
// restarts its stream after seq after. Events of the old subscription
// that were already on their way still come (after+1 onwards); then the
// new one starts over at after+1 (or with a replay_truncated marker after
// after, if retention trimmed that far), repeating what the client got:
// each repeated event must have the bytes it had, and is dropped.
type restart struct {
	after uint64
	// upTo is the last seq received when the restart came (0: not yet).
	upTo uint64
}

// resubscribe sends {"type":"subscribe","after":cursor} on a WebSocket
// client's open connection (docs/api.md), instead of reconnecting. False
// if there is no connection, or an earlier restart is still awaited (or
// the frame could not be sent): the client then dials anew.
func (c *client) resubscribe() bool {
	if c.wsc == nil {
		return false
	}
	c.mu.Lock()
	if c.restart != nil {
		c.mu.Unlock()
		return false
	}
	c.restart = &restart{after: c.cursor}
	after := c.cursor
	c.mu.Unlock()
	b, _ := json.Marshal(messages.WSClientMessage{Type: messages.WSSubscribe, After: after})
	if c.wsc.WriteMessage(websocket.TextMessage, b) != nil {
		c.mu.Lock()
		c.restart = nil
		c.mu.Unlock()
		return false
	}
	return true
}

// addWS records an event a WebSocket client read, following a restart
// (see restart) if one is awaited.
func (c *client) addWS(e *messages.Encoded) {
	c.mu.Lock()
	r := c.restart
	if r == nil || len(c.got) == 0 || r.upTo == 0 && e.Seq > c.cursor {
		c.mu.Unlock()
		c.add(e) // no restart awaited, or the old stream goes on
		return
	}
	if r.upTo == 0 { // the restart: the stream starts over after r.after
		marker := e.Type == messages.ReplayTruncated
		if !marker && e.Seq != r.after+1 {
			c.restart = nil
			c.misreadLocked("ws: after subscribe{after:%d}, with seq %d received, the stream went on at seq %d", r.after, c.cursor, e.Seq)
			c.mu.Unlock()
			return
		}
		r.upTo = c.cursor
		c.restarts++
		if marker { // it stands for events the client has (or a repair lost): dropped
			c.mu.Unlock()
			return
		}
	}
	if e.Seq > r.upTo { // past what the client had (after a marker): new
		c.restart = nil
		c.mu.Unlock()
		c.add(e)
		return
	}
	defer c.mu.Unlock()
	if i := c.indexLocked(e.Seq); i < 0 || !bytes.Equal(c.got[i].JSON, e.JSON) {
		c.misreadLocked("ws: the restarted stream repeats seq %d with other bytes than the first time", e.Seq)
	}
	if e.Seq == r.upTo {
		c.restart = nil // caught up: the next event is new
	}
}

// indexLocked finds seq among the events received (a marker aside), from
// the end: a restart repeats the newest ones. Must be called with mu held.
func (c *client) indexLocked(seq uint64) int {
	for i := len(c.got) - 1; i >= 0; i-- {
		if c.got[i].Seq == seq && c.got[i].Type != messages.ReplayTruncated {
			return i
		}
		if c.got[i].Seq < seq {
			break
		}
	}
	return -1
}
