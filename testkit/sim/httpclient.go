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
	c.hang = func() { _ = conn.Close() }
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
		var evs []*messages.Encoded
		for line := range bytes.SplitSeq(msg, []byte("\n")) {
			var l wsLine
			if err := json.Unmarshal(line, &l); err != nil || l.ReplyTo == "" && (l.Seq == 0 || l.Type == "") {
				c.misread("ws: line %.80q: %v", line, err)
				continue
			}
			if l.ReplyTo != "" {
				continue
			}
			evs = append(evs, messages.NewEncoded(l.Seq, l.Type, "", line))
		}
		c.add(evs...)
		if slow && !pause(pace, stop) {
			return
		}
	}
}
