package journal

// Durable is the journal of `conclave serve`: an embedded Pebble store
// (github.com/cockroachdb/pebble/v2, pinned in go.mod).
//
// Why Pebble. Measured on the 2-core dev machine (ext4 on virtio; one
// write+fsync takes 0.2-0.7 ms), 300-byte events, every commit fsynced,
// events/s appended by a throwaway program (one process per cell; the
// range of three runs, since the shared disk is noisy):
//
//	sessions x batch   pebble v2.1.7   bbolt v1.5.0 Update   bbolt Batch
//	 1 x   1            5.9k-6.4k        2.2k-4.4k             0.5k-0.7k
//	 1 x  64            198k-240k         49k-177k              35k-41k
//	 1 x 512            627k-715k        204k-632k             114k-253k
//	16 x  64            462k-534k         99k-150k             147k-321k
//	64 x  64            408k-860k         82k-145k             436k-484k
//	16 x 512            0.79M-1.12M      336k-577k             574k-738k
//	scan 1M events      3.8M/s            17M/s (mmap)
//
// (pebble v1.1.5 ran at about half of v2 in the same program.) bbolt
// rewrites a copy-on-write B+tree and fsyncs twice per transaction; with
// one hub per session appending small batches it stays far below 500k
// events/s, and its Batch coalescing adds latency to every lone append.
// Pebble appends one sequential WAL record per commit. Pebble v2 also
// detects corruption in the middle of the last WAL (sync-offset chunks,
// FormatWALSyncChunks), where v1 stops replay there silently, and checksums
// table footers. bbolt's faster scan is not needed: this journal replays at
// ~2.7M events/s in pages of 512 (BenchmarkDurable_Replay). The price:
// Pebble is a large dependency (about 150 packages; ~50 s cold build).
//
// This journal (BenchmarkDurable_Append, 3 s runs): 16 sessions x 64 events
// 660k events/s at 225 events per fsync; 64 x 64 850k; 1 x 512 1.19M;
// 16 x 64 sustained over 6M events (1.8 GB) 580k.
//
// Layout. Keys are 'e' uvarint(len(session)) session seq(8 bytes, big
// endian), so a session's events are one contiguous, ordered key range. The
// value is a compact header (format byte, uvarint-prefixed event type and
// run id) followed by the envelope JSON, so reads need no JSON decoding.
// 'm' uvarint(len(session)) session holds first(8) head(8), written by Trim
// so the head survives trimming every event (seqs are never reused).
//
// Group commit. Append encodes its batch on the caller's goroutine and hands
// it to one commit goroutine, which merges every batch waiting at that
// moment into one Pebble batch and commits it with one fsync. While that
// fsync runs, the next group gathers. One committer (instead of Pebble's own
// concurrent commit pipeline) also makes a failed write safe to report:
// Pebble treats a failed WAL write as fatal (it calls Logger.Fatalf, which
// by default exits the process); here Fatalf panics with a *fatalError that
// the committer recovers into an error for every batch of the group, and no
// other goroutine is inside Pebble's commit path at that moment.

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/conclave-ai/conclave/messages"
)

const (
	// markerFile marks a directory as a Conclave journal. Open refuses a
	// non-empty directory without it, and with it requires the store to
	// exist, so a journal whose files were lost is an error instead of a
	// silently empty journal.
	markerFile     = "CONCLAVE-JOURNAL"
	markerText     = "conclave journal 1\n"
	markerCreating = "conclave journal 1 (creating)\n"
	markerTemp     = markerFile + ".tmp"
	// headsFile records every session's head at Open and at Close. Heads
	// only grow, so a store that opens behind it lost acknowledged events
	// (Pebble reads a damaged MANIFEST as far as it can and would otherwise
	// start from an older state, or empty).
	headsFile   = "CONCLAVE-JOURNAL-HEADS"
	headsTemp   = headsFile + ".tmp"
	headsFormat = "conclave journal heads 1\n"
	probeFile   = ".conclave-write-probe"

	keyEvent byte = 'e'
	keyMeta  byte = 'm'

	valueFormat1 byte = 1

	// maxGroupBytes bounds one group commit. A full group still commits at
	// once; the bound only stops the committer from gathering more.
	maxGroupBytes = 32 << 20
	// commitQueue is how many batches may wait for the committer; Append
	// blocks beyond that (backpressure, no unbounded buffer).
	commitQueue = 256

	defaultCacheSize    = 64 << 20
	defaultMemTableSize = 64 << 20
)

// Options configures Open. The zero value is valid.
type Options struct {
	// Logger receives the store's warnings and errors (and its info lines
	// at debug level). Default: discard.
	Logger *slog.Logger
	// CacheSize is the block cache size in bytes. Default 64 MiB.
	CacheSize int64
	// MemTableSize is the size of one memtable in bytes. Default 64 MiB;
	// up to four may be in memory while they are flushed.
	MemTableSize uint64

	// fs replaces the OS filesystem, for tests (error injection, fsync
	// counting). See export_test.go.
	fs vfs.FS
}

// DurableStats counts the work of a Durable journal since Open.
type DurableStats struct {
	Appends uint64 // batches acknowledged
	Events  uint64 // events acknowledged
	Commits uint64 // synced store commits (groups of batches); one WAL fsync each
}

// Durable is a Journal on disk. See the package doc for when an event is
// acknowledged. Create it with Open.
type Durable struct {
	dir string
	fs  vfs.FS
	db  *pebble.DB
	log *slog.Logger

	// closeMu is held for reading by every method while it uses db or sends
	// to commits, and for writing by Close, so neither happens after Close.
	// Lock order: closeMu, then durSession.mu, then mu.
	closeMu sync.RWMutex
	closed  bool // guarded by closeMu

	mu       sync.RWMutex // guards the sessions map (not the sessions)
	sessions map[messages.SessionID]*durSession

	commits  chan *commitReq // to commitLoop; closed by Close
	loopDone chan struct{}   // closed when commitLoop returns
	failed   atomic.Pointer[error]
	// poisoned is set when the store panicked with something other than
	// a *fatalError: it may hold its own locks, so Close must not call it.
	poisoned atomic.Bool

	appends, events, commitCount atomic.Uint64
}

// durSession is the in-memory state of one session.
type durSession struct {
	id     messages.SessionID
	prefix []byte // keyEvent uvarint(len(id)) id

	// mu serialises the writes (Append, Trim) of this session, and guards
	// req, whose done channel each write reuses.
	mu    sync.Mutex
	req   commitReq
	head  atomic.Uint64 // last acknowledged seq
	first atomic.Uint64 // oldest seq readers may get (1 until trimmed)
}

// commitReq is one batch waiting for the committer.
type commitReq struct {
	b    *pebble.Batch
	done chan error // buffered (1): the committer never blocks on a reply
}

var _ Journal = (*Durable)(nil)

// Open opens the journal in dir, creating dir and an empty journal if dir
// does not exist or is empty. It fails with a clear error, and never starts
// empty, when dir is not writable, holds files that are not a journal, or
// holds a journal that is incomplete or corrupt.
func Open(dir string, opts Options) (d *Durable, err error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	fs := opts.fs
	if fs == nil {
		fs = vfs.Default
	}
	fresh, err := prepareDir(fs, dir)
	if err != nil {
		return nil, err
	}
	j := &Durable{
		dir: dir, fs: fs, log: log,
		sessions: make(map[messages.SessionID]*durSession),
		commits:  make(chan *commitReq, commitQueue),
		loopDone: make(chan struct{}),
	}
	po := &pebble.Options{
		FS:                          fs,
		Logger:                      pebbleLogger{log},
		EventListener:               j.eventListener(),
		FormatMajorVersion:          pebble.FormatTableFormatV6,
		ErrorIfNotExists:            !fresh,
		CacheSize:                   cmp.Or(opts.CacheSize, defaultCacheSize),
		MemTableSize:                cmp.Or(opts.MemTableSize, defaultMemTableSize),
		MemTableStopWritesThreshold: 4,
		L0StopWritesThreshold:       24,
	}
	for i := range po.Levels {
		// Reads are range scans: bigger blocks mean fewer block reads.
		po.Levels[i].BlockSize = 32 << 10
	}
	defer func() {
		if r := recover(); r != nil {
			fe, ok := r.(*fatalError)
			if !ok {
				panic(r)
			}
			d, err = nil, fmt.Errorf("journal: open %s: %w", dir, fe)
		}
	}()
	db, err := pebble.Open(dir, po)
	if err != nil {
		return nil, storeError("open", dir, err)
	}
	j.db = db
	if fresh {
		if err := writeMarker(fs, dir, markerText); err != nil {
			_ = db.Close()
			return nil, err
		}
	}
	if err := j.load(); err != nil {
		_ = db.Close()
		return nil, storeError("load", dir, err)
	}
	if err := j.checkHeads(); err != nil {
		_ = db.Close()
		return nil, storeError("check", dir, err)
	}
	if err := j.writeHeads(); err != nil {
		_ = db.Close()
		return nil, err
	}
	d = j
	go d.commitLoop() // the only goroutine; Close closes commits and waits for loopDone
	return d, nil
}

// prepareDir creates dir if needed, checks that it is writable, and tells
// whether the store must be created (fresh) or must exist.
//
// The marker file makes "the store is missing" detectable: Open writes it
// with markerCreating before the store exists and rewrites it (atomically)
// with markerText once the store was created. A complete marker without a
// store is an error, never an empty journal.
func prepareDir(fs vfs.FS, dir string) (fresh bool, err error) {
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return false, fmt.Errorf("journal: create data directory %s: %w", dir, err)
	}
	probe := fs.PathJoin(dir, probeFile)
	f, err := fs.Create(probe, vfs.WriteCategoryUnspecified)
	if err == nil {
		_, err = f.Write([]byte("probe\n"))
		err = errors.Join(err, f.Sync(), f.Close(), fs.Remove(probe))
	}
	if err != nil {
		return false, fmt.Errorf("journal: data directory %s is not writable: %w", dir, err)
	}
	names, err := fs.List(dir)
	if err != nil {
		return false, fmt.Errorf("journal: list data directory %s: %w", dir, err)
	}
	var marked bool
	var others []string
	for _, n := range names {
		switch n {
		case markerFile:
			marked = true
		case probeFile, markerTemp, headsFile, headsTemp, "LOCK":
		default:
			others = append(others, n)
		}
	}
	if !marked {
		if len(others) > 0 {
			return false, fmt.Errorf("journal: data directory %s holds files (%s, ...) but no %s marker: it is not a Conclave journal; refusing to use it",
				dir, others[0], markerFile)
		}
		return true, writeMarker(fs, dir, markerCreating)
	}
	text, err := readMarker(fs, dir)
	if err != nil {
		return false, err
	}
	switch text {
	case markerCreating: // the first Open stopped before the store was complete
		return true, nil
	case markerText:
		return false, nil
	}
	return false, fmt.Errorf("journal: data directory %s: %s has unknown content %q (a newer or damaged journal)", dir, markerFile, text)
}

// writeMarker writes the marker through a temporary file and a rename, so
// it is always either the old or the new content.
func writeMarker(fs vfs.FS, dir, text string) error {
	tmp := fs.PathJoin(dir, markerTemp)
	f, err := fs.Create(tmp, vfs.WriteCategoryUnspecified)
	if err == nil {
		_, err = io.WriteString(f, text)
		err = errors.Join(err, f.Sync(), f.Close())
	}
	if err == nil {
		err = fs.Rename(tmp, fs.PathJoin(dir, markerFile))
	}
	if err == nil {
		var df vfs.File
		if df, err = fs.OpenDir(dir); err == nil {
			err = errors.Join(df.Sync(), df.Close())
		}
	}
	if err != nil {
		return fmt.Errorf("journal: data directory %s: write %s: %w", dir, markerFile, err)
	}
	return nil
}

func readMarker(fs vfs.FS, dir string) (string, error) {
	f, err := fs.Open(fs.PathJoin(dir, markerFile))
	if err != nil {
		return "", fmt.Errorf("journal: data directory %s: read %s: %w", dir, markerFile, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 256))
	if err != nil {
		return "", fmt.Errorf("journal: data directory %s: read %s: %w", dir, markerFile, err)
	}
	return string(b), nil
}

// storeError wraps an error of the store, naming corruption as such.
func storeError(op, dir string, err error) error {
	if pebble.IsCorruptionError(err) || errors.Is(err, errCorrupt) {
		return fmt.Errorf("journal: %s %s: the journal is corrupt: %w", op, dir, err)
	}
	return fmt.Errorf("journal: %s %s: %w", op, dir, err)
}

// errCorrupt marks the inconsistencies the journal itself finds.
var errCorrupt = errors.New("journal: corrupt")

type corruptError struct{ msg string }

func (e *corruptError) Error() string        { return e.msg }
func (e *corruptError) Is(target error) bool { return target == errCorrupt }

func corruptf(format string, args ...any) error {
	return &corruptError{msg: fmt.Sprintf(format, args...)}
}

// load reads every session's first and last seq, and the trim records.
func (d *Durable) load() error {
	it, err := d.db.NewIter(&pebble.IterOptions{LowerBound: []byte{keyEvent}, UpperBound: []byte{keyEvent + 1}})
	if err != nil {
		return err
	}
	for ok := it.First(); ok; {
		id, prefix, seq, err := parseEventKey(it.Key())
		if err != nil {
			_ = it.Close()
			return err
		}
		s := newDurSession(id)
		s.first.Store(seq)
		end := prefixEnd(prefix)
		if !it.SeekLT(end) { // it was just on a key of this session
			err := cmp.Or(it.Error(), corruptf("session %q: last event not found", id))
			_ = it.Close()
			return err
		}
		_, _, last, err := parseEventKey(it.Key())
		if err != nil {
			_ = it.Close()
			return err
		}
		s.head.Store(last)
		d.sessions[id] = s
		ok = it.SeekGE(end)
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return err
	}

	it, err = d.db.NewIter(&pebble.IterOptions{LowerBound: []byte{keyMeta}, UpperBound: []byte{keyMeta + 1}})
	if err != nil {
		return err
	}
	for ok := it.First(); ok; ok = it.Next() {
		id, err := parseMetaKey(it.Key())
		if err != nil {
			_ = it.Close()
			return err
		}
		v, err := it.ValueAndErr()
		if err != nil {
			_ = it.Close()
			return err
		}
		if len(v) != 16 {
			_ = it.Close()
			return corruptf("session %q: trim record of %d bytes", id, len(v))
		}
		first, head := binary.BigEndian.Uint64(v), binary.BigEndian.Uint64(v[8:])
		s := d.sessions[id]
		if s == nil { // every event trimmed
			if first != head+1 {
				_ = it.Close()
				return corruptf("session %q: events %d..%d are missing", id, first, head)
			}
			s = newDurSession(id)
			d.sessions[id] = s
		}
		s.head.Store(max(s.head.Load(), head))
		s.first.Store(max(s.first.Load(), first))
	}
	return errors.Join(it.Error(), it.Close())
}

func newDurSession(id messages.SessionID) *durSession {
	s := &durSession{id: id, prefix: sessionKey(keyEvent, id)}
	s.first.Store(1)
	s.req.done = make(chan error, 1)
	return s
}

func sessionKey(kind byte, id messages.SessionID) []byte {
	k := make([]byte, 0, 1+binary.MaxVarintLen64+len(id)+8)
	k = append(k, kind)
	k = binary.AppendUvarint(k, uint64(len(id)))
	return append(k, id...)
}

func eventKey(dst, prefix []byte, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(append(dst, prefix...), seq)
}

// prefixEnd returns the smallest key greater than every key that starts
// with prefix. The session encoding is prefix-free (length first), so the
// range [prefix, prefixEnd(prefix)) holds exactly one session.
func prefixEnd(prefix []byte) []byte {
	end := slices.Clone(prefix)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil // unreachable: prefixes start with a kind byte < 0xff
}

func parseSessionKey(k []byte, kind byte) (messages.SessionID, int, error) {
	if len(k) < 2 || k[0] != kind {
		return "", 0, corruptf("bad key %x", k)
	}
	n, w := binary.Uvarint(k[1:])
	if w <= 0 || uint64(len(k)-1-w) < n {
		return "", 0, corruptf("bad key %x", k)
	}
	end := 1 + w + int(n)
	return messages.SessionID(k[1+w : end]), end, nil
}

func parseEventKey(k []byte) (id messages.SessionID, prefix []byte, seq uint64, err error) {
	id, end, err := parseSessionKey(k, keyEvent)
	if err != nil {
		return "", nil, 0, err
	}
	if len(k) != end+8 {
		return "", nil, 0, corruptf("bad event key %x", k)
	}
	return id, k[:end], binary.BigEndian.Uint64(k[end:]), nil
}

func parseMetaKey(k []byte) (messages.SessionID, error) {
	id, end, err := parseSessionKey(k, keyMeta)
	if err == nil && end != len(k) {
		err = corruptf("bad trim key %x", k)
	}
	return id, err
}

// lookup returns the session, or nil if it has no state. With create it
// creates the state.
func (d *Durable) lookup(id messages.SessionID, create bool) *durSession {
	d.mu.RLock()
	s := d.sessions[id]
	d.mu.RUnlock()
	if s != nil || !create {
		return s
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if s = d.sessions[id]; s == nil {
		s = newDurSession(id)
		d.sessions[id] = s
	}
	return s
}

// Append implements Journal. It returns when the batch is fsynced (then nil)
// or refused. It waits for the commit even if ctx ends meanwhile: a write
// in flight cannot be taken back, and the wait is bounded by one fsync.
func (d *Durable) Append(ctx context.Context, session messages.SessionID, events []*messages.Encoded) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	d.closeMu.RLock()
	defer d.closeMu.RUnlock()
	if d.closed {
		return ErrClosed
	}
	if len(events) == 0 {
		return nil
	}
	s := d.lookup(session, true)
	s.mu.Lock()
	defer s.mu.Unlock()
	head := s.head.Load()
	for i, e := range events {
		if e.Seq != head+uint64(i)+1 {
			return &SeqError{Session: session, Head: head, Got: e.Seq, Position: i}
		}
	}
	if err := d.failed.Load(); err != nil {
		return *err
	}
	b := d.db.NewBatch()
	for _, e := range events {
		if err := encodeEvent(b, s.prefix, e); err != nil {
			_ = b.Close()
			return fmt.Errorf("journal: session %s: encode seq %d: %w", session, e.Seq, err)
		}
	}
	if err := d.commit(s, b); err != nil {
		return err
	}
	s.head.Store(events[len(events)-1].Seq)
	d.appends.Add(1)
	d.events.Add(uint64(len(events)))
	return nil
}

// commit hands b to the committer and waits for the outcome. The caller
// holds s.mu and closeMu for reading.
func (d *Durable) commit(s *durSession, b *pebble.Batch) error {
	s.req.b = b
	d.commits <- &s.req
	return <-s.req.done
}

func encodeEvent(b *pebble.Batch, prefix []byte, e *messages.Encoded) error {
	typ, run := string(e.Type), string(e.RunID)
	vlen := 1 + uvarintLen(len(typ)) + len(typ) + uvarintLen(len(run)) + len(run) + len(e.JSON)
	op := b.SetDeferred(len(prefix)+8, vlen)
	copy(op.Key, prefix)
	binary.BigEndian.PutUint64(op.Key[len(prefix):], e.Seq)
	v := op.Value
	v[0] = valueFormat1
	n := 1
	n += binary.PutUvarint(v[n:], uint64(len(typ)))
	n += copy(v[n:], typ)
	n += binary.PutUvarint(v[n:], uint64(len(run)))
	n += copy(v[n:], run)
	copy(v[n:], e.JSON)
	return op.Finish()
}

func uvarintLen(n int) int {
	l := 1
	for n >= 0x80 {
		n >>= 7
		l++
	}
	return l
}

// decodeValue splits a stored value into event type, run id and JSON. The
// slices alias v.
func decodeValue(v []byte) (typ, run, data []byte, ok bool) {
	if len(v) < 3 || v[0] != valueFormat1 {
		return nil, nil, nil, false
	}
	v = v[1:]
	tl, w := binary.Uvarint(v)
	if w <= 0 || uint64(len(v)-w) < tl {
		return nil, nil, nil, false
	}
	typ, v = v[w:w+int(tl)], v[w+int(tl):]
	rl, w := binary.Uvarint(v)
	if w <= 0 || uint64(len(v)-w) < rl {
		return nil, nil, nil, false
	}
	return typ, v[w : w+int(rl)], v[w+int(rl):], true
}

// commitLoop is the committer: it merges the batches waiting at the moment
// into one and commits it with one fsync (group commit), then replies to
// each. It returns when Close closes commits.
func (d *Durable) commitLoop() {
	defer close(d.loopDone)
	group := make([]*commitReq, 0, 64)
	for req := range d.commits {
		group = append(group[:0], req)
		size := req.b.Len()
	gather:
		for size < maxGroupBytes {
			select {
			case r, ok := <-d.commits:
				if !ok {
					break gather
				}
				group = append(group, r)
				size += r.b.Len()
			default:
				break gather
			}
		}
		err := d.commitGroup(group)
		for _, r := range group {
			r.b = nil
			r.done <- err
		}
		clear(group)
	}
}

func (d *Durable) commitGroup(group []*commitReq) (err error) {
	defer func() {
		for _, r := range group {
			_ = r.b.Close()
		}
	}()
	if f := d.failed.Load(); f != nil {
		return *f
	}
	b := group[0].b
	for _, r := range group[1:] {
		if err := b.Apply(r.b, nil); err != nil {
			return d.fail(err)
		}
	}
	if err := d.commitSafely(b); err != nil {
		return d.fail(err)
	}
	d.commitCount.Add(1)
	return nil
}

// commitSafely commits b with fsync, turning the store's fatal error (see
// pebbleLogger.Fatalf) into an error.
func (d *Durable) commitSafely(b *pebble.Batch) (err error) {
	defer func() {
		if r := recover(); r != nil {
			if fe, ok := r.(*fatalError); ok {
				err = fe
				return
			}
			d.poisoned.Store(true)
			err = fmt.Errorf("journal: store panicked: %v", r)
		}
	}()
	return b.Commit(pebble.Sync)
}

// fail records the first write failure; every later write returns it.
func (d *Durable) fail(cause error) error {
	err := fmt.Errorf("%w: %s: %w", ErrWriteFailed, d.dir, cause)
	if d.failed.CompareAndSwap(nil, &err) {
		d.log.Error("journal: write failed; refusing writes until restart", "dir", d.dir, "err", cause)
		return err
	}
	return *d.failed.Load()
}

// ReadAfter implements Journal. The events of one call share one backing
// array for their JSON, so an event kept alive keeps its page alive.
func (d *Durable) ReadAfter(ctx context.Context, session messages.SessionID, after uint64, limit int) ([]*messages.Encoded, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	d.closeMu.RLock()
	defer d.closeMu.RUnlock()
	if d.closed {
		return nil, ErrClosed
	}
	s := d.lookup(session, false)
	if s == nil || limit <= 0 {
		return nil, nil
	}
	head := s.head.Load() // before first: Trim raises first before it deletes
	from := max(after+1, s.first.Load())
	if from > head {
		return nil, nil
	}
	to := min(head, from+uint64(limit)-1)
	n := int(to - from + 1)

	bounds := make([]byte, 0, 2*(len(s.prefix)+8))
	bounds = eventKey(bounds, s.prefix, from)
	lower := bounds[:len(bounds):len(bounds)]
	upper := eventKey(bounds[len(bounds):], s.prefix, to+1)
	it, err := d.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return nil, err
	}
	defer it.Close()

	// Events and their JSON are allocated in chunks, not one by one; the
	// chunks are capped so a huge limit allocates only what is read.
	const encChunk = 1024
	encs := make([]messages.Encoded, min(n, encChunk))
	out := make([]*messages.Encoded, 0, min(n, 16*encChunk))
	slab := make([]byte, 0, min(n*384, 256<<10))
	var run messages.RunID
	want := from
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		seq := binary.BigEndian.Uint64(k[len(k)-8:])
		if seq != want && !(len(out) == 0 && seq > want && seq <= s.first.Load()) {
			// A jump is legal only at the start, over events trimmed meanwhile.
			return nil, storeError("read", d.dir, corruptf("session %s: seq %d missing (found %d)", session, want, seq))
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return nil, storeError("read", d.dir, err)
		}
		typ, runb, data, ok := decodeValue(v)
		if !ok {
			return nil, storeError("read", d.dir, corruptf("session %s: seq %d: bad value", session, seq))
		}
		if len(slab)+len(data) > cap(slab) {
			slab = make([]byte, 0, max(len(data), 256<<10))
		}
		start := len(slab)
		slab = append(slab, data...)
		if string(runb) != string(run) {
			run = messages.RunID(runb)
		}
		if len(encs) == 0 {
			encs = make([]messages.Encoded, min(n-len(out), encChunk))
		}
		e := &encs[0]
		encs = encs[1:]
		e.Seq, e.Type, e.RunID, e.JSON = seq, internType(typ), run, slab[start:len(slab):len(slab)]
		out = append(out, e)
		want = seq + 1
	}
	if err := it.Error(); err != nil {
		return nil, storeError("read", d.dir, err)
	}
	if want <= to && s.first.Load() <= want {
		return nil, storeError("read", d.dir, corruptf("session %s: seq %d missing (journal ends at %d)", session, want, want-1))
	}
	return out, nil
}

// eventTypes interns the known event types, so reads allocate no string
// for them (a map lookup with string(b) does not allocate).
var eventTypes = func() map[string]messages.EventType {
	m := make(map[string]messages.EventType)
	for _, t := range messages.EventTypes() {
		m[string(t)] = t
	}
	return m
}()

func internType(b []byte) messages.EventType {
	if t, ok := eventTypes[string(b)]; ok {
		return t
	}
	return messages.EventType(b)
}

// Head implements Journal.
func (d *Durable) Head(_ context.Context, session messages.SessionID) (uint64, error) {
	d.closeMu.RLock()
	defer d.closeMu.RUnlock()
	if d.closed {
		return 0, ErrClosed
	}
	if s := d.lookup(session, false); s != nil {
		return s.head.Load(), nil
	}
	return 0, nil
}

// First implements Journal.
func (d *Durable) First(_ context.Context, session messages.SessionID) (uint64, error) {
	d.closeMu.RLock()
	defer d.closeMu.RUnlock()
	if d.closed {
		return 0, ErrClosed
	}
	s := d.lookup(session, false)
	if s == nil || s.head.Load() == 0 {
		return 0, nil
	}
	return s.first.Load(), nil
}

// Trim implements Journal. It deletes with one range tombstone and records
// the new first seq and the head in the same synced batch.
func (d *Durable) Trim(ctx context.Context, session messages.SessionID, before uint64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	d.closeMu.RLock()
	defer d.closeMu.RUnlock()
	if d.closed {
		return ErrClosed
	}
	s := d.lookup(session, false)
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	head, first := s.head.Load(), s.first.Load()
	before = min(before, head+1)
	if head == 0 || before <= first {
		return nil
	}
	if err := d.failed.Load(); err != nil {
		return *err
	}
	b := d.db.NewBatch()
	var meta [16]byte
	binary.BigEndian.PutUint64(meta[:], before)
	binary.BigEndian.PutUint64(meta[8:], head)
	err := errors.Join(
		b.DeleteRange(eventKey(nil, s.prefix, 0), eventKey(nil, s.prefix, before), nil),
		b.Set(sessionKey(keyMeta, session), meta[:], nil),
	)
	if err != nil {
		_ = b.Close()
		return fmt.Errorf("journal: session %s: trim: %w", session, err)
	}
	// Readers skip the doomed events from now on; raising first before
	// the delete is visible keeps ReadAfter's gap check exact.
	s.first.Store(before)
	return d.commit(s, b)
}

// Sessions implements Journal.
func (d *Durable) Sessions(ctx context.Context) ([]messages.SessionID, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	d.closeMu.RLock()
	defer d.closeMu.RUnlock()
	if d.closed {
		return nil, ErrClosed
	}
	d.mu.RLock()
	out := make([]messages.SessionID, 0, len(d.sessions))
	for id, s := range d.sessions {
		if s.head.Load() > 0 {
			out = append(out, id)
		}
	}
	d.mu.RUnlock()
	slices.Sort(out)
	return out, nil
}

// ApplyRetention trims session according to r; see the package function
// ApplyRetention.
func (d *Durable) ApplyRetention(ctx context.Context, session messages.SessionID, r Retention, now time.Time) (trimmed uint64, err error) {
	return ApplyRetention(ctx, d, session, r, now)
}

// Stats returns counters since Open.
func (d *Durable) Stats() DurableStats {
	return DurableStats{Appends: d.appends.Load(), Events: d.events.Load(), Commits: d.commitCount.Load()}
}

// Dir returns the data directory.
func (d *Durable) Dir() string { return d.dir }

// Close implements Journal: it waits for the appends in flight, stops the
// committer and closes the store (acknowledged batches are already in the
// fsynced WAL). It is idempotent. It returns the write failure, if any.
func (d *Durable) Close() (err error) {
	d.closeMu.Lock()
	defer d.closeMu.Unlock()
	if d.closed {
		return nil
	}
	d.closed = true
	close(d.commits)
	<-d.loopDone
	if d.poisoned.Load() {
		return fmt.Errorf("journal: %s: store left unclosed after a panic: %w", d.dir, *d.failed.Load())
	}
	var headsErr error
	if d.failed.Load() == nil {
		headsErr = d.writeHeads()
	}
	defer func() {
		if r := recover(); r != nil {
			fe, ok := r.(*fatalError)
			if !ok {
				panic(r)
			}
			err = fmt.Errorf("journal: close %s: %w", d.dir, fe)
		}
	}()
	if err := d.db.Close(); err != nil {
		return fmt.Errorf("journal: close %s: %w", d.dir, err)
	}
	return headsErr
}

// writeHeads records every session's head in headsFile (atomically: a
// temporary file, fsync, rename, directory fsync). Format: headsFormat,
// then per session uvarint(len(id)) id uvarint(head), then the CRC-32C of
// everything before it.
func (d *Durable) writeHeads() error {
	d.mu.RLock()
	b := []byte(headsFormat)
	for id, s := range d.sessions {
		if h := s.head.Load(); h > 0 {
			b = binary.AppendUvarint(b, uint64(len(id)))
			b = append(b, id...)
			b = binary.AppendUvarint(b, h)
		}
	}
	d.mu.RUnlock()
	b = binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
	fs, tmp := d.fs, d.fs.PathJoin(d.dir, headsTemp)
	f, err := fs.Create(tmp, vfs.WriteCategoryUnspecified)
	if err == nil {
		_, err = f.Write(b)
		err = errors.Join(err, f.Sync(), f.Close())
	}
	if err == nil {
		err = fs.Rename(tmp, fs.PathJoin(d.dir, headsFile))
	}
	if err == nil {
		var df vfs.File
		if df, err = fs.OpenDir(d.dir); err == nil {
			err = errors.Join(df.Sync(), df.Close())
		}
	}
	if err != nil {
		return fmt.Errorf("journal: %s: write %s: %w", d.dir, headsFile, err)
	}
	return nil
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// checkHeads fails if a session recorded in headsFile is missing or behind.
// A missing file (a journal that never completed an Open) passes.
func (d *Durable) checkHeads() error {
	f, err := d.fs.Open(d.fs.PathJoin(d.dir, headsFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	b, err := io.ReadAll(f)
	_ = f.Close()
	if err != nil {
		return err
	}
	if len(b) < len(headsFormat)+4 || string(b[:len(headsFormat)]) != headsFormat ||
		crc32.Checksum(b[:len(b)-4], castagnoli) != binary.BigEndian.Uint32(b[len(b)-4:]) {
		return corruptf("%s is damaged", headsFile)
	}
	for r := b[len(headsFormat) : len(b)-4]; len(r) > 0; {
		n, w := binary.Uvarint(r)
		if w <= 0 || uint64(len(r)-w) < n {
			return corruptf("%s is damaged", headsFile)
		}
		id := messages.SessionID(r[w : w+int(n)])
		r = r[w+int(n):]
		h, w := binary.Uvarint(r)
		if w <= 0 {
			return corruptf("%s is damaged", headsFile)
		}
		r = r[w:]
		var have uint64
		if s := d.sessions[id]; s != nil {
			have = s.head.Load()
		}
		if have < h {
			return corruptf("session %s: the store ends at seq %d, but seq %d was acknowledged (store files lost or damaged)", id, have, h)
		}
	}
	return nil
}

// fatalError is what pebbleLogger.Fatalf panics with.
type fatalError struct {
	msg   string
	cause error // the first error among Fatalf's arguments
}

func (e *fatalError) Error() string { return e.msg }
func (e *fatalError) Unwrap() error { return e.cause }

// pebbleLogger adapts slog to pebble.Logger.
type pebbleLogger struct{ l *slog.Logger }

func (p pebbleLogger) Infof(format string, args ...any) {
	p.l.Debug("journal: " + fmt.Sprintf(format, args...))
}

func (p pebbleLogger) Errorf(format string, args ...any) {
	p.l.Error("journal: " + fmt.Sprintf(format, args...))
}

// Fatalf must not return. Pebble calls it for a failed commit (on the
// committing goroutine, where commitSafely recovers it) and for broken
// invariants (anywhere; then the panic ends the process, as Pebble's
// default logger would).
func (p pebbleLogger) Fatalf(format string, args ...any) {
	fe := &fatalError{msg: fmt.Sprintf(format, args...)}
	for _, a := range args {
		if err, ok := a.(error); ok {
			fe.cause = err
			break
		}
	}
	p.l.Error("journal: store fatal error", "err", fe.msg)
	panic(fe)
}

// eventListener logs the store's events. A background write (flush,
// compaction) that fails for lack of space fails the journal: its WAL may
// still have preallocated room, and without this Append would block on a
// write stall instead of reporting the full disk.
func (d *Durable) eventListener() *pebble.EventListener {
	log := d.log
	return &pebble.EventListener{
		BackgroundError: func(err error) {
			log.Error("journal: background error", "dir", d.dir, "err", err)
			if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
				_ = d.fail(err)
			}
		},
		// The read that found the damage returns it as an error too; the
		// default handler would end the process.
		DataCorruption: func(info pebble.DataCorruptionInfo) {
			log.Error("journal: data corruption", "path", info.Path, "err", info.Details)
		},
		DiskSlow: func(info pebble.DiskSlowInfo) {
			log.Warn("journal: disk slow", "path", info.Path, "op", info.OpType.String(), "duration", info.Duration)
		},
		LowDiskSpace: func(info pebble.LowDiskSpaceInfo) {
			log.Warn("journal: low disk space", "dir", d.dir, "available_bytes", info.AvailBytes, "total_bytes", info.TotalBytes)
		},
		WriteStallBegin: func(info pebble.WriteStallBeginInfo) {
			log.Warn("journal: write stall", "dir", d.dir, "reason", info.Reason)
		},
		WriteStallEnd: func() { log.Info("journal: write stall ended", "dir", d.dir) },
	}
}
