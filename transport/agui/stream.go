package agui

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/actors/feed"
	"github.com/conclave-ai/conclave/messages"
)

// stream writes AG-UI events as SSE frames, "data: <json>\n\n" with LF
// line endings only, on the request's goroutine: it is the only writer of
// its connection.
type stream struct {
	h       *Handler
	w       http.ResponseWriter
	rc      *http.ResponseController
	started bool
	buf     []byte
	last    time.Time // of the last write
}

func (h *Handler) newStream(w http.ResponseWriter, _ *http.Request) *stream {
	return &stream{h: h, w: w, rc: http.NewResponseController(w)}
}

func (s *stream) begin() {
	if s.started {
		return
	}
	s.started = true
	hd := s.w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-cache")
	hd.Set("X-Accel-Buffering", "no")
	s.w.WriteHeader(http.StatusOK)
}

// write sends evs as one write and flushes.
func (s *stream) write(evs []Event) error {
	s.begin()
	if len(evs) == 0 {
		return nil
	}
	b := s.buf[:0]
	for _, e := range evs {
		j, err := json.Marshal(e)
		if err != nil { // cannot happen: events are plain structs and immutable payloads
			s.h.cfg.Logger.Error("agui: encode event", "type", e.EventType(), "err", err)
			continue
		}
		b = append(b, "data: "...)
		b = append(b, j...)
		b = append(b, "\n\n"...)
	}
	s.buf = b
	return s.flush(b)
}

func (s *stream) ping() error {
	s.begin()
	return s.flush([]byte(": ping\n\n"))
}

func (s *stream) flush(b []byte) error {
	s.last = s.h.cfg.Now()
	_ = s.rc.SetWriteDeadline(s.last.Add(s.h.cfg.WriteTimeout)) // unsupported in some test recorders; then unbounded
	if _, err := s.w.Write(b); err != nil {
		return err
	}
	return s.rc.Flush()
}

// segment streams one AG-UI run: a Conclave run from cursor on, until the
// run's terminal event, an interrupt outcome, or the client leaving.
type segment struct {
	h       *Handler
	st      *stream
	sub     *actors.Subscription
	tenant  messages.TenantID
	session messages.SessionID
	proj    *Projector
	cursor  uint64 // last seq consumed
	begin   BeginOptions

	// from is the suspension this AG-UI run resumes (nil for a new run):
	// where it ends is recorded there, for replays.
	from *suspension
	// replayTo, on a replay, is where the first stream of this resume
	// ended: this one ends there too, with the same interrupts.
	replayTo *suspension

	lastEvent    time.Time // of the last event of the run
	firstPending time.Time // when the oldest open interrupt was first seen (zero: none)
	nextCheck    time.Time // earliest time to check the interrupts again
}

// batchSize bounds the events read and written at once.
const batchSize = 256

func (g *segment) run(parent context.Context) {
	h := g.h
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	stopWatch := context.AfterFunc(h.stop, cancel)
	defer stopWatch()

	run := g.proj.RunID()
	g.begin.Time = h.cfg.Now()
	g.begin.Metadata = Metadata{"conclave": map[string]any{"runId": run, "sessionId": g.session, "after": g.cursor}}
	out := g.proj.Begin(nil, g.begin)
	if g.st.write(out) != nil {
		return
	}
	g.lastEvent = h.cfg.Now()
	var batch []*messages.Encoded
	for {
		if g.replayTo != nil && g.cursor >= g.replayTo.cursor {
			if g.endReplay() {
				return
			}
			g.replayTo = nil // nothing to repeat: carry on live
		}
		now := h.cfg.Now()
		wait := g.st.last.Add(h.cfg.Heartbeat).Sub(now)
		due, checking := g.due(now)
		if checking && due.Sub(now) < wait {
			wait = due.Sub(now)
		}
		if wait <= 0 {
			wait = time.Millisecond
		}
		cctx, ccancel := context.WithTimeout(ctx, wait)
		var err error
		batch, err = g.sub.Next(cctx, batch, batchSize)
		ccancel()
		if len(batch) > 0 {
			out = out[:0]
			for _, enc := range batch {
				if g.replayTo != nil && enc.Seq > g.replayTo.cursor {
					if g.st.write(out) != nil {
						return
					}
					out = out[:0]
					if g.endReplay() {
						return
					}
					g.replayTo = nil // nothing to repeat: carry on live
				}
				g.cursor = enc.Seq
				if enc.RunID != run {
					continue
				}
				env, derr := enc.Envelope()
				if derr != nil {
					h.cfg.Logger.Error("agui: decode event", "seq", enc.Seq, "err", derr)
					continue
				}
				out = g.proj.Apply(out, env)
				g.lastEvent = h.cfg.Now()
				if g.proj.Ended() {
					_ = g.st.write(out)
					g.finished()
					return
				}
			}
			if g.st.write(out) != nil {
				return
			}
			continue
		}
		switch {
		case ctx.Err() != nil:
			if h.stop.Err() != nil && parent.Err() == nil {
				_ = g.st.write(g.proj.Fail(nil, h.cfg.Now(), "shutting_down", "the server is shutting down; the run goes on"))
			}
			return // the client left
		case err == nil || errors.Is(err, context.DeadlineExceeded):
			now = h.cfg.Now()
			if due, checking := g.due(now); checking && !now.Before(due) && g.replayTo == nil {
				if g.suspend(now) {
					return
				}
			}
			if !now.Before(g.st.last.Add(h.cfg.Heartbeat)) && g.st.ping() != nil {
				return
			}
		case errors.Is(err, feed.ErrClosed):
			_ = g.st.write(g.proj.Fail(nil, h.cfg.Now(), "stream_closed", "the event stream closed before the run ended (the server is shutting down)"))
			return
		default:
			h.cfg.Logger.Error("agui: read events", "session", g.session, "run", run, "err", err)
			_ = g.st.write(g.proj.Fail(nil, h.cfg.Now(), "internal", "reading the run's events failed: "+err.Error()))
			return
		}
	}
}

// due says when the open interrupts should end the AG-UI run: once every
// agent is parked and the run has been quiet for Settle, or once the
// oldest open interrupt has waited MaxHold while other agents work.
func (g *segment) due(now time.Time) (time.Time, bool) {
	cfg := &g.h.cfg
	if len(g.proj.pending) == 0 {
		g.firstPending = time.Time{}
		return time.Time{}, false
	}
	if g.firstPending.IsZero() {
		g.firstPending = now
	}
	due := g.firstPending.Add(cfg.MaxHold)
	if g.proj.Blocked() {
		if d := g.lastEvent.Add(cfg.Settle); d.Before(due) {
			due = d
		}
	}
	if due.Before(g.nextCheck) {
		due = g.nextCheck
	}
	return due, true
}

// suspend ends the AG-UI run with the interrupt outcome if any open
// interrupt is still pending in the registry (one being answered through
// another channel will show up in the stream), and records where the run
// stopped so that a resume can continue it.
func (g *segment) suspend(now time.Time) bool {
	var ids []string
	expires := map[string]time.Time{}
	for _, pi := range g.proj.Pending() {
		if in, ok := g.h.engine.Interrupt(g.tenant, pi.ID); ok && in.Status == messages.InterruptPending {
			ids = append(ids, pi.ID)
			expires[pi.ID] = in.ExpiresAt
		}
	}
	if len(ids) == 0 {
		g.nextCheck = now.Add(g.h.cfg.Settle)
		return false
	}
	out := g.proj.Suspend(nil, now, ids, expires)
	s := &suspension{tenant: g.tenant, session: g.session, run: g.proj.RunID(), aguiRunID: g.begin.RunID,
		cursor: g.cursor, proj: g.proj, interrupts: ids, expires: expires}
	// Recorded before the client can see the outcome and resume.
	g.h.susp.add(s)
	if g.from != nil {
		g.h.susp.mu.Lock()
		g.from.next = s
		g.h.susp.mu.Unlock()
	}
	_ = g.st.write(out)
	return true
}

// endReplay ends a replayed AG-UI run where the original one ended.
func (g *segment) endReplay() bool {
	var ids []string
	for _, pi := range g.proj.Pending() {
		if slicesContains(g.replayTo.interrupts, pi.ID) {
			ids = append(ids, pi.ID)
		}
	}
	if len(ids) == 0 {
		return false
	}
	_ = g.st.write(g.proj.Suspend(nil, g.h.cfg.Now(), ids, g.replayTo.expires))
	return true
}

func (g *segment) finished() {
	if g.from != nil {
		g.h.susp.mu.Lock()
		g.from.finished = true
		g.h.susp.mu.Unlock()
	}
}
