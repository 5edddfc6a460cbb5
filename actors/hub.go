package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/conclave-ai/conclave/actors/feed"
	"github.com/conclave-ai/conclave/journal"
	"github.com/conclave-ai/conclave/messages"
)

// maxHubBatch bounds how many events the hub stamps before it flushes them,
// so a burst cannot grow its pending batch without limit.
const maxHubBatch = 4096

// hubShared is the hub's state that must survive a restart of the hub actor
// (protoactor builds a fresh actor instance on restart). Only the hub actor
// touches it, except head, which subscriptions read through Source.
type hubShared struct {
	tenant  messages.TenantID
	session messages.SessionID // as clients know it (envelopes)
	key     messages.SessionID // in the journal (sessions.go)
	journal journal.Journal
	newID   func() uuid.UUID // of replay markers: Config.MarkerID
	now     func() time.Time
	head    atomic.Uint64 // last seq acknowledged by the journal
	// lastActive (unix ns) and nsubs tell the engine actor whether the
	// hub is idle (sessions.go); written by the hub, read by the engine.
	lastActive atomic.Int64
	nsubs      atomic.Int32

	nextSeq uint64 // last seq stamped (>= head; the difference is pending)
	pending []*messages.Encoded
	// credits are the outbox credits of the pending events (and of events
	// dropped since the last flush): given back by the next flush, once
	// the journal has answered, so a producer waits for the journal.
	credits []chan struct{}
	// durables are the senders waiting for pending events (postDurable),
	// answered by the next flush.
	durables []chan<- error
	// barriers run after the next flush: everything sent to the hub
	// before them is journaled (or refused) by then (asleep.go).
	barriers   []func()
	subs       map[*feed.Subscription]struct{}
	terminated *recentRuns // runs whose terminal event was stamped lately
	failed     error       // set when the journal refused a batch
	dropped    int         // events dropped since failed: only the first is logged

	waitMu  sync.Mutex // guards waiters and waitErr; the engine actor adds waiters
	waiters map[messages.RunID]chan struct{}
	waitErr error // the journal failed: no start will be acknowledged
}

// touch records activity now.
func (h *hubShared) touch() { h.lastActive.Store(h.now().UnixNano()) }

// idleSince reports whether the hub has had no subscriber and no activity
// for at least after, at now.
func (h *hubShared) idleSince(now time.Time, after time.Duration) bool {
	return h.nsubs.Load() == 0 && now.UnixNano()-h.lastActive.Load() >= int64(after)
}

// ackOf returns a channel closed once the journal has acknowledged the
// first event of run (its run_started): StartRun answers only then, so an
// accepted run survives a crash. It is also closed when the journal fails;
// ackErr then says why.
func (h *hubShared) ackOf(run messages.RunID) <-chan struct{} {
	h.waitMu.Lock()
	defer h.waitMu.Unlock()
	ch := make(chan struct{})
	if h.waitErr != nil {
		close(ch)
		return ch
	}
	if h.waiters == nil {
		h.waiters = map[messages.RunID]chan struct{}{}
	}
	h.waiters[run] = ch
	return ch
}

// ackErr is the journal failure that closed the ack channels, if any.
func (h *hubShared) ackErr() error {
	h.waitMu.Lock()
	defer h.waitMu.Unlock()
	return h.waitErr
}

// fail records that the journal refused the session: nothing more is
// stamped (failed, read by the hub alone on its hot path, so unlocked), and
// every start waiting for an acknowledgement that will never come is
// released (waitErr, read by the engine actor too).
func (h *hubShared) fail(err error) {
	h.failed = err
	h.waitMu.Lock()
	defer h.waitMu.Unlock()
	h.waitErr = err
	for run, ch := range h.waiters {
		close(ch)
		delete(h.waiters, run)
	}
}

// acknowledged closes the waiters of the runs of an acknowledged batch.
func (h *hubShared) acknowledged(batch []*messages.Encoded) {
	h.waitMu.Lock()
	defer h.waitMu.Unlock()
	if len(h.waiters) == 0 {
		return
	}
	for _, enc := range batch {
		if ch, ok := h.waiters[enc.RunID]; ok {
			close(ch)
			delete(h.waiters, enc.RunID)
		}
	}
}

var _ feed.Source = (*hubShared)(nil)

// Head implements feed.Source.
func (h *hubShared) Head() uint64 { return h.head.Load() }

// ReadAfter implements feed.Source (feed.Replay).
func (h *hubShared) ReadAfter(ctx context.Context, after uint64, limit int) ([]*messages.Encoded, error) {
	return feed.Replay{Journal: h.journal, Key: h.key, Session: h.session, NewID: h.newID, Now: h.now}.ReadAfter(ctx, h.Head(), after, limit)
}

// Messages only the engine sends to a hub.
type (
	hubSubscribe   struct{ sub *feed.Subscription }
	hubUnsubscribe struct{ sub *feed.Subscription }
	hubFlush       struct{}
	// hubBarrier runs then once every event sent to the hub before it has
	// been journaled (or refused): at once if none is pending.
	hubBarrier struct{ then func() }
)

// hubActor numbers, journals and fans out the events of one session. It is
// the only writer of its session, so seq needs no lock: it is assigned in
// mailbox order, and events of one sender keep their order.
//
// Batching: the first event after a flush sends the hub a hubFlush message,
// which queues behind every event already in the mailbox; the flush then
// appends all of them to the journal at once, publishes the new head and
// offers the batch to each subscriber (never blocking: see actors/feed).
type hubActor struct {
	e *Engine
	s *hubShared
}

func (h *hubActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		if len(h.s.pending) > 0 { // restarted with a batch in hand
			ctx.Send(ctx.Self(), &hubFlush{})
		}
	case *messages.Emit:
		h.stamp(ctx, m)
	case *durableEmit:
		if !h.stamp(ctx, &m.Emit) {
			m.done <- errEventDropped
			return
		}
		h.s.durables = append(h.s.durables, m.done)
	case *creditedEmit:
		h.s.credits = append(h.s.credits, m.credit)
		if !h.stamp(ctx, &m.Emit) && len(h.s.pending) == 0 {
			h.releaseCredits() // dropped, and no flush is coming to give it back
		}
	case *hubFlush:
		h.flush()
	case *hubBarrier:
		if len(h.s.pending) == 0 {
			m.then()
			return
		}
		h.s.barriers = append(h.s.barriers, m.then)
	case *hubSubscribe:
		if h.s.failed != nil {
			m.sub.Close(h.s.failed)
			return
		}
		h.s.subs[m.sub] = struct{}{}
		h.s.nsubs.Store(int32(len(h.s.subs)))
		h.s.touch()
		m.sub.Attached()
	case *hubUnsubscribe:
		delete(h.s.subs, m.sub)
		h.s.nsubs.Store(int32(len(h.s.subs)))
		h.s.touch()
	case *hubIdleStop:
		if len(h.s.subs) > 0 || len(h.s.pending) > 0 {
			ctx.Request(ctx.Parent(), &hubStayedMsg{}) // Request: the engine identifies the hub by Sender()
			return
		}
		ctx.Stop(ctx.Self())
	case *actor.Stopping:
		h.flush()
		for sub := range h.s.subs {
			sub.Close(nil) // delivers everything up to the head, then ErrClosed
		}
		clear(h.s.subs)
		h.s.nsubs.Store(0)
	}
}

// load reads the session's head from the journal, before the hub actor
// starts (sessions.go): a subscription checked against the head at once
// (ErrCursorAhead) must see it. journal.Head is an in-memory lookup.
func (h *hubShared) load(log *slog.Logger) {
	head, err := h.journal.Head(context.Background(), h.key)
	if err != nil {
		log.Error("hub: read journal head", "session", h.session, "err", err)
		h.fail(err)
	}
	h.head.Store(head)
	h.nextSeq = head
}

// stamp numbers m and queues it for the next flush; false if it was dropped.
func (h *hubActor) stamp(ctx actor.Context, m *messages.Emit) bool {
	log := h.e.cfg.Logger
	if h.s.terminated.has(m.RunID) {
		// Cannot happen while actors follow the protocol (a run supervisor
		// emits its terminal event only after all its agents stopped); kept
		// as a guard so a terminal event is always the last of its run.
		log.Error("hub: event after the run's terminal event dropped", "run", m.RunID, "type", m.Payload.EventType())
		return false
	}
	if h.s.failed != nil {
		// Once per session: a run still streaming would log every token
		// (hundreds of lines a second) until the server stops.
		if h.s.dropped == 0 {
			log.Error("hub: journal failed; events not recorded (this session's further drops are not logged)",
				"run", m.RunID, "type", m.Payload.EventType(), "err", h.s.failed)
		}
		h.s.dropped++
		if m.Payload.EventType().Terminal() {
			h.endUnrecorded(m.RunID, m.Payload.EventType())
		}
		return false
	}
	env := m.Stamp(h.e.cfg.NewID(), h.s.nextSeq+1, h.e.cfg.Now(), h.s.session)
	enc, err := messages.Encode(env)
	if err != nil {
		log.Error("hub: encode event", "run", m.RunID, "type", env.Type, "err", err)
		return false
	}
	if b, masked := h.e.redact.Bytes(enc.JSON); masked {
		// A secret (Config.Secrets) never reaches the journal or a
		// stream; the masked JSON is decoded again where needed.
		enc = messages.NewEncoded(enc.Seq, enc.Type, enc.RunID, b)
		log.Warn("hub: a secret was masked in an event", "run", m.RunID, "type", env.Type, "seq", env.Seq)
	}
	h.s.nextSeq++
	h.s.pending = append(h.s.pending, enc)
	if env.Type.Terminal() {
		h.s.terminated.add(m.RunID)
	}
	switch len(h.s.pending) {
	case 1:
		h.s.touch()
		ctx.Send(ctx.Self(), &hubFlush{})
	case maxHubBatch:
		h.flush()
	}
	return true
}

// releaseCredits gives the credits of the events handled so far back to
// their outboxes.
func (h *hubActor) releaseCredits() {
	for i, c := range h.s.credits {
		<-c
		h.s.credits[i] = nil
	}
	h.s.credits = h.s.credits[:0]
}

// errEventDropped answers a durable event the hub could not record.
var errEventDropped = errors.New("actors: the event was not recorded (the journal failed, or its run has ended)")

// answerDurables tells the senders waiting for the events flushed so far
// how it went.
func (h *hubActor) answerDurables(err error) {
	for i, d := range h.s.durables {
		d <- err
		h.s.durables[i] = nil
	}
	h.s.durables = h.s.durables[:0]
}

// runBarriers runs the barriers waiting for the events flushed so far,
// once the journal and the run index have them (or the journal refused
// them).
func (h *hubActor) runBarriers() {
	for i, then := range h.s.barriers {
		then()
		h.s.barriers[i] = nil
	}
	h.s.barriers = h.s.barriers[:0]
}

func (h *hubActor) flush() {
	defer h.releaseCredits() // journaled, or refused and dropped: either way the producers may go on
	batch := h.s.pending
	if len(batch) == 0 {
		return
	}
	if err := h.s.journal.Append(context.Background(), h.s.key, batch); err != nil {
		h.answerDurables(err)
		h.runBarriers()
		h.e.cfg.Logger.Error("hub: journal append failed; closing subscribers", "session", h.s.session, "events", len(batch), "err", err)
		h.s.fail(err)
		for _, enc := range batch {
			if enc.Type.Terminal() {
				h.endUnrecorded(enc.RunID, enc.Type)
			}
		}
		h.s.pending = nil
		for sub := range h.s.subs {
			sub.Close(err)
		}
		clear(h.s.subs)
		h.s.nsubs.Store(0)
		return
	}
	envs := make([]*messages.Envelope, 0, len(batch))
	for _, enc := range batch {
		if env, err := enc.Envelope(); err == nil { // encoded here, so always decoded
			envs = append(envs, env)
		}
	}
	h.audit(envs)
	if t := h.e.cfg.Tracer; t != nil {
		t.Observe(h.s.tenant, envs)
	}
	for _, o := range h.e.cfg.Observers {
		o.Observe(h.s.tenant, envs)
	}
	h.e.interrupts.Journaled(envs) // listed from now on: a crash no longer loses them
	h.s.head.Store(batch[len(batch)-1].Seq)
	h.s.touch()
	h.s.acknowledged(batch)
	h.answerDurables(nil)
	h.e.published.Add(uint64(len(batch)))
	for _, env := range envs {
		if final, ended := h.e.index.Apply(h.s.tenant, env); ended {
			h.e.summaries.ended(env.RunID, final)
		}
	}
	h.runBarriers() // after the run index: a run falling asleep is read back up to its last seq there
	for sub := range h.s.subs {
		sub.Offer(batch)
	}
	// Subscribers and the journal keep the events, not the slice, so its
	// backing array can be reused, once cleared: stale pointers in it would
	// keep up to maxHubBatch old events alive per session.
	clear(batch)
	h.s.pending = batch[:0]
}

// endUnrecorded ends in the run index a run whose terminal event (of type
// typ) the failed journal did not take: its supervisor has ended it, so
// the index must not go on listing it as live. If another process fenced
// the session (cluster mode), that process adopts the run from the journal
// and lists it: it leaves this index. Otherwise it is listed failed here
// (code internal, with the journal's error), and the journal, which holds
// it as live, has it recovered at the next start.
func (h *hubActor) endUnrecorded(run messages.RunID, typ messages.EventType) {
	if errors.Is(h.s.failed, journal.ErrFenced) {
		h.e.index.Remove(run)
		return
	}
	sum, ok := h.e.index.Get(h.s.tenant, run)
	if !ok || sum.Status.Terminal() {
		return
	}
	h.e.index.Apply(h.s.tenant, &messages.Envelope{
		Seq: sum.LastSeq, Timestamp: h.e.cfg.Now(), SessionID: h.s.session, RunID: run, Type: messages.RunError,
		Payload: &messages.RunErrorPayload{Code: messages.ErrCodeInternal, Usage: sum.Usage, Nodes: sum.Nodes,
			Message: fmt.Sprintf("the journal failed; the run's %s was not recorded: %v", typ, h.s.failed)},
	})
}

// auditTimeout bounds how long a flush waits for the audit log.
const auditTimeout = 30 * time.Second

// audit hands a journaled batch to the audit log (Config.Audit), which
// records the decisions among its events durably before the batch is
// acknowledged to anyone: the one place every decision passes through.
// A failure is logged; the events are journaled already and stay so.
func (h *hubActor) audit(envs []*messages.Envelope) {
	if h.e.cfg.Audit == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), auditTimeout)
	defer cancel()
	if err := h.e.cfg.Audit.Record(ctx, h.s.tenant, h.s.key, envs); err != nil {
		h.e.cfg.Logger.Error("hub: audit log append failed: decisions of this batch are not in the audit log",
			"session", h.s.session, "first_seq", envs[0].Seq, "err", err)
	}
}
