package journal

// The run catalogue of Durable (see Catalog). Its records live in the same
// store as the events and are written in the same batch as the events that
// start and end runs, so a crash, a lost write-ahead log tail or a repair
// leaves it consistent with the events.
//
//	'r' uvarint(len(run)) run          uvarint(len(session)) session order(8) first(8) last(8)
//	'o' order(8)                       run            every run, in append order (ListRuns(""))
//	'x' uvarint(len(scope)) scope order(8)   run      the runs of a scope (ListRuns(scope))
//	'l' order(8)                       run            the live runs (loaded at Open)
//	'u' uvarint(len(run)) run          summary
//
// order numbers runs in the order their run_started was committed. All
// values are sealed. Only the live runs are kept in memory.

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/conclave-ai/conclave/messages"
)

func runKey(run messages.RunID) []byte { return stringKey(keyRun, string(run)) }

func summaryKey(run messages.RunID) []byte { return stringKey(keySummary, string(run)) }

func stringKey(kind byte, s string) []byte {
	return appendUvarintBytes([]byte{kind}, s)
}

func orderKey(kind byte, order uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{kind}, order)
}

func scopeKey(scope string, order uint64) []byte {
	return binary.BigEndian.AppendUint64(stringKey(keyScope, scope), order)
}

func encodeRun(info RunInfo, order uint64) []byte {
	body := appendUvarintBytes(nil, string(info.Session))
	body = binary.BigEndian.AppendUint64(body, order)
	body = binary.BigEndian.AppendUint64(body, info.FirstSeq)
	body = binary.BigEndian.AppendUint64(body, info.LastSeq)
	key := runKey(info.Run)
	return seal(key, body)
}

func decodeRun(run messages.RunID, v []byte) (RunInfo, uint64, error) {
	body, err := unseal(runKey(run), v)
	if err != nil {
		return RunInfo{}, 0, corruptf("run %s: catalogue record: %v", run, err)
	}
	session, rest, ok := cutUvarintBytes(body)
	if !ok || len(rest) != 24 {
		return RunInfo{}, 0, corruptf("run %s: catalogue record: %v", run, errBadRecord)
	}
	info := RunInfo{Run: run, Session: messages.SessionID(session),
		FirstSeq: binary.BigEndian.Uint64(rest[8:]), LastSeq: binary.BigEndian.Uint64(rest[16:])}
	return info, binary.BigEndian.Uint64(rest), nil
}

// putRun adds a run's record to b and, for a new run, its index entries.
func putRun(b *pebble.Batch, info RunInfo, order uint64, isNew bool) error {
	if err := b.Set(runKey(info.Run), encodeRun(info, order), nil); err != nil {
		return err
	}
	if !isNew {
		return nil
	}
	id := []byte(info.Run)
	k := orderKey(keyOrder, order)
	if err := b.Set(k, seal(k, id), nil); err != nil {
		return err
	}
	if scope := scopeOf(info.Session); scope != "" {
		k := scopeKey(scope, order)
		if err := b.Set(k, seal(k, id), nil); err != nil {
			return err
		}
	}
	if info.LastSeq == 0 {
		k := orderKey(keyLive, order)
		return b.Set(k, seal(k, id), nil)
	}
	return nil
}

// deleteRun adds the removal of a run and its index entries to b.
func deleteRun(b *pebble.Batch, info RunInfo, order uint64) error {
	var err error
	for _, k := range [][]byte{runKey(info.Run), summaryKey(info.Run), orderKey(keyOrder, order), orderKey(keyLive, order)} {
		if err == nil {
			err = b.Delete(k, nil)
		}
	}
	if scope := scopeOf(info.Session); scope != "" && err == nil {
		err = b.Delete(scopeKey(scope, order), nil)
	}
	return err
}

// catalogUpdate is what an Append does to the catalogue, applied to memory
// once the batch is committed.
type catalogUpdate struct {
	// ordered: the batch starts runs, and Append holds orderMu until it
	// has queued the batch.
	ordered bool
	started []*liveRun // runs started and not ended by the batch
	ended   []messages.RunID
}

// catalogBatch adds the catalogue records of a batch of s to b. The caller
// holds s.mu. If the result is ordered, orderMu is held.
func (d *Durable) catalogBatch(b *pebble.Batch, s *durSession, changes []runChange) (u catalogUpdate, err error) {
	defer func() {
		if err != nil && u.ordered {
			d.orderMu.Unlock()
			u.ordered = false
		}
	}()
	for _, ch := range changes {
		if ch.start != 0 {
			known, err := d.runKnown(ch.run)
			if err != nil {
				return u, fmt.Errorf("journal: session %s: %w", s.id, err)
			}
			if !known {
				if !u.ordered {
					d.orderMu.Lock()
					u.ordered = true
				}
				d.lastOrder++
				info := RunInfo{Run: ch.run, Session: s.id, FirstSeq: ch.start}
				if ch.end > ch.start {
					info.LastSeq = ch.end
				}
				if err := putRun(b, info, d.lastOrder, true); err != nil {
					return u, fmt.Errorf("journal: session %s: catalogue: %w", s.id, err)
				}
				if info.LastSeq == 0 {
					u.started = append(u.started, &liveRun{info: info, order: d.lastOrder})
				}
				continue
			}
		}
		if ch.end == 0 {
			continue
		}
		d.catMu.RLock()
		lr := d.live[ch.run]
		d.catMu.RUnlock()
		if lr == nil || lr.info.Session != s.id || ch.end <= lr.info.FirstSeq {
			continue
		}
		info := lr.info
		info.LastSeq = ch.end
		if err := putRun(b, info, lr.order, false); err != nil {
			return u, fmt.Errorf("journal: session %s: catalogue: %w", s.id, err)
		}
		if err := b.Delete(orderKey(keyLive, lr.order), nil); err != nil {
			return u, fmt.Errorf("journal: session %s: catalogue: %w", s.id, err)
		}
		u.ended = append(u.ended, ch.run)
	}
	return u, nil
}

// runKnown reports whether the catalogue has run (live or ended).
func (d *Durable) runKnown(run messages.RunID) (bool, error) {
	d.catMu.RLock()
	_, live := d.live[run]
	d.catMu.RUnlock()
	if live {
		return true, nil
	}
	_, ok, err := d.get(runKey(run))
	return ok, err
}

// get returns a copy of the value of key.
func (d *Durable) get(key []byte) ([]byte, bool, error) {
	v, closer, err := d.db.Get(key)
	if err == pebble.ErrNotFound {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, storeError("read", d.dir, err)
	}
	v = slices.Clone(v)
	_ = closer.Close()
	return v, true, nil
}

// applyCatalog applies a committed batch's catalogue update to memory. The
// caller holds s.mu.
func (d *Durable) applyCatalog(s *durSession, u catalogUpdate) {
	d.catMu.Lock()
	defer d.catMu.Unlock()
	for _, r := range u.started {
		d.live[r.info.Run] = r
		if s.live == nil {
			s.live = make(map[messages.RunID]uint64)
		}
		s.live[r.info.Run] = r.info.FirstSeq
	}
	for _, run := range u.ended {
		delete(d.live, run)
		delete(s.live, run)
	}
	if len(s.live) == 0 {
		s.live = nil // an empty map keeps its buckets: one per session ever, otherwise
	}
}

// catalogOpen checks ctx and Close; the caller must release closeMu.
func (d *Durable) catalogOpen(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	d.closeMu.RLock()
	if d.closed {
		d.closeMu.RUnlock()
		return ErrClosed
	}
	return nil
}

// LiveRuns implements Catalog.
func (d *Durable) LiveRuns(ctx context.Context) ([]RunInfo, error) {
	if err := d.catalogOpen(ctx); err != nil {
		return nil, err
	}
	defer d.closeMu.RUnlock()
	d.catMu.RLock()
	live := make([]*liveRun, 0, len(d.live))
	for _, r := range d.live {
		live = append(live, r)
	}
	d.catMu.RUnlock()
	slices.SortFunc(live, func(a, b *liveRun) int { return cmp.Compare(a.order, b.order) })
	out := make([]RunInfo, len(live))
	for i, r := range live {
		out[i] = r.info
		if err := d.withSummary(&out[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Run implements Catalog.
func (d *Durable) Run(ctx context.Context, run messages.RunID) (RunInfo, bool, error) {
	if err := d.catalogOpen(ctx); err != nil {
		return RunInfo{}, false, err
	}
	defer d.closeMu.RUnlock()
	info, _, state, err := d.readRun(run)
	if err != nil || state != runFound {
		return RunInfo{}, false, err
	}
	return info, true, d.withSummary(&info)
}

// runState says what readRun found.
type runState int

const (
	runMissing runState = iota // no record
	runPending                 // recorded by a batch whose Append has not returned yet
	runFound
)

// readRun reads a run's record and hides what is not acknowledged yet (a
// batch is in the store a moment before its Append returns).
func (d *Durable) readRun(run messages.RunID) (RunInfo, uint64, runState, error) {
	d.catMu.RLock()
	lr := d.live[run]
	d.catMu.RUnlock()
	if lr != nil {
		return lr.info, lr.order, runFound, nil
	}
	v, ok, err := d.get(runKey(run))
	if err != nil || !ok {
		return RunInfo{}, 0, runMissing, err
	}
	info, order, err := decodeRun(run, v)
	if err != nil {
		return RunInfo{}, 0, runMissing, storeError("read", d.dir, err)
	}
	var head uint64
	s, err := d.session(info.Session, false)
	if err != nil {
		return RunInfo{}, 0, runMissing, err
	}
	if s != nil {
		head = s.head.Load()
	}
	if info.FirstSeq > head {
		return RunInfo{}, 0, runPending, nil
	}
	if info.LastSeq > head {
		info.LastSeq = 0
	}
	return info, order, runFound, nil
}

func (d *Durable) withSummary(info *RunInfo) error {
	key := summaryKey(info.Run)
	v, ok, err := d.get(key)
	if err != nil || !ok {
		return err
	}
	body, err := unseal(key, v)
	if err != nil {
		return storeError("read", d.dir, corruptf("run %s: summary: %v", info.Run, err))
	}
	info.Summary = body
	return nil
}

// ListRuns implements Catalog. It reads one index entry, one run record
// and one summary per run listed.
func (d *Durable) ListRuns(ctx context.Context, scope string, after messages.RunID, limit int) ([]RunInfo, messages.RunID, error) {
	if err := d.catalogOpen(ctx); err != nil {
		return nil, "", err
	}
	defer d.closeMu.RUnlock()
	limit, err := checkListArgs(scope, limit)
	if err != nil || limit <= 0 {
		return nil, "", err
	}
	prefix := []byte{keyOrder}
	if scope != "" {
		prefix = stringKey(keyScope, scope)
	}
	var from uint64 = 1
	if after != "" {
		_, order, state, err := d.readRun(after)
		if err != nil {
			return nil, "", err
		}
		if state != runFound {
			return nil, "", fmt.Errorf("%w: list runs after %q", ErrUnknownRun, after)
		}
		from = order + 1
	}
	it, err := d.db.NewIter(&pebble.IterOptions{
		LowerBound: binary.BigEndian.AppendUint64(slices.Clone(prefix), from),
		UpperBound: prefixEnd(prefix),
	})
	if err != nil {
		return nil, "", storeError("read", d.dir, err)
	}
	defer it.Close()
	var out []RunInfo
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		body, err := unseal(k, it.Value())
		if err != nil || len(k) != len(prefix)+8 || !bytes.HasPrefix(k, prefix) {
			return nil, "", storeError("read", d.dir, corruptf("run index entry %x: %v", k, err))
		}
		info, _, state, err := d.readRun(messages.RunID(body))
		if err != nil {
			return nil, "", err
		}
		if state == runMissing {
			return nil, "", storeError("read", d.dir, corruptf("run index entry %x: run %s has no record", k, body))
		}
		if state == runPending {
			break // not acknowledged yet, and neither is any later run
		}
		if len(out) == limit {
			return out, out[len(out)-1].Run, nil
		}
		if err := d.withSummary(&info); err != nil {
			return nil, "", err
		}
		out = append(out, info)
	}
	if err := it.Error(); err != nil {
		return nil, "", storeError("read", d.dir, err)
	}
	return out, "", nil
}

// PutRunSummary implements Catalog. The summary rides along with the next
// group commit without asking for an fsync of its own.
func (d *Durable) PutRunSummary(ctx context.Context, run messages.RunID, summary []byte) error {
	if err := d.catalogOpen(ctx); err != nil {
		return err
	}
	defer d.closeMu.RUnlock()
	if len(summary) > MaxRunSummary {
		return fmt.Errorf("journal: run %s: summary of %d bytes is larger than %d", run, len(summary), MaxRunSummary)
	}
	if _, _, state, err := d.readRun(run); err != nil || state != runFound {
		if err == nil {
			err = fmt.Errorf("%w: %s", ErrUnknownRun, run)
		}
		return err
	}
	if err := d.failed.Load(); err != nil {
		return *err
	}
	b := d.db.NewBatch()
	key := summaryKey(run)
	if err := b.Set(key, seal(key, summary), nil); err != nil {
		_ = b.Close()
		return err
	}
	req := &commitReq{b: b, done: make(chan error, 1)}
	d.commits <- req
	return <-req.done
}

// loadCatalog reads the live runs and the last order at Open.
func (d *Durable) loadCatalog() error {
	it, err := d.db.NewIter(&pebble.IterOptions{LowerBound: []byte{keyLive}, UpperBound: []byte{keyLive + 1}})
	if err != nil {
		return err
	}
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		body, err := unseal(k, it.Value())
		if err != nil || len(k) != 9 {
			_ = it.Close()
			return corruptf("live run index entry %x: %v", k, err)
		}
		run := messages.RunID(body)
		v, ok, err := d.get(runKey(run))
		if err != nil {
			_ = it.Close()
			return err
		}
		if !ok {
			_ = it.Close()
			return corruptf("live run %s has no catalogue record", run)
		}
		info, order, err := decodeRun(run, v)
		if err != nil {
			_ = it.Close()
			return err
		}
		d.live[run] = &liveRun{info: info, order: order}
		s, err := d.session(info.Session, false) // loaded already, unless Open left it in the store (idle.go)
		if err != nil {
			_ = it.Close()
			return err
		}
		if s != nil {
			if s.live == nil {
				s.live = make(map[messages.RunID]uint64)
			}
			s.live[run] = info.FirstSeq
		} else {
			d.log.Warn("journal: a live run's session has no events", "run", run, "session", info.Session)
		}
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return err
	}
	it, err = d.db.NewIter(&pebble.IterOptions{LowerBound: []byte{keyOrder}, UpperBound: []byte{keyOrder + 1}})
	if err != nil {
		return err
	}
	if it.Last() {
		d.lastOrder = binary.BigEndian.Uint64(it.Key()[1:])
	}
	return errors.Join(it.Error(), it.Close())
}

// repairCatalog makes the catalogue of the sessions truncated by a repair
// (session -> last intact seq) consistent with their surviving events: a run
// whose run_started was lost is removed, a run whose terminal event was
// lost is live again. It reads every run record (a repair is rare).
func (d *Durable) repairCatalog(b *pebble.Batch, truncated map[messages.SessionID]uint64) (removed, revived int, err error) {
	it, err := d.db.NewIter(&pebble.IterOptions{LowerBound: []byte{keyRun}, UpperBound: []byte{keyRun + 1}})
	if err != nil {
		return 0, 0, err
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		run, rest, ok := cutUvarintBytes(it.Key()[1:])
		if !ok || len(rest) != 0 {
			return removed, revived, corruptf("bad run key %x", it.Key())
		}
		info, order, err := decodeRun(messages.RunID(run), it.Value())
		if err != nil {
			return removed, revived, err
		}
		intact, hit := truncated[info.Session]
		switch {
		case !hit:
		case info.FirstSeq > intact:
			if err := deleteRun(b, info, order); err != nil {
				return removed, revived, err
			}
			removed++
		case info.LastSeq > intact:
			info.LastSeq = 0
			k := orderKey(keyLive, order)
			if err := errors.Join(putRun(b, info, order, false), b.Set(k, seal(k, []byte(info.Run)), nil)); err != nil {
				return removed, revived, err
			}
			revived++
		}
	}
	return removed, revived, it.Error()
}

// migration builds the catalogue of a format-1 journal from the one scan
// Open makes of it.
type migration struct {
	runs  map[messages.RunID]*migratedRun
	order []*migratedRun
}

type migratedRun struct {
	info RunInfo
	ts   time.Time // of its run_started: the order across sessions
}

func newMigration() *migration { return &migration{runs: map[messages.RunID]*migratedRun{}} }

// visit sees every intact event of every session, in seq order.
func (m *migration) visit(session messages.SessionID, seq uint64, rec eventRecord) {
	typ := messages.EventType(rec.typ)
	if typ != messages.RunStarted && !typ.Terminal() || len(rec.run) == 0 {
		return
	}
	r := m.runs[messages.RunID(rec.run)]
	switch {
	case typ == messages.RunStarted && r == nil:
		ts, _ := EventTime(rec.data)
		r = &migratedRun{info: RunInfo{Run: messages.RunID(rec.run), Session: session, FirstSeq: seq}, ts: ts}
		m.runs[r.info.Run] = r
		m.order = append(m.order, r)
	case typ.Terminal() && r != nil && r.info.Session == session && r.info.LastSeq == 0:
		r.info.LastSeq = seq
	}
}

// writeMigration replaces the catalogue with the runs the scan found,
// ordered by the time of their run_started (the order of appends across
// sessions is not recorded in format 1).
func (d *Durable) writeMigration(m *migration) error {
	slices.SortStableFunc(m.order, func(a, b *migratedRun) int { return a.ts.Compare(b.ts) })
	b := d.db.NewBatch()
	for _, kind := range []byte{keyLive, keyOrder, keyRun, keySummary, keyScope} {
		if err := b.DeleteRange([]byte{kind}, []byte{kind + 1}, nil); err != nil {
			_ = b.Close()
			return err
		}
	}
	for i, r := range m.order {
		if err := putRun(b, r.info, uint64(i+1), true); err != nil {
			_ = b.Close()
			return err
		}
		if b.Len() > 4<<20 {
			if err := b.Commit(pebble.NoSync); err != nil {
				return err
			}
			_ = b.Close()
			b = d.db.NewBatch()
		}
	}
	defer b.Close()
	return b.Commit(pebble.Sync)
}
