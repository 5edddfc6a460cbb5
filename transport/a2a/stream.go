package a2a

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"
)

// stream answers a streaming call (SendStreamingMessage, SubscribeToTask):
// an SSE response whose frames are JSON-RPC responses with the request's
// id. It folds f's events without sending them until ready holds (the
// cut), then sends the Task as it is at the cut, then the frames of every
// later event of the task, until a terminal or input-required state; then
// the response ends (spec §3.1.2).
//
// Frames are written by the request's goroutine only. Everything the
// events produce while the subscription has more ready is sent in one
// write, so a busy stream costs one write per batch, not per frame; the
// frames themselves are the projector's, identical for every stream.
func (c *call) stream(f *follower, ready func() bool) {
	sw := &sseWriter{w: c.w, rc: http.NewResponseController(c.w), id: c.id, timeout: c.h.cfg.WriteTimeout}
	c.streaming = true
	// The deadline is per connection: clear it for the next request on it.
	defer func() { _ = sw.rc.SetWriteDeadline(time.Time{}) }()
	if err := sw.begin(); err != nil {
		return
	}
	live := false
	var out []StreamResponse
	for {
		if !live && ready() {
			live = true
			out = append(out, StreamResponse{Task: f.proj.Task()})
			if f.proj.Final() {
				_ = sw.frames(out)
				return
			}
		}
		if len(f.pending) == 0 {
			if len(out) > 0 {
				if err := sw.frames(out); err != nil {
					return // the client is gone
				}
				clear(out)
				out = out[:0]
			}
			hb, cancel := context.WithTimeout(c.ctx, c.h.cfg.Heartbeat)
			err := f.fill(hb)
			cancel()
			if err != nil {
				if c.ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
					if sw.ping() != nil {
						return
					}
					continue
				}
				if c.ctx.Err() != nil && !errors.Is(context.Cause(c.ctx), errShutdown) {
					return // the client is gone
				}
				rerr := c.readError(err)
				c.h.cfg.Logger.Debug("a2a: stream ends with an error", "task", f.proj.taskID, "err", rerr.Message)
				_ = sw.fail(rerr)
				return
			}
			continue
		}
		frames, err := f.step()
		if err != nil {
			rerr := c.readError(err)
			c.h.cfg.Logger.Warn("a2a: undecodable event", "task", f.proj.taskID, "seq", f.last, "err", err)
			_ = sw.fail(rerr)
			return
		}
		if live {
			out = append(out, frames...)
			if f.proj.Final() {
				_ = sw.frames(out)
				return
			}
		}
	}
}

// sseWriter writes SSE frames (LF line endings, one data line each, as the
// reference server does).
type sseWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	id      json.RawMessage
	timeout time.Duration
	buf     []byte
}

func (s *sseWriter) begin() error {
	h := s.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	s.w.WriteHeader(http.StatusOK)
	return s.flush()
}

// frames writes frames as one batch.
func (s *sseWriter) frames(frames []StreamResponse) error {
	s.buf = s.buf[:0]
	for i := range frames {
		b, err := json.Marshal(rpcResponse{JSONRPC: "2.0", ID: s.id, Result: &frames[i]})
		if err != nil {
			return err
		}
		s.buf = append(s.buf, "data: "...)
		s.buf = append(s.buf, b...)
		s.buf = append(s.buf, "\n\n"...)
	}
	return s.write(s.buf)
}

// ping is a comment heartbeat; clients skip it.
func (s *sseWriter) ping() error { return s.write([]byte(": ping\n\n")) }

// fail ends the stream with a JSON-RPC error frame.
func (s *sseWriter) fail(e *RPCError) error {
	b, err := json.Marshal(rpcResponse{JSONRPC: "2.0", ID: s.id, Error: e})
	if err != nil {
		return err
	}
	return s.write(append(append([]byte("event: error\ndata: "), b...), "\n\n"...))
}

func (s *sseWriter) write(b []byte) error {
	// Wall-clock deadline on purpose: the socket's clock is the real one.
	_ = s.rc.SetWriteDeadline(time.Now().Add(s.timeout))
	if _, err := s.w.Write(b); err != nil {
		return err
	}
	return s.flush()
}

func (s *sseWriter) flush() error {
	if err := s.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	return nil
}
