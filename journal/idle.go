package journal

// Idle sessions leave memory. A Durable journal keeps an in-memory state per
// session it uses (head, first seq, repair gaps, the checksum chain's last
// sum, live runs, high-water marks: about 0.6 KB), and sessions are created
// for ever: one per conversation is common. So a session that nobody wrote,
// trimmed or read for a whole evictor period (Options.IdleAfter), and that
// has no live run, leaves memory; the next use loads it again from the
// store (loadSession: its trim record or its seq 1, point look-ups that the
// tables' bloom filters answer for a new session, then its last event).
//
// Its events are in the store's tables before it leaves: the evictor
// flushes the memtable first, so what a later Open must check against the
// high-water mark log is only what the write-ahead log holds, and an
// evicted session is not in that log any more (the committer's next
// snapshot of the log omits it). Open therefore loads and verifies the
// sessions the high-water mark log names (those written since they were
// last idle) and leaves the others in the store; every record is still
// verified when it is read (checksum and chain).
//
// Lock order: closeMu, durSession.mu, mu (as in durable.go).

import (
	"bytes"
	"encoding/binary"
	"errors"
	"slices"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/conclave-ai/conclave/messages"
)

// DefaultIdleAfter is Options.IdleAfter's default.
const DefaultIdleAfter = 2 * time.Minute

// evictLoop runs evictIdle every period until Close: a session leaves
// memory between one and two periods after its last use.
func (d *Durable) evictLoop(every time.Duration) {
	defer close(d.evictDone)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-d.evictStop:
			return
		case <-t.C:
			if _, err := d.evictIdle(); err != nil && !errors.Is(err, ErrClosed) {
				d.log.Warn("journal: could not let idle sessions leave memory", "dir", d.dir, "err", err)
			}
		}
	}
}

// stopEvictor stops evictLoop and waits for it (before Close takes
// closeMu, which a pass holds for reading). Idempotent. It reports false
// when a goroutine of the store is parked (pebbleLogger.Fatalf): a pass
// may then wait inside the store for good, and Close must not wait.
func (d *Durable) stopEvictor() bool {
	if d.evictStop == nil {
		return true
	}
	d.stopOnce.Do(func() { close(d.evictStop) })
	select {
	case <-d.evictDone:
		return true
	case <-d.parked:
		return false
	}
}

// evictIdle drops the in-memory state of the sessions unused since before
// the previous pass that have no live run, once their events are in the
// store's tables, and returns how many left.
func (d *Durable) evictIdle() (int, error) {
	d.closeMu.RLock()
	defer d.closeMu.RUnlock()
	if d.closed {
		return 0, ErrClosed
	}
	if err := d.failed.Load(); err != nil {
		return 0, *err // a failed journal keeps what it knows
	}
	// A session used since the previous pass carries that pass's epoch
	// (or this one's): the others were idle for a whole period at least.
	cutoff := d.epoch.Add(1) - 1
	d.mu.RLock()
	var idle []*durSession
	for _, s := range d.sessions {
		if s.lastUse.Load() < cutoff {
			idle = append(idle, s)
		}
	}
	d.mu.RUnlock()
	// Sessions with a live run (a parked run's, say) stay: without any
	// other, there is nothing to flush for.
	idle = slices.DeleteFunc(idle, func(s *durSession) bool { return !s.mayLeave() })
	if len(idle) == 0 {
		return 0, nil
	}
	// Everything acknowledged before now goes to the tables: the sessions
	// leaving memory then depend on no write-ahead log record.
	if err := d.db.Flush(); err != nil {
		return 0, storeError("flush", d.dir, err)
	}
	n := 0
	for _, s := range idle {
		if !s.mu.TryLock() {
			continue // being written: not idle
		}
		if !s.evicted && s.lastUse.Load() < cutoff && len(s.live) == 0 {
			d.mu.Lock()
			if d.sessions[s.id] == s {
				delete(d.sessions, s.id)
				d.evictGen++
				s.evicted = true
				n++
			}
			d.mu.Unlock()
		}
		s.mu.Unlock()
	}
	d.evictions.Add(uint64(n))
	return n, nil
}

// mayLeave reports whether s has no live run, unless it is being written
// (then it is not idle either).
func (s *durSession) mayLeave() bool {
	if !s.mu.TryLock() {
		return false
	}
	defer s.mu.Unlock()
	return !s.evicted && len(s.live) == 0
}

// session returns the session's state, loading it from the store if it is
// not in memory; nil (and no error) if the store has nothing of it. With
// create, a session the store does not know gets a new state.
func (d *Durable) session(id messages.SessionID, create bool) (*durSession, error) {
	for {
		d.mu.RLock()
		s, gen := d.sessions[id], d.evictGen
		g, absent := d.absent.of(id)
		d.mu.RUnlock()
		if s != nil {
			d.touch(s)
			return s, nil
		}
		var loaded *durSession
		if !absent || g != gen { // known absent, unless a state left memory since
			var err error
			if loaded, err = d.loadSession(id); err != nil {
				return nil, err
			}
			d.lookups.Add(1)
		}
		if loaded == nil && !create {
			d.mu.Lock()
			if d.evictGen == gen && d.sessions[id] == nil {
				d.absent.add(id, gen) // spares the next look-up (an Append after a Head, say)
			}
			d.mu.Unlock()
			return nil, nil
		}
		if loaded == nil {
			loaded = newDurSession(id)
		}
		d.mu.Lock()
		switch s = d.sessions[id]; {
		case s != nil: // another caller loaded it meanwhile
		case d.evictGen != gen:
			// A state left memory while this one was read: it may have
			// been this session's, written after the read. Read again.
			d.mu.Unlock()
			continue
		default:
			s = loaded
			d.sessions[id] = s
			d.absent.remove(id)
		}
		d.mu.Unlock()
		d.touch(s)
		return s, nil
	}
}

// absentSessions remembers the last sessions the store was found not to
// hold, with the eviction generation of the look-up: until a state leaves
// memory (which may put that session in the store), or the session is
// created, a look-up of them is answered without reading the store. A
// new session is looked up at least twice before its first Append is
// done (the engine asks its head first), and each look-up in the store
// costs a block read in every table when the cache is cold. Bounded: a
// ring of the last absentCap sessions. Guarded by Durable.mu.
type absentSessions struct {
	gen  map[messages.SessionID]uint64
	ring []messages.SessionID
	next int
}

const absentCap = 4096

func (a *absentSessions) of(id messages.SessionID) (uint64, bool) {
	g, ok := a.gen[id]
	return g, ok
}

func (a *absentSessions) add(id messages.SessionID, gen uint64) {
	if a.gen == nil {
		a.gen, a.ring = make(map[messages.SessionID]uint64, absentCap), make([]messages.SessionID, absentCap)
	}
	if _, ok := a.gen[id]; !ok {
		if old := a.ring[a.next]; old != "" {
			delete(a.gen, old)
		}
		a.ring[a.next] = id
		a.next = (a.next + 1) % absentCap
	}
	a.gen[id] = gen
}

// remove forgets id. Its ring slot stays; when the ring comes back to it,
// it may forget a later entry of id early, which only costs a look-up.
func (a *absentSessions) remove(id messages.SessionID) { delete(a.gen, id) }

// touch marks s used in the current epoch. Most calls find it marked: they
// only read the word, so readers of one session on several cores do not
// pass its cache line back and forth.
func (d *Durable) touch(s *durSession) {
	if e := d.epoch.Load(); s.lastUse.Load() != e {
		s.lastUse.Store(e)
	}
}

// lockSession returns the session's state locked (s.mu), loading it if
// needed; create as in session. A state that left memory while the caller
// waited for its lock is looked up again.
func (d *Durable) lockSession(id messages.SessionID, create bool) (*durSession, error) {
	for {
		s, err := d.session(id, create)
		if s == nil || err != nil {
			return nil, err
		}
		s.mu.Lock()
		if !s.evicted {
			return s, nil
		}
		s.mu.Unlock()
	}
}

// loadSession reads a session's state from the store: its trim and repair
// record (first seq, head, gaps) and its last event (head, the chain's
// last sum). Nil if the store has neither.
func (d *Durable) loadSession(id messages.SessionID) (*durSession, error) {
	s := newDurSession(id)
	first, head := uint64(1), uint64(0)
	var gaps []span
	mk := sessionKey(keyMeta, id)
	v, hasMeta, err := d.get(mk)
	if err != nil {
		return nil, err
	}
	if hasMeta {
		if first, head, gaps, err = parseMeta(mk, v); err != nil {
			return nil, storeError("read", d.dir, corruptf("session %s: trim record: %v", id, err))
		}
		first = max(first, 1)
	} else {
		// Without a trim record nothing was ever removed: a stored session
		// has its seq 1. Two point look-ups, which the tables' bloom
		// filters answer for a new session without reading a block; a
		// range scan (below) would read one in every table.
		switch _, ok, err := d.get(eventKey(nil, s.prefix, 1)); {
		case err != nil:
			return nil, err
		case !ok:
			return nil, nil
		}
	}
	it, err := d.db.NewIter(&pebble.IterOptions{LowerBound: s.prefix, UpperBound: prefixEnd(s.prefix)})
	if err != nil {
		return nil, storeError("read", d.dir, err)
	}
	defer it.Close()
	var last uint64
	var lastSum uint32
	if it.Last() {
		k := slices.Clone(it.Key())
		if len(k) != len(s.prefix)+8 || !bytes.HasPrefix(k, s.prefix) {
			return nil, storeError("read", d.dir, corruptf("session %s: bad key %x", id, k))
		}
		last = binary.BigEndian.Uint64(k[len(s.prefix):])
		val, err := it.ValueAndErr()
		if err != nil {
			return nil, storeError("read", d.dir, err)
		}
		rec, err := decodeRecord(k, val)
		if err != nil {
			return nil, storeError("read", d.dir, &CorruptError{Session: id, Seq: last, LastIntact: last - 1, Detail: err.Error()})
		}
		lastSum = rec.sum
	}
	if err := it.Error(); err != nil {
		return nil, storeError("read", d.dir, err)
	}
	if !hasMeta && last == 0 {
		return nil, nil
	}
	if last == max(head, last) {
		s.lastSum = lastSum // the next record chains to it (after a repair's gap, it does not)
	}
	head = max(head, last)
	// What the store holds is what this journal acknowledged (it left
	// memory flushed and verified as it is read): the committer's marks
	// start there, so the high-water mark log names it at its head.
	s.acked, s.verified = head, head
	first, gaps = normalizeGaps(first, gaps)
	s.head.Store(head)
	s.first.Store(min(first, head+1))
	s.gaps.Store(&gaps)
	return s, nil
}

// storedSessions lists the sessions the store has events or a trim record
// of, one seek per session.
func (d *Durable) storedSessions() ([]messages.SessionID, error) {
	var out []messages.SessionID
	seen := map[messages.SessionID]bool{}
	for _, kind := range []byte{keyEvent, keyMeta} {
		it, err := d.db.NewIter(&pebble.IterOptions{LowerBound: []byte{kind}, UpperBound: []byte{kind + 1}})
		if err != nil {
			return nil, storeError("read", d.dir, err)
		}
		for ok := it.First(); ok; {
			id, end, err := parseSessionKey(it.Key(), kind)
			if err != nil {
				_ = it.Close()
				return nil, storeError("read", d.dir, err)
			}
			if !seen[id] {
				seen[id] = true
				out = append(out, id)
			}
			ok = it.SeekGE(prefixEnd(it.Key()[:end]))
		}
		if err := errors.Join(it.Error(), it.Close()); err != nil {
			return nil, storeError("read", d.dir, err)
		}
	}
	return out, nil
}
