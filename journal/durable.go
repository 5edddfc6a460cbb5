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
// Integrity (record checksums and chain, the high-water mark log, the
// catalogue) measured against the code before it in one sitting, the two
// test binaries alternating per case, 2 s runs, 3 each (the machine was
// shared: load 2-4.6 on 2 cores, so the spread is wide): events/s median
// before -> after, sessions x batch: 1 x 1 4.8k -> 5.2k; 16 x 64 667k ->
// 628k; 64 x 64 827k -> 774k; 1 x 512 1.17M -> 0.94M; 16 x 512 821k ->
// 796k; 64 x 512 939k -> 899k; geomean of the nine cases -5.9%, no case
// significant (benchstat p >= 0.1). Where it goes (CPU profiles): the
// CRC-32C of each record, ~100 ns per 300-byte event on the appending
// goroutine (3% of CPU at 64 x 64, 6.5% at 1 x 512, where one session's
// encode and commit do not overlap); the heads write after each group,
// 0.35% (one write(2), no fsync); reservations, one fsync per 65,536
// events of a session. Open verifies the records stored since the previous
// Open: 1M events (16 sessions) in 210 ms, 5 ms when none are new
// (BenchmarkDurable_Open).
//
// Layout. Keys start with a kind byte:
//
//	'e' uvarint(len(session)) session seq(8)   an event (record.go: format 2 carries a checksum and the chain)
//	'm' uvarint(len(session)) session          first(8) head(8) and the ranges lost to repairs, written by
//	                                            Trim and Repair so the head survives (seqs are never reused)
//	'r' uvarint(len(run)) run                  the run catalogue: session, order, first and last seq
//	'o' order(8), 'x' uvarint(len(scope)) scope order(8), 'l' order(8)
//	                                            indexes of the runs by append order: all, by scope, live
//	'u' uvarint(len(run)) run                  a run's summary
//
// A session's events are one contiguous, ordered key range, and their value
// holds the event type and run id before the envelope JSON, so reads need no
// JSON decoding. Every value other than an event's is sealed (record.go).
// Beside the store: the marker file, the high-water mark log and the floor
// log (hwm.go).
//
// Group commit. Append encodes its batch on the caller's goroutine and hands
// it to one commit goroutine, which merges every batch waiting at that
// moment into one Pebble batch and commits it with one fsync. While that
// fsync runs, the next group gathers. One committer (instead of Pebble's own
// concurrent commit pipeline) also makes a failed write safe to report:
// Pebble treats a failed WAL write as fatal (it calls Logger.Fatalf, which
// by default exits the process); here Fatalf panics with a *fatalError that
// the committer recovers into an error for every batch of the group, and no
// other goroutine is inside Pebble's commit path at that moment. Before the
// commit the committer fsyncs a reservation for every session of the group
// whose new head passes its reservation (rare), after it appends the new
// heads to the high-water mark log (a write, no fsync).

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/conclave-ai/conclave/internal/regress"
	"github.com/conclave-ai/conclave/messages"
)

const (
	// markerFile marks a directory as a Conclave journal. Open refuses a
	// non-empty directory without it, and with it requires the store to
	// exist, so a journal whose files were lost is an error instead of a
	// silently empty journal. Its content is the journal's format: 1 (no
	// checksums, no catalogue, headsFile) is migrated to 2 at Open.
	markerFile     = "CONCLAVE-JOURNAL"
	markerText1    = "conclave journal 1\n"
	markerText2    = "conclave journal 2\n"
	markerCreating = "conclave journal 1 (creating)\n"
	markerTemp     = markerFile + ".tmp"
	// headsFile is format 1's record of every session's head (written at
	// Open and Close). Open reads it once, when it migrates a journal to
	// format 2, and removes it; hwmFile replaces it.
	headsFile   = "CONCLAVE-JOURNAL-HEADS"
	headsTemp   = headsFile + ".tmp"
	headsFormat = "conclave journal heads 1\n"
	probeFile   = ".conclave-write-probe"
	// damagedPrefix names the copy Repair keeps of a write-ahead log it
	// had to cut short.
	damagedPrefix = "CONCLAVE-JOURNAL-DAMAGED-"

	keyEvent   byte = 'e'
	keyMeta    byte = 'm'
	keyRun     byte = 'r'
	keyOrder   byte = 'o'
	keyScope   byte = 'x'
	keyLive    byte = 'l'
	keySummary byte = 'u'

	// maxSessionKey bounds a session key (it goes into every key and into
	// the high-water mark frames).
	maxSessionKey = 1024

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
	// at debug level), and what Open verified, migrated or repaired.
	// Default: discard.
	Logger *slog.Logger
	// CacheSize is the block cache size in bytes. Default 64 MiB.
	CacheSize int64
	// MemTableSize is the size of one memtable in bytes. Default 64 MiB;
	// up to four may be in memory while they are flushed.
	MemTableSize uint64
	// Repair makes Open repair a damaged journal instead of failing with a
	// *DamageError: each damaged session is truncated to its last intact
	// event, what was lost is logged (Warn) per session, and the session's
	// head is set to the highest seq it ever acknowledged or reserved, so
	// the next Append must use a seq above anything ever acknowledged. A
	// write-ahead log the store cannot replay to its end is cut at its last
	// intact record (a copy of it is kept as CONCLAVE-JOURNAL-DAMAGED-*),
	// and a damaged or missing high-water mark or floor log is rebuilt
	// from the store. When the high-water mark log is not intact, what was
	// acknowledged is unknown: every session's head goes to its
	// reservation in the floor log (or in what is left of either log) and,
	// with neither log intact, 2^32 above its stored head (check.go,
	// raiseToFloor). Without damage, Repair changes nothing.
	Repair bool
	// FS replaces the OS filesystem: pebble's vfs.NewCrashableMem for a
	// journal in memory that can lose its unsynced tail (testkit/sim's
	// crashes), errorfs for failing writes and fsyncs. Default vfs.Default.
	FS vfs.FS
	// IdleAfter is how long a session may go unused (no append, trim or
	// read) before its in-memory state leaves memory (idle.go): between
	// once and twice this long, if it has no live run; its next use loads
	// it from the store. Default DefaultIdleAfter; negative: sessions stay
	// in memory (what testkit/sim needs: leaving flushes the memtable,
	// which rotates the WAL on a background goroutine of the store).
	IdleAfter time.Duration
	// WatchEvery is how often the journal checks that its data directory
	// is still there (its marker file, by a stat): a directory removed
	// under a running server fails the journal within this period, even
	// when nothing is written (the store's files stay open, so writes
	// would go on into deleted files). Default DefaultWatchEvery;
	// negative: no check (testkit/sim, whose disk is in memory).
	WatchEvery time.Duration
}

// DefaultWatchEvery is Options.WatchEvery's default.
const DefaultWatchEvery = time.Second

// DurableStats counts the work of a Durable journal since Open.
type DurableStats struct {
	Appends      uint64 // batches acknowledged
	Events       uint64 // events acknowledged
	Commits      uint64 // store commits (groups of batches); one WAL fsync each, unless only summaries
	Reservations uint64 // reservation records fsynced to the high-water mark log
	Evicted      uint64 // sessions that left memory idle (idle.go)
	Lookups      uint64 // sessions not in memory looked for in the store (found or not)
	InMemory     int    // sessions in memory now
}

// Durable is a Journal and Catalog on disk. See the package doc for when an
// event is acknowledged. Create it with Open.
type Durable struct {
	dir  string
	fs   vfs.FS
	db   *pebble.DB
	lock *pebble.Lock
	log  *slog.Logger

	// closeMu is held for reading by every method while it uses db or sends
	// to commits, and for writing by Close, so neither happens after Close.
	// Lock order: closeMu, then durSession.mu, then orderMu, then mu and
	// catMu.
	closeMu sync.RWMutex
	closed  bool // guarded by closeMu

	mu       sync.RWMutex // guards the sessions map (not the sessions) and evictGen
	sessions map[messages.SessionID]*durSession
	evictGen uint64 // counts the states that left memory (idle.go)
	absent   absentSessions

	// orderMu is held by an Append that starts runs from the moment it
	// numbers them until its batch is queued for the committer, so that
	// runs are committed in the order of their numbers.
	orderMu   sync.Mutex
	lastOrder uint64 // guarded by orderMu

	catMu sync.RWMutex // guards live
	live  map[messages.RunID]*liveRun

	commits  chan *commitReq // to commitLoop; closed by Close
	loopDone chan struct{}   // closed when commitLoop returns
	failed   atomic.Pointer[error]
	// failedCh is closed with the first failure (fail): what Append and
	// Close wait on besides the committer, and what Failed returns.
	failedCh   chan struct{}
	failedOnce sync.Once
	// poisoned is set when the store panicked with something other than
	// a *fatalError, or a goroutine of it is parked in Fatalf (parked is
	// closed then): it may hold its own locks, so nothing may call it.
	poisoned   atomic.Bool
	parked     chan struct{}
	parkedOnce sync.Once
	// opened is set when Open returns: from then on the store's Fatalf
	// parks its goroutine instead of panicking (see pebbleLogger.Fatalf).
	opened atomic.Bool

	// watchLoop's stop and done channels (nil without a watch).
	watchStop, watchDone chan struct{}
	watchOnce            sync.Once

	// Owned by the committer (by Open before it starts, by Close after it
	// ended).
	hwm     *hwmLog
	floor   *hwmLog // the second copy of the reservations (hwm.go)
	hwmBuf  []hwmEntry
	hwmErrs int

	appends, events, commitCount, reservations atomic.Uint64

	// Idle sessions (idle.go): evictLoop's stop and done channels (nil
	// when sessions stay in memory).
	idleAfter            time.Duration
	epoch                atomic.Int64 // evictor passes so far
	evictStop, evictDone chan struct{}
	stopOnce             sync.Once
	evictions            atomic.Uint64
	lookups              atomic.Uint64 // sessions looked for in the store
}

// durSession is the in-memory state of one session.
type durSession struct {
	id     messages.SessionID
	prefix []byte // keyEvent uvarint(len(id)) id

	// mu serialises the writes (Append, Trim) of this session, and guards
	// req, whose done channel each write reuses, and the fields below it.
	mu      sync.Mutex
	req     commitReq
	lastSum uint32                    // sum of the last stored record (0: none, or format 1)
	live    map[messages.RunID]uint64 // the session's runs that have not ended: seq of their run_started

	head  atomic.Uint64 // last acknowledged seq
	first atomic.Uint64 // oldest seq readers may get (1 until trimmed)
	// gaps are the ranges lost to repairs, sorted, none below first
	// (immutable slices, replaced by Trim).
	gaps atomic.Pointer[[]span]

	// Owned by the committer: what the high-water mark log says.
	acked, reserved, verified uint64

	lastUse atomic.Int64 // the evictor's epoch at its last append, trim or read (idle.go)
	evicted bool         // guarded by mu: this state left memory; look the session up again
}

// span is a range of seqs, both ends included.
type span struct{ from, to uint64 }

// liveRun is a run without a terminal event, in the catalogue's memory.
type liveRun struct {
	info  RunInfo // without its summary
	order uint64
}

// commitReq is one batch waiting for the committer.
type commitReq struct {
	b    *pebble.Batch
	s    *durSession // nil for a summary
	last uint64      // the session's head once the batch is committed; 0 if it appends no event
	sync bool        // needs the fsync (all but summaries)
	done chan error  // buffered (1): the committer never blocks on a reply
}

var (
	_ Journal = (*Durable)(nil)
	_ Catalog = (*Durable)(nil)
)

// Open opens the journal in dir, creating dir and an empty journal if dir
// does not exist or is empty. It fails with a clear error, and never starts
// empty, when dir is not writable, holds files that are not a journal, or
// holds a journal that is incomplete or corrupt; with ErrLocked when another
// process uses dir; and with a *DamageError when acknowledged events were
// lost or garbled (see Options.Repair).
//
// Open verifies the records each session stored since the previous Open
// (about 0.2 s per million events on the dev machine; see the file comment)
// and compares every session's head with the high-water mark log.
func Open(dir string, opts Options) (d *Durable, err error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	fs := opts.FS
	if fs == nil {
		fs = vfs.Default
	}
	if err := checkDir(fs, dir); err != nil {
		return nil, err
	}
	lock, err := lockDir(fs, dir)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = lock.Close()
		}
	}()
	format, err := prepareDir(fs, dir)
	if err != nil {
		return nil, err
	}
	j := &Durable{
		dir: dir, fs: fs, log: log, lock: lock,
		idleAfter: cmp.Or(opts.IdleAfter, DefaultIdleAfter),
		sessions:  make(map[messages.SessionID]*durSession),
		live:      make(map[messages.RunID]*liveRun),
		commits:   make(chan *commitReq, commitQueue),
		loopDone:  make(chan struct{}),
		failedCh:  make(chan struct{}),
		parked:    make(chan struct{}),
	}
	po := &pebble.Options{
		FS:                          fs,
		Lock:                        lock,
		Logger:                      pebbleLogger{l: log, d: j},
		EventListener:               j.eventListener(),
		FormatMajorVersion:          pebble.FormatTableFormatV6,
		ErrorIfNotExists:            format != 0,
		CacheSize:                   cmp.Or(opts.CacheSize, defaultCacheSize),
		MemTableSize:                cmp.Or(opts.MemTableSize, defaultMemTableSize),
		MemTableStopWritesThreshold: 4,
		L0StopWritesThreshold:       24,
	}
	for i := range po.Levels {
		// Reads are range scans: bigger blocks mean fewer block reads.
		po.Levels[i].BlockSize = 32 << 10
		// Whole-key bloom filters make a point look-up of an absent key
		// cheap: how loadSession learns that a session is new (idle.go).
		po.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
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
	db, walDamage, err := j.openStore(po, opts.Repair)
	if err != nil {
		return nil, err
	}
	j.db = db
	if err := j.recover(format, opts.Repair, walDamage); err != nil {
		_ = db.Close()
		if j.hwm != nil {
			_ = j.hwm.Close()
		}
		if j.floor != nil {
			_ = j.floor.Close()
		}
		return nil, err
	}
	d = j
	go d.commitLoop() // Close closes commits and waits for loopDone
	if d.idleAfter > 0 {
		d.evictStop, d.evictDone = make(chan struct{}), make(chan struct{})
		// A pass every IdleAfter: each flushes the memtable (when a session
		// is idle), which costs the store a small table to compact.
		go d.evictLoop(d.idleAfter) // Close closes evictStop and waits for evictDone
	}
	if every := cmp.Or(opts.WatchEvery, DefaultWatchEvery); every > 0 {
		d.watchStop, d.watchDone = make(chan struct{}), make(chan struct{})
		go d.watchLoop(every) // Close closes watchStop and waits for watchDone
	}
	d.opened.Store(true)
	return d, nil
}

// watchLoop checks every period that the data directory still holds the
// journal's marker, and fails the journal when it does not.
func (d *Durable) watchLoop(every time.Duration) {
	defer close(d.watchDone)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-d.watchStop:
			return
		case <-d.failedCh:
			return // nothing more to find
		case <-t.C:
			if _, err := d.fs.Stat(d.fs.PathJoin(d.dir, markerFile)); err != nil {
				_ = d.fail(fmt.Errorf("the data directory lost its %s marker (removed or replaced under the server?): %w", markerFile, err))
			}
		}
	}
}

// stopWatch stops watchLoop and waits for it. Idempotent.
func (d *Durable) stopWatch() {
	if d.watchStop == nil {
		return
	}
	d.watchOnce.Do(func() { close(d.watchStop) })
	<-d.watchDone
}

// Failed returns a channel closed when the journal fails (a write or an
// fsync failed, or its data directory is gone): it then refuses every
// write until it is opened again. Err says why.
func (d *Durable) Failed() <-chan struct{} { return d.failedCh }

// Err returns the journal's failure, nil while it accepts writes.
func (d *Durable) Err() error {
	if f := d.failed.Load(); f != nil {
		return *f
	}
	return nil
}

// checkDir creates dir if needed and checks, without writing into it, that
// it is writable and is a journal or empty.
func checkDir(fs vfs.FS, dir string) error {
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("journal: create data directory %s: %w", dir, err)
	}
	names, err := fs.List(dir)
	if err != nil {
		return fmt.Errorf("journal: list data directory %s: %w", dir, err)
	}
	var marked bool
	var others []string
	for _, n := range names {
		switch n {
		case markerFile:
			marked = true
		case probeFile, markerTemp, headsFile, headsTemp, hwmFile, hwmTemp, floorFile, floorTemp, "LOCK":
		default:
			others = append(others, n)
		}
	}
	if !marked && len(others) > 0 {
		return fmt.Errorf("journal: data directory %s holds files (%s, ...) but no %s marker: it is not a Conclave journal; refusing to use it",
			dir, others[0], markerFile)
	}
	probe := fs.PathJoin(dir, probeFile)
	f, err := fs.Create(probe, vfs.WriteCategoryUnspecified)
	if err == nil {
		_, err = f.Write([]byte("probe\n"))
		err = errors.Join(err, f.Sync(), f.Close(), fs.Remove(probe))
	}
	if err != nil {
		return fmt.Errorf("journal: data directory %s is not writable: %w", dir, err)
	}
	return nil
}

// lockedError is what Open returns when dir is in use.
type lockedError struct {
	dir   string
	cause error
}

func (e *lockedError) Error() string {
	return fmt.Sprintf("journal: data directory %s is in use by another conclave server (%v)", e.dir, e.cause)
}
func (e *lockedError) Is(target error) bool { return target == ErrLocked }
func (e *lockedError) Unwrap() error        { return e.cause }

// lockDir takes the store's lock (its LOCK file) for the whole life of the
// journal, before Open writes anything into dir. The lock is an fcntl lock:
// the kernel drops it when the process dies, kill -9 included.
func lockDir(fs vfs.FS, dir string) (*pebble.Lock, error) {
	lock, err := pebble.LockDirectory(dir, fs)
	if err == nil {
		return lock, nil
	}
	// Another process: EAGAIN or EACCES (fcntl); this process: the vfs
	// keeps its own table and says so.
	if errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EACCES) || err.Error() == "lock held by current process" {
		return nil, &lockedError{dir: dir, cause: err}
	}
	return nil, fmt.Errorf("journal: lock data directory %s: %w", dir, err)
}

// prepareDir reads the marker and returns the journal's format, 0 if the
// store must be created.
//
// The marker file makes "the store is missing" detectable: Open writes it
// with markerCreating before the store exists and rewrites it (atomically)
// with the format once the store was created. A complete marker without a
// store is an error, never an empty journal.
func prepareDir(fs vfs.FS, dir string) (format int, err error) {
	if _, err := fs.Stat(fs.PathJoin(dir, markerFile)); isNotExist(err) {
		return 0, writeMarker(fs, dir, markerCreating)
	}
	text, err := readMarker(fs, dir)
	if err != nil {
		return 0, err
	}
	switch text {
	case markerCreating: // the first Open stopped before the store was complete
		return 0, nil
	case markerText1:
		return 1, nil
	case markerText2:
		return 2, nil
	}
	return 0, fmt.Errorf("journal: data directory %s: %s has unknown content %q (a newer or damaged journal)", dir, markerFile, text)
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
		err = syncDir(fs, dir)
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
	if pebble.IsCorruptionError(err) || errors.Is(err, ErrCorrupt) {
		return fmt.Errorf("journal: %s %s: the journal is corrupt: %w", op, dir, err)
	}
	return fmt.Errorf("journal: %s %s: %w", op, dir, err)
}

// corruptError is an inconsistency the journal finds outside an event.
type corruptError struct{ msg string }

func (e *corruptError) Error() string        { return e.msg }
func (e *corruptError) Is(target error) bool { return target == ErrCorrupt }

func corruptf(format string, args ...any) error {
	return &corruptError{msg: fmt.Sprintf(format, args...)}
}

func newDurSession(id messages.SessionID) *durSession {
	s := &durSession{id: id, prefix: sessionKey(keyEvent, id)}
	s.first.Store(1)
	s.gaps.Store(&[]span{})
	s.req.done = make(chan error, 1)
	s.req.s = s
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

// Append implements Journal. It returns when the batch is fsynced (then nil)
// or refused. It waits for the commit even if ctx ends meanwhile: a write
// in flight cannot be taken back, and the wait is bounded by one fsync.
// Session keys longer than 1024 bytes are refused.
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
	if len(session) > maxSessionKey {
		return fmt.Errorf("journal: session key of %d bytes: longer than %d", len(session), maxSessionKey)
	}
	s, err := d.lockSession(session, true)
	if err != nil {
		return err
	}
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
	sum := s.lastSum
	for _, e := range events {
		var err error
		if sum, err = encodeEvent(b, s.prefix, sum, e); err != nil {
			_ = b.Close()
			return fmt.Errorf("journal: session %s: encode seq %d: %w", session, e.Seq, err)
		}
	}
	req := &s.req
	req.b, req.last, req.sync = b, events[len(events)-1].Seq, true
	var cat catalogUpdate
	if changes := runChanges(events); len(changes) > 0 {
		var err error
		if cat, err = d.catalogBatch(b, s, changes); err != nil {
			_ = b.Close()
			return err
		}
	}
	err = d.send(req)
	if cat.ordered {
		d.orderMu.Unlock() // taken by catalogBatch
	}
	if err == nil {
		err = d.wait(req)
	}
	if err != nil {
		return err
	}
	s.lastSum = sum
	s.head.Store(req.last)
	d.touch(s)
	if len(cat.started)+len(cat.ended) > 0 {
		d.applyCatalog(s, cat)
	}
	d.appends.Add(1)
	d.events.Add(uint64(len(events)))
	return nil
}

// commit hands b to the committer and waits for the outcome. The caller
// holds s.mu and closeMu for reading.
func (d *Durable) commit(s *durSession, b *pebble.Batch) error {
	s.req.b, s.req.last, s.req.sync = b, 0, true
	return d.queue(&s.req)
}

// queue hands req to the committer and waits for its outcome, or for the
// journal's failure: a committer parked in the store (pebbleLogger.Fatalf)
// never answers. After a failure req may still be the committer's, but no
// write uses its session's req again: every write checks d.failed first.
func (d *Durable) queue(req *commitReq) error {
	if err := d.send(req); err != nil {
		return err
	}
	return d.wait(req)
}

// send hands req to the committer (see queue).
func (d *Durable) send(req *commitReq) error {
	select {
	case d.commits <- req:
		return nil
	case <-d.failedCh:
		_ = req.b.Close()
		return d.Err()
	}
}

// wait waits for req's outcome (see queue).
func (d *Durable) wait(req *commitReq) error {
	select {
	case err := <-req.done:
		return err
	case <-d.failedCh:
		select {
		case err := <-req.done: // answered as the journal failed: the answer counts
			return err
		default:
			return d.Err()
		}
	}
}

// encodeEvent adds e's record, chained to prev, to b and returns its sum.
func encodeEvent(b *pebble.Batch, prefix []byte, prev uint32, e *messages.Encoded) (uint32, error) {
	typ, run := string(e.Type), string(e.RunID)
	op := b.SetDeferred(len(prefix)+8, recordLen(typ, run, len(e.JSON)))
	copy(op.Key, prefix)
	binary.BigEndian.PutUint64(op.Key[len(prefix):], e.Seq)
	sum := putRecord(op.Value, op.Key, prev, typ, run, e.JSON)
	return sum, op.Finish()
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
		late := regress.AckBeforeSync.Load()
		err := d.commitGroup(group, !late)
		for _, r := range group {
			r.b = nil
			r.done <- err
		}
		if late && err == nil {
			err = d.syncLate()
		}
		clear(group)
	}
}

// syncLate fsyncs the write-ahead log after the group was acknowledged:
// the fixed bug regress.AckBeforeSync puts back.
func (d *Durable) syncLate() error {
	b := d.db.NewBatch()
	if err := b.LogData([]byte{0}, nil); err != nil {
		return err
	}
	return d.commitSafely(b, true)
}

// commitGroup commits group as one batch, with an fsync if one of its
// batches asked for it and syncNow (always, but for a fixed bug put back).
func (d *Durable) commitGroup(group []*commitReq, syncNow bool) (err error) {
	defer func() {
		for _, r := range group {
			_ = r.b.Close()
		}
	}()
	if f := d.failed.Load(); f != nil {
		return *f
	}
	// No seq above a session's reservation is acknowledged before the
	// reservation is on disk.
	if err := d.reserve(group); err != nil {
		return d.fail(err)
	}
	b, sync := group[0].b, group[0].sync
	for _, r := range group[1:] {
		if err := b.Apply(r.b, nil); err != nil {
			return d.fail(err)
		}
		sync = sync || r.sync
	}
	if err := d.commitSafely(b, sync && syncNow); err != nil {
		return d.fail(err)
	}
	d.commitCount.Add(1)
	if err := d.recordHeads(group); err != nil {
		return d.fail(err)
	}
	return nil
}

// reserve fsyncs a reservation record if a batch of group takes its
// session past its reservation. The record then renews the reservation of
// every session of the group that has used half of it, so that sessions
// appending together share reservation fsyncs.
func (d *Durable) reserve(group []*commitReq) error {
	need := false
	for _, r := range group {
		if r.last > r.reservedOf() {
			need = true
			break
		}
	}
	if !need {
		return nil
	}
	entries := d.hwmBuf[:0]
	for _, r := range group {
		if r.last > 0 && r.last+reserveAhead/2 > r.s.reserved {
			entries = append(entries, hwmEntry{id: r.s.id, reserved: r.last + reserveAhead})
		}
	}
	d.hwmBuf = entries
	if err := reserveBoth(d.hwm, d.floor, entries); err != nil {
		return err
	}
	for _, r := range group {
		if r.last > 0 && r.last+reserveAhead/2 > r.s.reserved {
			r.s.reserved = r.last + reserveAhead
		}
	}
	d.reservations.Add(1)
	return nil
}

func (r *commitReq) reservedOf() uint64 {
	if r.s == nil {
		return 0
	}
	return r.s.reserved
}

// recordHeads appends the group's new heads to the high-water mark log,
// and rewrites the log when it has grown.
func (d *Durable) recordHeads(group []*commitReq) error {
	entries := d.hwmBuf[:0]
	for _, r := range group {
		if r.last > 0 {
			entries = append(entries, hwmEntry{id: r.s.id, head: r.last})
			r.s.acked = r.last
		}
	}
	d.hwmBuf = entries
	if len(entries) == 0 {
		return nil
	}
	if err := d.hwm.heads(entries); err != nil {
		return err
	}
	if d.hwm.grown() {
		return d.rewriteHWM()
	}
	return nil
}

// rewriteHWM replaces the high-water mark log with a snapshot. Called by
// the committer, or by Open and Close while it does not run.
func (d *Durable) rewriteHWM() error {
	d.mu.RLock()
	entries := make([]hwmEntry, 0, len(d.sessions))
	for _, s := range d.sessions {
		if s.acked > 0 || s.reserved > 0 {
			entries = append(entries, hwmEntry{id: s.id, head: s.acked, reserved: s.reserved, verified: s.verified})
		}
	}
	d.mu.RUnlock()
	h, err := writeHWM(d.fs, d.dir, hwmFile, entries)
	if err != nil {
		return err
	}
	if d.hwm != nil {
		_ = d.hwm.Close()
	}
	d.hwm = h
	// The floor log second: a crash between the two leaves it older, and
	// both intact (Open takes the higher marks of the two).
	f, err := writeHWM(d.fs, d.dir, floorFile, entries)
	if err != nil {
		return err
	}
	if d.floor != nil {
		_ = d.floor.Close()
	}
	d.floor = f
	return nil
}

// commitSafely commits b, with fsync if sync, turning the store's fatal
// error (see pebbleLogger.Fatalf) into an error.
func (d *Durable) commitSafely(b *pebble.Batch, sync bool) (err error) {
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
	if sync {
		return b.Commit(pebble.Sync)
	}
	return b.Commit(pebble.NoSync)
}

// fail records the first write failure; every later write returns it.
func (d *Durable) fail(cause error) error {
	err := fmt.Errorf("%w: %s: %w", ErrWriteFailed, d.dir, cause)
	if d.failed.CompareAndSwap(nil, &err) {
		d.log.Error("journal: write failed; refusing writes until restart", "dir", d.dir, "err", cause)
		d.failedOnce.Do(func() { close(d.failedCh) })
		return err
	}
	return *d.failed.Load()
}

// ReadAfter implements Journal. The events of one call share one backing
// array for their JSON, so an event kept alive keeps its page alive. Every
// record read is verified (checksum, and chain with the record before it
// when that one is read too); a damaged one fails the read with a
// *CorruptError.
func (d *Durable) ReadAfter(ctx context.Context, session messages.SessionID, after uint64, limit int) ([]*messages.Encoded, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	d.closeMu.RLock()
	defer d.closeMu.RUnlock()
	if d.closed {
		return nil, ErrClosed
	}
	for try := 0; ; try++ {
		s, err := d.session(session, false)
		if s == nil || err != nil || limit <= 0 {
			return nil, err
		}
		out, err := d.readAfter(s, session, after, limit)
		var ce *CorruptError
		if err != nil && errors.As(err, &ce) && try < 3 && !d.current(s) {
			// The session's state left memory during the read, and another
			// state of it (loaded since) may have trimmed what this one
			// still counted as kept: read again with the current state.
			continue
		}
		return out, err
	}
}

// current reports whether s is the session's state in memory (not one
// that left memory since it was handed out).
func (d *Durable) current(s *durSession) bool {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.sessions[s.id] == s
}

// readAfter is ReadAfter on the session's state s.
func (d *Durable) readAfter(s *durSession, session messages.SessionID, after uint64, limit int) ([]*messages.Encoded, error) {
	head := s.head.Load() // before first: Trim raises first before it deletes
	first := s.first.Load()
	gaps := *s.gaps.Load()
	from := max(after+1, first)
	if from > head {
		return nil, nil
	}
	// The record before from, when there is one, seeds the chain check.
	lowSeq := from
	if from > first && !inGap(gaps, from-1) {
		lowSeq = from - 1
	}
	bounds := make([]byte, 0, 2*(len(s.prefix)+8))
	bounds = eventKey(bounds, s.prefix, lowSeq)
	lower := bounds[:len(bounds):len(bounds)]
	upper := eventKey(bounds[len(bounds):], s.prefix, head+1)
	it, err := d.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return nil, err
	}
	defer it.Close()

	// Events and their JSON are allocated in chunks, not one by one; the
	// chunks are capped so a huge limit allocates only what is read.
	n := int(min(uint64(limit), head-from+1))
	const encChunk = 1024
	encs := make([]messages.Encoded, min(n, encChunk))
	out := make([]*messages.Encoded, 0, min(n, 16*encChunk))
	slab := make([]byte, 0, min(n*384, 256<<10))
	var run messages.RunID
	want := from
	var prevSeq uint64 // seq of the last record verified, 0 if none
	var prevSum uint32
	corrupt := func(seq uint64, detail string) error {
		last := seq - 1
		if prevSeq != 0 {
			last = prevSeq
		}
		return storeError("read", d.dir, &CorruptError{Session: session, Seq: seq, LastIntact: last, Detail: detail})
	}
	for ok := it.First(); ok && len(out) < n; ok = it.Next() {
		k := it.Key()
		seq := binary.BigEndian.Uint64(k[len(k)-8:])
		if seq >= from && seq != want && !s.skippable(want, seq-1) {
			return nil, corrupt(want, fmt.Sprintf("missing (the next stored seq is %d)", seq))
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return nil, storeError("read", d.dir, err)
		}
		rec, err := decodeRecord(k, v)
		if err != nil && seq < from {
			continue // a damaged seed: the first record goes unchained, not unread
		}
		if err != nil {
			return nil, corrupt(seq, err.Error())
		}
		if prevSeq != 0 && seq == prevSeq+1 && rec.format == valueFormat2 && rec.prev != prevSum {
			return nil, corrupt(seq, "chain broken: the record before it is not the one it was written after")
		}
		prevSeq, prevSum = seq, rec.sum
		if seq < from {
			continue // the chain seed
		}
		if len(slab)+len(rec.data) > cap(slab) {
			slab = make([]byte, 0, max(len(rec.data), 256<<10))
		}
		start := len(slab)
		slab = append(slab, rec.data...)
		if string(rec.run) != string(run) {
			run = messages.RunID(rec.run)
		}
		if len(encs) == 0 {
			encs = make([]messages.Encoded, min(n-len(out), encChunk))
		}
		e := &encs[0]
		encs = encs[1:]
		e.Seq, e.Type, e.RunID, e.JSON = seq, internType(rec.typ), run, slab[start:len(slab):len(slab)]
		out = append(out, e)
		want = seq + 1
	}
	if err := it.Error(); err != nil {
		return nil, storeError("read", d.dir, err)
	}
	if len(out) < n && want <= head && !s.skippable(want, head) {
		return nil, corrupt(want, fmt.Sprintf("missing (the journal ends at %d, head %d)", want-1, head))
	}
	return out, nil
}

// skippable reports whether seqs a..b may be absent: trimmed (below first,
// read now: Trim may have raised it during the read) or lost to a repair.
func (s *durSession) skippable(a, b uint64) bool {
	first := s.first.Load()
	if b < first {
		return true
	}
	a = max(a, first)
	for _, g := range *s.gaps.Load() {
		if g.from <= a && b <= g.to {
			return true
		}
	}
	return false
}

func inGap(gaps []span, seq uint64) bool {
	for _, g := range gaps {
		if g.from <= seq && seq <= g.to {
			return true
		}
	}
	return false
}

// normalizeGaps sorts and merges gaps, drops those below first, and moves
// first past a gap it falls in (ReadAfter could return nothing of it).
func normalizeGaps(first uint64, gaps []span) (uint64, []span) {
	gaps = slices.Clone(gaps)
	slices.SortFunc(gaps, func(a, b span) int { return cmp.Compare(a.from, b.from) })
	var out []span
	for _, g := range gaps {
		if n := len(out); n > 0 && g.from <= out[n-1].to+1 {
			out[n-1].to = max(out[n-1].to, g.to)
			continue
		}
		out = append(out, g)
	}
	gaps = out[:0]
	for _, g := range out {
		switch {
		case g.to < first:
		case g.from <= first:
			first = g.to + 1
		default:
			gaps = append(gaps, g)
		}
	}
	return first, gaps
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
	s, err := d.session(session, false)
	if s == nil || err != nil {
		return 0, err
	}
	return s.head.Load(), nil
}

// First implements Journal.
func (d *Durable) First(_ context.Context, session messages.SessionID) (uint64, error) {
	d.closeMu.RLock()
	defer d.closeMu.RUnlock()
	if d.closed {
		return 0, ErrClosed
	}
	s, err := d.session(session, false)
	if s == nil || err != nil || s.head.Load() == 0 {
		return 0, err
	}
	return s.first.Load(), nil
}

// Trim implements Journal. It deletes with one range tombstone and records
// the new first seq and the head in the same synced batch. It keeps the
// start of every run of the session that has not ended.
func (d *Durable) Trim(ctx context.Context, session messages.SessionID, before uint64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	d.closeMu.RLock()
	defer d.closeMu.RUnlock()
	if d.closed {
		return ErrClosed
	}
	s, err := d.lockSession(session, false)
	if s == nil || err != nil {
		return err
	}
	defer s.mu.Unlock()
	head, first := s.head.Load(), s.first.Load()
	before = min(before, head+1)
	for _, start := range s.live {
		if !regress.TrimLiveRuns.Load() {
			before = min(before, start)
		}
	}
	newFirst, gaps := normalizeGaps(before, *s.gaps.Load())
	if head == 0 || newFirst <= first {
		return nil
	}
	if err := d.failed.Load(); err != nil {
		return *err
	}
	b := d.db.NewBatch()
	err = errors.Join(
		b.DeleteRange(eventKey(nil, s.prefix, 0), eventKey(nil, s.prefix, newFirst), nil),
		setMeta(b, session, newFirst, head, gaps),
	)
	if err != nil {
		_ = b.Close()
		return fmt.Errorf("journal: session %s: trim: %w", session, err)
	}
	// Readers skip the doomed events from now on; raising first before
	// the delete is visible keeps ReadAfter's gap check exact.
	s.first.Store(newFirst)
	s.gaps.Store(&gaps)
	return d.commit(s, b)
}

// setMeta adds a session's trim and repair record to b: first(8) head(8)
// then from(8) to(8) of each range lost to a repair, sealed.
func setMeta(b *pebble.Batch, session messages.SessionID, first, head uint64, gaps []span) error {
	body := make([]byte, 0, 16+16*len(gaps))
	body = binary.BigEndian.AppendUint64(body, first)
	body = binary.BigEndian.AppendUint64(body, head)
	for _, g := range gaps {
		body = binary.BigEndian.AppendUint64(body, g.from)
		body = binary.BigEndian.AppendUint64(body, g.to)
	}
	key := sessionKey(keyMeta, session)
	return b.Set(key, seal(key, body), nil)
}

// parseMeta decodes a trim and repair record: sealed, or format 1's 16
// bytes without a seal.
func parseMeta(key, v []byte) (first, head uint64, gaps []span, err error) {
	body := v
	if len(v) != 16 {
		if body, err = unseal(key, v); err != nil {
			return 0, 0, nil, err
		}
		if len(body) < 16 || len(body)%16 != 0 {
			return 0, 0, nil, errBadRecord
		}
	}
	first, head = binary.BigEndian.Uint64(body), binary.BigEndian.Uint64(body[8:])
	for r := body[16:]; len(r) > 0; r = r[16:] {
		gaps = append(gaps, span{binary.BigEndian.Uint64(r), binary.BigEndian.Uint64(r[8:])})
	}
	return first, head, gaps, nil
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
	// The store, not memory: idle sessions are only there (idle.go).
	out, err := d.storedSessions()
	if err != nil {
		return nil, err
	}
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
	d.mu.RLock()
	n := len(d.sessions)
	d.mu.RUnlock()
	return DurableStats{Appends: d.appends.Load(), Events: d.events.Load(), Commits: d.commitCount.Load(), Reservations: d.reservations.Load(),
		Evicted: d.evictions.Load(), Lookups: d.lookups.Load(), InMemory: n}
}

// Dir returns the data directory.
func (d *Durable) Dir() string { return d.dir }

// Close implements Journal: it waits for the appends in flight, stops the
// committer, rewrites the high-water mark log compactly and closes the
// store (acknowledged batches are already in the fsynced WAL). It is
// idempotent. It returns the write failure, if any.
func (d *Durable) Close() (err error) {
	d.stopWatch()
	if !d.stopEvictor() {
		return d.parkedError()
	}
	d.closeMu.Lock()
	defer d.closeMu.Unlock()
	if d.closed {
		return nil
	}
	d.closed = true
	close(d.commits)
	select {
	case <-d.loopDone:
	case <-d.parked: // the committer may be the goroutine parked in the store
		return d.parkedError()
	}
	if d.poisoned.Load() {
		return d.parkedError()
	}
	var hwmErr error
	if d.failed.Load() == nil {
		hwmErr = d.rewriteHWM()
	}
	hwmErr = errors.Join(hwmErr, d.hwm.Close(), d.floor.Close())
	defer func() {
		if r := recover(); r != nil {
			fe, ok := r.(*fatalError)
			if !ok {
				panic(r)
			}
			err = fmt.Errorf("journal: close %s: %w", d.dir, fe)
		}
		err = errors.Join(err, d.lock.Close())
	}()
	if err := d.db.Close(); err != nil {
		return fmt.Errorf("journal: close %s: %w", d.dir, err)
	}
	if hwmErr != nil {
		return fmt.Errorf("journal: close %s: %w", d.dir, hwmErr)
	}
	if f := d.failed.Load(); f != nil {
		return *f
	}
	return nil
}

// parkedError is what Close returns when it cannot close the store.
func (d *Durable) parkedError() error {
	return fmt.Errorf("journal: %s: store left unclosed after a fatal error: %w", d.dir, d.Err())
}

// fatalError is what pebbleLogger.Fatalf panics with.
type fatalError struct {
	msg   string
	cause error // the first error among Fatalf's arguments
}

func (e *fatalError) Error() string { return e.msg }
func (e *fatalError) Unwrap() error { return e.cause }

// pebbleLogger adapts slog to pebble.Logger.
type pebbleLogger struct {
	l *slog.Logger
	d *Durable
}

func (p pebbleLogger) Infof(format string, args ...any) {
	p.l.Debug("journal: " + fmt.Sprintf(format, args...))
}

func (p pebbleLogger) Errorf(format string, args ...any) {
	p.l.Error("journal: " + fmt.Sprintf(format, args...))
}

// Fatalf must not return. Pebble calls it for a failed commit, for a
// write-ahead log or MANIFEST it cannot create, write or sync (the data
// directory removed under the server, a failing disk), and for broken
// invariants, on whatever goroutine hit it, and often while it holds its
// own mutex or has released it around the call: a panic unwinding through
// such a frame unlocks an unlocked mutex, which is a fatal error of the
// runtime that no recover catches ("sync: unlock of unlocked mutex").
//
// So, once Open has returned, Fatalf (but for commitFatal) fails the journal (every write is
// refused from then on, Failed is closed, conclave serve exits) and parks
// the goroutine for good: it blocks, holding whatever the store holds,
// and uses no CPU. Nothing calls the store again (poisoned; Close leaves
// it unclosed); the process is expected to exit. During Open it panics
// with a *fatalError, which Open recovers into its error.
func (p pebbleLogger) Fatalf(format string, args ...any) {
	fe := &fatalError{msg: fmt.Sprintf(format, args...)}
	for _, a := range args {
		if err, ok := a.(error); ok {
			fe.cause = err
			break
		}
	}
	// The store's errors carry their stack traces after the first line.
	fe.msg, _, _ = strings.Cut(fe.msg, "\n")
	p.l.Error("journal: store fatal error", "err", fe.msg)
	if p.d == nil || !p.d.opened.Load() || format == commitFatal {
		panic(fe)
	}
	p.d.park(fe)
}

// commitFatal is the format of Pebble's Fatalf for a commit whose write or
// fsync of the write-ahead log failed (db.go, applyInternal): called on the
// committing goroutine (the committer: nothing else commits once Open has
// returned) after the commit pipeline returned, with no lock of the store
// held, so its panic unwinds safely into commitSafely's recover.
const commitFatal = "pebble: fatal commit error: %v"

// park fails the journal and blocks the calling goroutine (one of the
// store's) for good; see pebbleLogger.Fatalf.
func (d *Durable) park(fe *fatalError) {
	_ = d.fail(fe)
	d.poisoned.Store(true)
	d.parkedOnce.Do(func() { close(d.parked) })
	d.log.Error("journal: the store cannot go on; its goroutine is parked and the journal refuses every write: restart the server once the data directory is back",
		"dir", d.dir)
	select {} // never returns: Pebble's Fatalf must not
}

// diskFailure reports whether err says the disk cannot take the store's
// writes: full, gone (the data directory removed), read-only or failing.
func diskFailure(err error) bool {
	for _, e := range []error{syscall.ENOSPC, syscall.EDQUOT, syscall.ENOENT, syscall.EROFS, syscall.EIO} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// eventListener logs the store's events. A background write (flush,
// compaction) that fails for lack of space, or because the directory or
// the disk is gone, fails the journal: its WAL may still have preallocated
// room (or be a deleted file still open), and without this Append would
// block on a write stall, or go on writing to nowhere, instead of
// reporting the failure.
func (d *Durable) eventListener() *pebble.EventListener {
	log := d.log
	return &pebble.EventListener{
		BackgroundError: func(err error) {
			log.Error("journal: background error", "dir", d.dir, "err", err)
			if diskFailure(err) {
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
