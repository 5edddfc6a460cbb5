package journal

// JetStream: the journal and run catalogue on a NATS JetStream stream, for
// `conclave serve --cluster`, where every node must read what any node
// appended and a node's death must lose nothing it acknowledged.
//
// Layout. One stream captures Prefix+".>". Session and run ids become
// subject tokens in unpadded base64url (any byte is allowed in an id; a
// token is never empty: "" is "-").
//
//	<p>.ev.<session>            events: one message per Append (more if the batch
//	                            exceeds the server's max payload); headers
//	                            Conclave-First/-Last (seqs), Conclave-Crc (CRC-32C
//	                            of the body), Conclave-Append (the Append's id,
//	                            on its last message); body: per event
//	                            uvarint-prefixed type, run id, JSON. The seqs
//	                            run First..Last.
//	<p>.first.<session>         the trim mark (rollup: only the last is kept)
//	<p>.run.<run>               a run's start: session, first seq. Its stream seq
//	                            orders ListRuns.
//	<p>.scope.<scope>.<run>     the same, for ListRuns(scope)
//	<p>.live.<session>.<run>    a live run (purged once its end is stored)
//	<p>.end.<run>               a run's end: last seq
//	<p>.sum.<run>               its summary (rollup)
//
// Atomicity. An Append is one JetStream message, or an atomic batch
// (Nats-Batch-Id, ADR-50) when the batch needs several messages or changes
// the catalogue: every message of it is stored, or none is.
//
// Fencing. Every Append carries Nats-Expected-Last-Subject-Sequence: the
// stream seq of the session's last message as this process last wrote or
// read it. If any other process appended to the session since, the server
// refuses the whole batch and Append returns ErrFenced: a stale owner
// cannot interleave its events with the new owner's.
//
// Retries. A publish whose answer is lost is sent again with the same
// Nats-Msg-Id. If the first send was stored, the server refuses the repeat
// (as a duplicate, or for a single message as a wrong last sequence: it
// checks that before the id); Append then reads the session's last message,
// and the append succeeded if that message carries its Conclave-Append id
// (ErrFenced if another process appended after it).
//
// Acknowledgement. An event is acknowledged when JetStream acknowledged its
// message: stored on a majority of the stream's replicas. JetStream writes
// to the OS and fsyncs on its own schedule (the server's sync_interval, or
// every write with sync_always), so with one replica a machine crash can
// lose acknowledged events that a process crash cannot; three replicas
// survive the loss of one machine.
//
// Reads go to the stream leader (no direct gets: a follower may lag), so a
// process reads every event acknowledged to any process.

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/conclave-ai/conclave/internal/retry"
	"github.com/conclave-ai/conclave/messages"
)

// ErrFenced is returned by JetStream.Append when another process appended
// to the session since this one last did: this process no longer owns it.
var ErrFenced = errors.New("journal: session written by another owner")

// JetStreamOptions configures OpenJetStream.
type JetStreamOptions struct {
	// Stream names the JetStream stream. Default "CONCLAVE".
	Stream string
	// Prefix is the subject prefix; the stream captures Prefix+".>".
	// Default "conclave".
	Prefix string
	// Replicas is the stream's replica count (1 to 5); 3 on a 3-server
	// cluster survives the loss of one server. Default 1. An existing
	// stream is updated to it.
	Replicas int
	// Timeout bounds each request to the server that the caller's context
	// does not bound sooner. Default 5 s.
	Timeout time.Duration
	// StartTimeout is how long OpenJetStream tries to create or update the
	// stream, with backoff, while JetStream does not answer or fails (it
	// is starting, or electing a leader, or several nodes create the
	// stream at once). Default 0: one attempt.
	StartTimeout time.Duration
	// Logger logs what OpenJetStream waits for. Default slog.Default().
	Logger *slog.Logger
}

const (
	hdrFirst = "Conclave-First"
	hdrLast  = "Conclave-Last"
	hdrCrc   = "Conclave-Crc"
	// hdrAppend identifies an Append on its last events message, so that
	// a retried append can tell whether its batch was stored.
	hdrAppend = "Conclave-Append"
	// jsHeaderRoom is what a message's headers may take of the payload.
	jsHeaderRoom = 1024
	// jsCacheMax bounds the per-session caches (they are dropped whole).
	jsCacheMax = 1 << 16
)

// JetStream is a Journal and Catalog on a JetStream stream. See the
// comment at the top of jetstream.go for its layout and guarantees.
type JetStream struct {
	nc     *nats.Conn
	js     jetstream.JetStream
	st     jetstream.Stream
	opts   JetStreamOptions
	maxMsg int // largest events body
	closed atomic.Bool

	mu    sync.Mutex
	tails map[messages.SessionID]jsTail // the last message this process wrote or read
}

// jsTail is a session's last message: its stream seq and the session's head.
type jsTail struct {
	msgSeq uint64 // 0: the session has no message
	head   uint64
}

// OpenJetStream opens (creating or updating) the journal's stream on the
// server nc is connected to. nc stays the caller's: Close does not close it.
func OpenJetStream(ctx context.Context, nc *nats.Conn, opts JetStreamOptions) (*JetStream, error) {
	if opts.Stream == "" {
		opts.Stream = "CONCLAVE"
	}
	if opts.Prefix == "" {
		opts.Prefix = "conclave"
	}
	if opts.Replicas == 0 {
		opts.Replicas = 1
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 5 * time.Second
	}
	if opts.Replicas < 1 || opts.Replicas > 5 {
		return nil, fmt.Errorf("journal: jetstream: replicas %d: want 1 to 5", opts.Replicas)
	}
	if strings.ContainsAny(opts.Prefix, " *>\t") || strings.HasPrefix(opts.Prefix, ".") || strings.HasSuffix(opts.Prefix, ".") {
		return nil, fmt.Errorf("journal: jetstream: prefix %q is not a subject prefix", opts.Prefix)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("journal: jetstream: %w", err)
	}
	cfg := jetstream.StreamConfig{
		Name:               opts.Stream,
		Subjects:           []string{opts.Prefix + ".>"},
		Storage:            jetstream.FileStorage,
		Replicas:           opts.Replicas,
		Retention:          jetstream.LimitsPolicy,
		Discard:            jetstream.DiscardNew, // never drop events to make room
		AllowRollup:        true,                 // trim marks and summaries
		AllowAtomicPublish: true,                 // batches that span messages
		DenyDelete:         true,                 // events are only ever purged by Trim
		// Message ids are remembered this long: longer than publish
		// retries for (jsRetryBudget), no longer (each costs memory).
		Duplicates: 30 * time.Second,
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	var st jetstream.Stream
	err = retry.Until(ctx, time.Now().Add(opts.StartTimeout), opts.Logger, "the journal's stream "+opts.Stream, func(ctx context.Context) error {
		cctx, cancel := context.WithTimeout(ctx, opts.Timeout)
		defer cancel()
		st, err = js.CreateOrUpdateStream(cctx, cfg)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("journal: jetstream: stream %s: %w", opts.Stream, err)
	}
	max := int(nc.MaxPayload()) - jsHeaderRoom
	if max < 4096 {
		return nil, fmt.Errorf("journal: jetstream: the server's max payload (%d bytes) is too small", nc.MaxPayload())
	}
	return &JetStream{nc: nc, js: js, st: st, opts: opts, maxMsg: max, tails: make(map[messages.SessionID]jsTail)}, nil
}

// SubjectToken turns an id into a NATS subject token (and key-value key
// part): unpadded base64url, "-" for "".
func SubjectToken(id string) string {
	if id == "" {
		return "-"
	}
	return base64.RawURLEncoding.EncodeToString([]byte(id))
}

// SubjectUntoken reverses SubjectToken.
func SubjectUntoken(t string) (string, error) {
	if t == "-" {
		return "", nil
	}
	b, err := base64.RawURLEncoding.DecodeString(t)
	return string(b), err
}

func (j *JetStream) subject(kind string, ids ...string) string {
	var b strings.Builder
	b.WriteString(j.opts.Prefix)
	b.WriteByte('.')
	b.WriteString(kind)
	for _, id := range ids {
		b.WriteByte('.')
		b.WriteString(SubjectToken(id))
	}
	return b.String()
}

func (j *JetStream) evSubject(s messages.SessionID) string { return j.subject("ev", string(s)) }

// ctx bounds a request by the journal's timeout.
func (j *JetStream) ctx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, j.opts.Timeout)
}

func (j *JetStream) check(ctx context.Context) error {
	if j.closed.Load() {
		return ErrClosed
	}
	return ctx.Err()
}

// Close implements Journal. It does not close the connection.
func (j *JetStream) Close() error {
	j.closed.Store(true)
	return nil
}

// get reads one message: the last on subject (last) or the first at or
// after stream seq from on subject (next). A missing message is nil, nil.
func (j *JetStream) get(ctx context.Context, req func() jetstream.GetMsgOpt, last string, from uint64) (*jetstream.RawStreamMsg, error) {
	ctx, cancel := j.ctx(ctx)
	defer cancel()
	var m *jetstream.RawStreamMsg
	var err error
	if req == nil {
		m, err = j.st.GetLastMsgForSubject(ctx, last)
	} else {
		m, err = j.st.GetMsg(ctx, from, req())
	}
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("journal: jetstream: read: %w", err)
	}
	return m, nil
}

func (j *JetStream) last(ctx context.Context, subject string) (*jetstream.RawStreamMsg, error) {
	return j.get(ctx, nil, subject, 0)
}

// next reads the first message on subject (wildcards allowed) at or after
// stream seq from (1 if from is 0).
func (j *JetStream) next(ctx context.Context, subject string, from uint64) (*jetstream.RawStreamMsg, error) {
	return j.get(ctx, func() jetstream.GetMsgOpt { return jetstream.WithGetMsgSubject(subject) }, "", max(from, 1))
}

// msgSpan reads an events message's seqs. Messages without events (none is
// written today) have last = first-1.
func msgSpan(m *jetstream.RawStreamMsg) (first, last uint64, err error) {
	first, err1 := strconv.ParseUint(m.Header.Get(hdrFirst), 10, 64)
	last, err2 := strconv.ParseUint(m.Header.Get(hdrLast), 10, 64)
	if err1 != nil || err2 != nil || first == 0 || last+1 < first {
		return 0, 0, fmt.Errorf("stream seq %d: bad seq headers %q..%q", m.Sequence, m.Header.Get(hdrFirst), m.Header.Get(hdrLast))
	}
	return first, last, nil
}

// tail returns the session's last message, as cached or read.
func (j *JetStream) tail(ctx context.Context, s messages.SessionID) (jsTail, error) {
	j.mu.Lock()
	t, ok := j.tails[s]
	j.mu.Unlock()
	if ok {
		return t, nil
	}
	return j.readTail(ctx, s)
}

// readTail reads the session's last message from the server.
func (j *JetStream) readTail(ctx context.Context, s messages.SessionID) (jsTail, error) {
	m, err := j.last(ctx, j.evSubject(s))
	if err != nil || m == nil {
		return jsTail{}, err
	}
	_, last, err := msgSpan(m)
	if err != nil {
		return jsTail{}, j.corrupt(s, 0, 0, err.Error())
	}
	return jsTail{msgSeq: m.Sequence, head: last}, nil
}

// appended reads the session's last message and reports whether it is
// the last message of the append whose Conclave-Append header is id.
func (j *JetStream) appended(ctx context.Context, s messages.SessionID, id string) (jsTail, bool, error) {
	m, err := j.last(ctx, j.evSubject(s))
	if err != nil || m == nil {
		return jsTail{}, false, err
	}
	_, last, err := msgSpan(m)
	if err != nil {
		return jsTail{}, false, j.corrupt(s, 0, 0, err.Error())
	}
	return jsTail{msgSeq: m.Sequence, head: last}, m.Header.Get(hdrAppend) == id, nil
}

func (j *JetStream) setTail(s messages.SessionID, t jsTail, ok bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if !ok {
		delete(j.tails, s)
		return
	}
	if len(j.tails) >= jsCacheMax {
		clear(j.tails)
	}
	j.tails[s] = t
}

func (j *JetStream) corrupt(s messages.SessionID, seq, lastIntact uint64, detail string) error {
	return &CorruptError{Session: s, Seq: seq, LastIntact: lastIntact, Detail: "jetstream: " + detail}
}

// Append implements Journal.
func (j *JetStream) Append(ctx context.Context, s messages.SessionID, events []*messages.Encoded) error {
	if err := j.check(ctx); err != nil {
		return err
	}
	if len(events) == 0 {
		return nil
	}
	t, err := j.tail(ctx, s)
	if err != nil {
		return err
	}
	for i, e := range events {
		if e.Seq != t.head+uint64(i)+1 {
			return &SeqError{Session: s, Head: t.head, Got: e.Seq, Position: i}
		}
	}
	msgs := j.eventMsgs(s, events)
	msgs[0].Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(t.msgSeq, 10))
	id := uuid.NewString()
	msgs[len(msgs)-1].Header.Set(hdrAppend, id)
	cat, ended, err := j.catalogMsgs(ctx, s, events)
	if err != nil {
		return err
	}
	var ack uint64
	deadline, backoff := time.Now().Add(jsRetryBudget), 50*time.Millisecond
	for {
		ack, err = j.publish(ctx, append(msgs, cat...))
		if !errors.Is(err, errDuplicate) && !errors.Is(err, ErrFenced) {
			break
		}
		// An attempt whose answer was lost may have stored the batch: its
		// repeat is then refused as a duplicate, or, when it is a single
		// message, as fenced (the server checks the expected last subject
		// sequence before the message id). It is stored if the session's
		// last message is this append's last.
		last, mine, rerr := j.appended(ctx, s, id)
		switch {
		case rerr != nil:
			err = fmt.Errorf("%w (and reading whether it was stored: %w)", err, rerr)
		case mine:
			j.setTail(s, last, true)
			ack, err = last.msgSeq+uint64(len(cat)), nil
		case errors.Is(err, errDuplicate):
			// Stored, and another process appended after it: it took the
			// session over.
			err = fmt.Errorf("%w (this batch was stored, and the session written after it)", ErrFenced)
		case last == t && ctx.Err() == nil && time.Now().Add(backoff).Before(deadline):
			// Refused as fenced, yet the session's last message is the one
			// this process expected: no other process wrote. A stream
			// leader elected a moment ago refuses so until it has applied
			// its log (TestEngines_StreamLeaderKillRunsEndOnce): send it
			// again.
			select {
			case <-ctx.Done():
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, time.Second)
			continue
		default:
			// Say what was expected and what is there: a refusal no other
			// process explains is then visible in the log.
			err = fmt.Errorf("%w; expected the session's last message at stream seq %d (events to %d), it is at %d (events to %d)",
				err, t.msgSeq, t.head, last.msgSeq, last.head)
		}
		break
	}
	if err != nil {
		j.setTail(s, jsTail{}, false) // the batch may or may not be stored: read again
		return err
	}
	j.setTail(s, jsTail{msgSeq: ack - uint64(len(cat)), head: events[len(events)-1].Seq}, true)
	for _, live := range ended {
		// Best effort: LiveRuns skips a live marker whose run has an end.
		pctx, cancel := j.ctx(context.WithoutCancel(ctx))
		_ = j.st.Purge(pctx, jetstream.WithPurgeSubject(live))
		cancel()
	}
	return nil
}

// Fence makes every process that appended to the session before this call
// fail its next Append with ErrFenced, and returns the session's head: a
// new owner calls it before it reads the session to take it over. It
// appends a message without events (First = head+1, Last = head), which
// readers skip.
func (j *JetStream) Fence(ctx context.Context, s messages.SessionID) (uint64, error) {
	if err := j.check(ctx); err != nil {
		return 0, err
	}
	for range 8 {
		t, err := j.readTail(ctx, s)
		if err != nil {
			return 0, err
		}
		m := nats.NewMsg(j.evSubject(s))
		m.Header.Set(hdrFirst, strconv.FormatUint(t.head+1, 10))
		m.Header.Set(hdrLast, strconv.FormatUint(t.head, 10))
		m.Header.Set(hdrCrc, "0") // CRC-32C of an empty body
		m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(t.msgSeq, 10))
		seq, err := j.publish(ctx, []*nats.Msg{m})
		if errors.Is(err, ErrFenced) || errors.Is(err, errDuplicate) {
			continue // the old owner wrote meanwhile (or our retry landed): fence after that
		}
		if err != nil {
			return 0, err
		}
		j.setTail(s, jsTail{msgSeq: seq, head: t.head}, true)
		return t.head, nil
	}
	return 0, fmt.Errorf("journal: jetstream: fence session %s: another process keeps appending", s)
}

// eventMsgs encodes a batch into messages of at most maxMsg bytes each.
func (j *JetStream) eventMsgs(s messages.SessionID, events []*messages.Encoded) []*nats.Msg {
	subj := j.evSubject(s)
	var out []*nats.Msg
	var body []byte
	first := events[0].Seq
	flush := func(last uint64) {
		m := nats.NewMsg(subj)
		m.Header.Set(hdrFirst, strconv.FormatUint(first, 10))
		m.Header.Set(hdrLast, strconv.FormatUint(last, 10))
		m.Header.Set(hdrCrc, strconv.FormatUint(uint64(crc32.Checksum(body, castagnoli)), 16))
		m.Data = body
		out = append(out, m)
		body, first = nil, last+1
	}
	for i, e := range events {
		n := uvarintLen(len(e.Type)) + len(e.Type) + uvarintLen(len(e.RunID)) + len(e.RunID) + uvarintLen(len(e.JSON)) + len(e.JSON)
		if len(body) > 0 && len(body)+n > j.maxMsg {
			flush(events[i-1].Seq)
		}
		body = appendUvarintBytes(body, string(e.Type))
		body = appendUvarintBytes(body, string(e.RunID))
		body = binary.AppendUvarint(body, uint64(len(e.JSON)))
		body = append(body, e.JSON...)
	}
	flush(events[len(events)-1].Seq)
	return out
}

// decodeEvents decodes an events message, verifying its checksum.
func decodeEvents(hdr nats.Header, data []byte, first, last uint64) ([]*messages.Encoded, error) {
	sum, err := strconv.ParseUint(hdr.Get(hdrCrc), 16, 32)
	if err != nil || uint32(sum) != crc32.Checksum(data, castagnoli) {
		return nil, errChecksum
	}
	out := make([]*messages.Encoded, 0, last+1-first)
	body := data
	for seq := first; seq <= last; seq++ {
		var typ, run, data []byte
		var ok bool
		if typ, body, ok = cutUvarintBytes(body); !ok {
			return nil, errBadRecord
		}
		if run, body, ok = cutUvarintBytes(body); !ok {
			return nil, errBadRecord
		}
		if data, body, ok = cutUvarintBytes(body); !ok {
			return nil, errBadRecord
		}
		out = append(out, &messages.Encoded{Seq: seq, Type: messages.EventType(typ), RunID: messages.RunID(run), JSON: data})
	}
	if len(body) != 0 {
		return nil, errBadRecord
	}
	return out, nil
}

// Tail calls fn, from one goroutine at a time, with the events of each
// message appended to session s after this call, in order (a JetStream
// ordered consumer: it re-creates itself after a reconnect or a leader
// change). It returns the session's head at the start: the first events
// fn gets follow it. A message that fails its checksum is skipped (a
// reader of the journal then finds its events missing and reports them).
// stop ends the tail; fn is not called after stop returns (unless the
// connection closed and the drain gave up after the journal's Timeout).
func (j *JetStream) Tail(ctx context.Context, s messages.SessionID, fn func([]*messages.Encoded)) (head uint64, stop func(), err error) {
	if err := j.check(ctx); err != nil {
		return 0, nil, err
	}
	t, err := j.readTail(ctx, s)
	if err != nil {
		return 0, nil, err
	}
	cctx, cancel := j.ctx(ctx)
	defer cancel()
	cons, err := j.js.OrderedConsumer(cctx, j.opts.Stream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{j.evSubject(s)},
		DeliverPolicy:  jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:    t.msgSeq + 1,
	})
	if err != nil {
		return 0, nil, fmt.Errorf("journal: jetstream: tail %s: %w", s, err)
	}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		first, err1 := strconv.ParseUint(m.Headers().Get(hdrFirst), 10, 64)
		last, err2 := strconv.ParseUint(m.Headers().Get(hdrLast), 10, 64)
		if err1 != nil || err2 != nil || first == 0 || last < first {
			return // a fence, or damage the readers report
		}
		if evs, err := decodeEvents(m.Headers(), m.Data(), first, last); err == nil {
			fn(evs)
		}
	})
	if err != nil {
		return 0, nil, fmt.Errorf("journal: jetstream: tail %s: %w", s, err)
	}
	return t.head, func() {
		cc.Drain()
		select { // a closed connection may never finish the drain
		case <-cc.Closed():
		case <-time.After(j.opts.Timeout):
			cc.Stop()
		}
	}, nil
}

// jsAck is JetStream's reply to a publish.
type jsAck struct {
	Seq       uint64 `json:"seq"`
	Duplicate bool   `json:"duplicate"`
	Error     *struct {
		Code        int    `json:"code"`
		ErrCode     int    `json:"err_code"`
		Description string `json:"description"`
	} `json:"error"`
}

// JetStream error codes publish tells apart.
const (
	jsErrDuplicateInBatch = 10201 // an atomic batch repeats a stored Nats-Msg-Id
	jsRetryBudget         = 20 * time.Second
)

// errDuplicate: the publish repeated one JetStream had already stored
// (its Nats-Msg-Id): an earlier attempt of the same append succeeded.
var errDuplicate = errors.New("journal: jetstream: already stored")

// publish stores msgs atomically and returns the stream seq of the last.
// Every attempt carries the same Nats-Msg-Id, so JetStream stores the
// messages once however often they are sent: a publish whose answer was
// lost (a timeout, a server going away, a leader being elected) is sent
// again for up to 20 s, and one that was already stored reports
// errDuplicate. A refusal (ErrFenced, a message too large) is final.
func (j *JetStream) publish(ctx context.Context, msgs []*nats.Msg) (uint64, error) {
	msgs[0].Header.Set(jetstream.MsgIDHeader, uuid.NewString())
	deadline := time.Now().Add(jsRetryBudget)
	backoff := 50 * time.Millisecond
	for attempt := 1; ; attempt++ {
		seq, err, transient := j.publishOnce(ctx, msgs)
		if transient && (j.nc.IsClosed() || j.closed.Load()) {
			transient = false // nothing will come back: the connection or the journal is closed
		}
		if !transient || ctx.Err() != nil || time.Now().Add(backoff).After(deadline) {
			if err != nil && attempt > 1 {
				err = fmt.Errorf("%w (after %d attempts)", err, attempt)
			}
			return seq, err
		}
		select {
		case <-ctx.Done():
			return 0, err
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
}

// publishOnce sends msgs once; transient says whether sending them again
// may succeed.
func (j *JetStream) publishOnce(ctx context.Context, msgs []*nats.Msg) (seq uint64, err error, transient bool) {
	if len(msgs) > 1 {
		id := uuid.NewString()
		for i, m := range msgs {
			m.Header.Set("Nats-Batch-Id", id)
			m.Header.Set("Nats-Batch-Sequence", strconv.Itoa(i+1))
		}
		msgs[len(msgs)-1].Header.Set("Nats-Batch-Commit", "1")
		for _, m := range msgs[:len(msgs)-1] {
			if err := j.nc.PublishMsg(m); err != nil {
				return 0, fmt.Errorf("journal: jetstream: append: %w", err), !errors.Is(err, nats.ErrMaxPayload)
			}
		}
	}
	rctx, cancel := j.ctx(ctx)
	defer cancel()
	reply, err := j.nc.RequestMsgWithContext(rctx, msgs[len(msgs)-1])
	if err != nil {
		// A message over the server's max payload is refused by the client
		// before it is sent: sending it again cannot succeed.
		return 0, fmt.Errorf("journal: jetstream: append: %w", err), !errors.Is(err, nats.ErrMaxPayload)
	}
	var ack jsAck
	if err := json.Unmarshal(reply.Data, &ack); err != nil {
		return 0, fmt.Errorf("journal: jetstream: append: bad reply %q: %w", reply.Data, err), false
	}
	switch e := ack.Error; {
	case e == nil && ack.Duplicate:
		return 0, errDuplicate, false
	case e == nil:
		return ack.Seq, nil, false
	case e.ErrCode == jsErrDuplicateInBatch:
		return 0, errDuplicate, false
	case jetstream.ErrorCode(e.ErrCode) == jetstream.JSErrCodeStreamWrongLastSequence || jetstream.ErrorCode(e.ErrCode) == jetstream.JSErrCodeStreamWrongLastSequenceConstant:
		return 0, fmt.Errorf("%w (%s)", ErrFenced, e.Description), false
	default:
		return 0, fmt.Errorf("journal: jetstream: append: %s (error %d)", e.Description, e.ErrCode), e.Code == 503
	}
}

// Head implements Journal.
func (j *JetStream) Head(ctx context.Context, s messages.SessionID) (uint64, error) {
	if err := j.check(ctx); err != nil {
		return 0, err
	}
	t, err := j.readTail(ctx, s)
	return t.head, err
}

// trimMark reads the session's trim mark (0 if never trimmed).
func (j *JetStream) trimMark(ctx context.Context, s messages.SessionID) (uint64, error) {
	m, err := j.last(ctx, j.subject("first", string(s)))
	if err != nil || m == nil {
		return 0, err
	}
	v, err := strconv.ParseUint(string(m.Data), 10, 64)
	if err != nil {
		return 0, j.corrupt(s, 0, 0, fmt.Sprintf("trim mark %q", m.Data))
	}
	return v, nil
}

// First implements Journal.
func (j *JetStream) First(ctx context.Context, s messages.SessionID) (uint64, error) {
	if err := j.check(ctx); err != nil {
		return 0, err
	}
	first, head, err := j.bounds(ctx, s)
	if head == 0 {
		return 0, err
	}
	return first, err
}

// bounds returns the session's first readable seq and its head.
func (j *JetStream) bounds(ctx context.Context, s messages.SessionID) (first, head uint64, err error) {
	t, err := j.readTail(ctx, s)
	if err != nil || t.head == 0 {
		return 0, 0, err
	}
	mark, err := j.trimMark(ctx, s)
	if err != nil {
		return 0, 0, err
	}
	m, err := j.next(ctx, j.evSubject(s), 1)
	if err != nil {
		return 0, 0, err
	}
	first = mark
	if m != nil {
		f, _, err := msgSpan(m)
		if err != nil {
			return 0, 0, j.corrupt(s, 0, 0, err.Error())
		}
		first = max(first, f)
	}
	return min(max(first, 1), t.head+1), t.head, nil
}

// ReadAfter implements Journal.
func (j *JetStream) ReadAfter(ctx context.Context, s messages.SessionID, after uint64, limit int) ([]*messages.Encoded, error) {
	if err := j.check(ctx); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, nil
	}
	first, head, err := j.bounds(ctx, s)
	if err != nil || head == 0 {
		return nil, err
	}
	from := max(after+1, first)
	if from > head {
		return nil, nil
	}
	subj := j.evSubject(s)
	m, err := j.locate(ctx, s, from)
	if err != nil {
		return nil, err
	}
	var out []*messages.Encoded
	for m != nil && len(out) < limit {
		f, l, err := msgSpan(m)
		if err != nil {
			return out, j.corrupt(s, from, from-1, err.Error())
		}
		if f > from && len(out) > 0 {
			// A hole after what was read: a Trim running meanwhile
			// purged it (the next read jumps), or it is lost.
			if mark, err := j.trimMark(ctx, s); err != nil || mark >= f {
				return out, err
			}
			return out, j.corrupt(s, from, from-1, fmt.Sprintf("missing up to seq %d", f-1))
		}
		evs, err := decodeEvents(m.Header, m.Data, f, l)
		if err != nil {
			return out, j.corrupt(s, max(f, from), max(f, from)-1, fmt.Sprintf("stream seq %d: %v", m.Sequence, err))
		}
		for _, e := range evs {
			if e.Seq >= from && len(out) < limit {
				out = append(out, e)
			}
		}
		from = max(from, l+1)
		if from > head || len(out) >= limit {
			break
		}
		if m, err = j.next(ctx, subj, m.Sequence+1); err != nil {
			return out, err
		}
	}
	return out, nil
}

// locate returns the session's first message that ends at or after seq:
// the one that holds it, or the first one after it if seq was trimmed. A
// session's messages are in seq order, so it bisects the stream seqs
// between the session's first and last message.
func (j *JetStream) locate(ctx context.Context, s messages.SessionID, seq uint64) (*jetstream.RawStreamMsg, error) {
	subj := j.evSubject(s)
	lastSeq := func(m *jetstream.RawStreamMsg) (uint64, error) {
		_, l, err := msgSpan(m)
		if err != nil {
			return 0, j.corrupt(s, seq, seq-1, err.Error())
		}
		return l, nil
	}
	lo, err := j.next(ctx, subj, 1)
	if err != nil || lo == nil {
		return nil, err
	}
	if l, err := lastSeq(lo); err != nil || l >= seq {
		return lo, err
	}
	ans, err := j.last(ctx, subj)
	if err != nil || ans == nil {
		return nil, err
	}
	// The answer is the first message at or after stream seq b; every
	// message before stream seq a ends before seq.
	a, b := lo.Sequence+1, ans.Sequence
	for a < b {
		mid := a + (b-a)/2
		m, err := j.next(ctx, subj, mid)
		if err != nil || m == nil {
			return m, err
		}
		l, err := lastSeq(m)
		if err != nil {
			return nil, err
		}
		if l >= seq {
			ans, b = m, mid
		} else {
			a = m.Sequence + 1
		}
	}
	return ans, nil
}

// Trim implements Journal.
func (j *JetStream) Trim(ctx context.Context, s messages.SessionID, before uint64) error {
	if err := j.check(ctx); err != nil {
		return err
	}
	first, head, err := j.bounds(ctx, s)
	if err != nil || head == 0 {
		return err
	}
	before = min(before, head+1)
	live, err := j.liveRuns(ctx, j.subject("live", string(s))+".*")
	if err != nil {
		return err
	}
	for _, r := range live {
		before = min(before, r.FirstSeq)
	}
	if before <= first {
		return nil
	}
	m := nats.NewMsg(j.subject("first", string(s)))
	m.Header.Set(jetstream.MsgRollup, jetstream.MsgRollupSubject)
	m.Data = strconv.AppendUint(nil, before, 10)
	if _, err := j.publish(ctx, []*nats.Msg{m}); err != nil && !errors.Is(err, errDuplicate) {
		return err
	}
	// Purge the messages that end before the mark, keeping the last one
	// (it carries the head).
	keep, err := j.locate(ctx, s, before)
	if err != nil || keep == nil {
		return err
	}
	pctx, cancel := j.ctx(ctx)
	defer cancel()
	if err := j.st.Purge(pctx, jetstream.WithPurgeSubject(j.evSubject(s)), jetstream.WithPurgeSequence(keep.Sequence)); err != nil {
		return fmt.Errorf("journal: jetstream: trim: %w", err)
	}
	return nil
}

// Sessions implements Journal.
func (j *JetStream) Sessions(ctx context.Context) ([]messages.SessionID, error) {
	if err := j.check(ctx); err != nil {
		return nil, err
	}
	ictx, cancel := j.ctx(ctx)
	defer cancel()
	prefix := j.opts.Prefix + ".ev."
	info, err := j.st.Info(ictx, jetstream.WithSubjectFilter(prefix+"*"))
	if err != nil {
		return nil, fmt.Errorf("journal: jetstream: sessions: %w", err)
	}
	out := make([]messages.SessionID, 0, len(info.State.Subjects))
	for subj := range info.State.Subjects {
		id, err := SubjectUntoken(strings.TrimPrefix(subj, prefix))
		if err != nil {
			return nil, fmt.Errorf("journal: jetstream: sessions: subject %q: %w", subj, err)
		}
		out = append(out, messages.SessionID(id))
	}
	slices.Sort(out)
	return out, nil
}
