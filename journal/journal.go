// Package journal stores the events of every session in seq order. The
// session hub is the only writer of a session; any number of subscribers
// read concurrently by cursor.
//
// Three implementations: [Memory] (tests and `conclave run`), [Durable]
// (`conclave serve`; an embedded Pebble store with group commit) and
// [JetStream] (`conclave serve --cluster`; a NATS JetStream stream shared by
// every node, fenced per session: see jetstream.go).
//
// # Acknowledgement
//
// An event is acknowledged when the Append call that carries it returns nil.
// For [Durable] that means its whole batch is in the write-ahead log and the
// log has been fsynced (one fsync covers every batch appended concurrently:
// group commit), so it survives a crash of the process (kill -9) and of the
// machine, on a disk that honours fsync. Nothing of a batch is visible
// before that: ReadAfter, Head and First stop at the acknowledged head, and
// the session hub publishes a batch to subscribers only after Append
// returned nil. Subscribers therefore only ever see durable events.
//
// If Append returns an error, no event of the batch is acknowledged and no
// reader in this process ever sees one of them. After a restart the batch
// may be present or absent (the write may have reached the disk before the
// error), but never in part, and if present it continues the seq exactly.
// Seqs are never reused: neither a failed Append, nor Trim, nor a repair
// lowers the head.
//
// # Integrity
//
// [Durable] stores every event with a CRC-32C checksum that covers the
// session key, the seq, the checksum of the session's previous record and
// the event (a chain), and verifies it on every read: a damaged event is
// never returned, the read fails with a [*CorruptError]. Beside the store it
// keeps a high-water mark log of what it acknowledged, and a second copy of
// its reservations (the floor log: no seq above a reservation is ever
// acknowledged). At Open it compares each session's stored events with it
// and verifies the events stored since the previous Open, and refuses to
// open a journal that lost or garbled acknowledged events (a truncated,
// garbled or deleted write-ahead log), or whose high-water mark or floor
// log is missing or damaged, with a [*DamageError] naming each damaged
// session and file. [Options.Repair] truncates such sessions to their last
// intact event instead; their next seq is then above every seq that may
// have been acknowledged, and ReadAfter jumps over the lost range as over a
// trimmed prefix. A journal fails ([Durable.Failed]) when a write fails or
// its data directory disappears, and refuses every write from then on. Events written by versions before checksums
// (value format 1) stay readable; they carry no checksum and no chain.
//
// # Run catalogue
//
// Both journals implement [Catalog]: inside Append, in the same atomic
// batch as the events, a run_started event creates its run's entry and a
// terminal event (run_finished, run_error) ends it. Recovery finds the live
// runs there without reading every session, and Trim never drops the start
// of a run that has not ended.
//
// testkit.RunJournalSuite is the conformance suite every implementation passes.
package journal

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/conclave-ai/conclave/messages"
)

// Errors.
var (
	// ErrClosed is returned by every method after Close.
	ErrClosed = errors.New("journal: closed")
	// ErrWriteFailed wraps the cause of a failed write to durable storage
	// (a full disk, an I/O error). A Durable journal refuses every later
	// Append and Trim with it, until it is reopened: the store cannot tell
	// whether the failed write reached the disk. Reads keep working.
	ErrWriteFailed = errors.New("journal: write failed")
	// ErrCorrupt matches every error that reports stored data failing its
	// checks (a *CorruptError for an event).
	ErrCorrupt = errors.New("journal: corrupt")
	// ErrDamaged matches the *DamageError of Open.
	ErrDamaged = errors.New("journal: damaged")
	// ErrLocked is returned by Open when another process (or another open
	// journal in this process) holds the data directory.
	ErrLocked = errors.New("journal: data directory in use")
	// ErrUnknownRun is returned by the Catalog for a run it does not know.
	ErrUnknownRun = errors.New("journal: unknown run")
)

// CorruptError reports a stored event that fails its checks: a checksum
// that does not match, a broken chain, or a seq missing from the store. It
// matches ErrCorrupt.
type CorruptError struct {
	Session messages.SessionID
	// Seq is the first seq that is corrupt or missing.
	Seq uint64
	// LastIntact is the seq before the damage: what a repair keeps.
	LastIntact uint64
	// Detail says what is wrong.
	Detail string
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("journal: session %s: seq %d is corrupt: %s (last intact seq %d)", e.Session, e.Seq, e.Detail, e.LastIntact)
}

// Is makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

// DamagedSession is one session a *DamageError reports.
type DamagedSession struct {
	Session messages.SessionID
	// LastIntact is the last seq before the damage: a repair keeps the
	// session's events up to it and drops the rest.
	LastIntact uint64
	// Acknowledged is the highest seq ever acknowledged in the session. A
	// repair sets the head at or above it, so none of these seqs is used
	// again.
	Acknowledged uint64
	// Detail says what was found ("the store ends at seq 40", "seq 41:
	// checksum mismatch", ...).
	Detail string
}

// DamageError is returned by Open when the journal lost or garbled
// acknowledged events. It matches ErrDamaged. Opening with Options.Repair
// truncates the damaged sessions instead.
type DamageError struct {
	Dir      string
	Sessions []DamagedSession
	// Files lists damage outside sessions: a write-ahead log the store
	// could not replay to its end, a damaged high-water mark log.
	Files []string
}

func (e *DamageError) Error() string {
	var b strings.Builder
	for i, f := range e.Files {
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "journal: %s: %s; start with --repair to use what is intact", e.Dir, f)
	}
	for _, s := range e.Sessions {
		if b.Len() > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "journal: %s: session %s is damaged: events %d..%d were acknowledged but are lost or corrupt (last intact seq %d; %s); start with --repair to truncate it to seq %d (seqs up to %d will not be reused)",
			e.Dir, s.Session, s.LastIntact+1, s.Acknowledged, s.LastIntact, s.Detail, s.LastIntact, s.Acknowledged)
	}
	return b.String()
}

// Is makes errors.Is(err, ErrDamaged) true.
func (e *DamageError) Is(target error) bool { return target == ErrDamaged }

// SeqError reports an Append whose events do not continue the session's seq.
type SeqError struct {
	Session  messages.SessionID
	Head     uint64 // last stored seq
	Got      uint64 // offending seq
	Position int    // index in the appended batch
}

func (e *SeqError) Error() string {
	return fmt.Sprintf("journal: session %s: event %d of the batch has seq %d, want %d", e.Session, e.Position, e.Got, e.Head+1)
}

// Journal is the event store.
//
// Contract, for every implementation:
//   - Append stores a batch atomically: either every event of the batch is
//     stored or none is. The events must continue the session's seq exactly
//     (head+1, head+2, ...), otherwise Append returns a *SeqError and stores
//     nothing. When Append returns nil the events are acknowledged: readable,
//     and durable for durable implementations (see the package doc).
//   - ReadAfter returns up to limit events with seq > after, in seq order,
//     gapless except over events that are gone: it never returns an event
//     that Append has not acknowledged, nor a corrupt one (it fails with a
//     *CorruptError instead). Events trimmed away are skipped: for after <
//     First-1 the result starts at First. Events lost to a repair (see
//     Options.Repair) are skipped the same way, wherever they are. The
//     caller (the subscription feed) turns such a jump into an explicit
//     replay_truncated event; the journal never hides it, since the first
//     returned seq is then greater than after+1 (or the seq after a lost
//     range is greater than its predecessor+1).
//   - Head returns the highest seq ever acknowledged (0 for an unknown
//     session); the next Append must carry head+1. Trimming never changes
//     it. After a repair it may be above the last stored event (it is then
//     at least every seq acknowledged before the damage).
//   - First returns the seq of the oldest event ReadAfter can still return:
//     1 for a session never trimmed, head+1 for a session whose events were
//     all trimmed (or lost), 0 for a session without events.
//   - Trim drops the events with seq < before (retention). It never drops an
//     event that is not yet appended (before is capped at head+1), never
//     drops the start of a run that has not ended (before is capped at the
//     seq of the run_started of the session's oldest run without a terminal
//     event: recovery needs it), never lowers First, and never changes
//     Head: after trimming everything, the next Append still needs head+1.
//     Trimming an unknown session is a no-op.
//   - Sessions lists every session with at least one appended event (those
//     whose events were all trimmed included: their head still counts), in
//     ascending order. Recovery at startup walks it.
//   - All methods are safe for concurrent use; only one goroutine appends
//     to a given session at a time (its hub).
//   - After Close every method returns ErrClosed. Close is idempotent.
type Journal interface {
	Append(ctx context.Context, session messages.SessionID, events []*messages.Encoded) error
	ReadAfter(ctx context.Context, session messages.SessionID, after uint64, limit int) ([]*messages.Encoded, error)
	Head(ctx context.Context, session messages.SessionID) (uint64, error)
	First(ctx context.Context, session messages.SessionID) (uint64, error)
	Trim(ctx context.Context, session messages.SessionID, before uint64) error
	Sessions(ctx context.Context) ([]messages.SessionID, error)
	Close() error
}

// RunInfo is what the journal knows of one run.
type RunInfo struct {
	Run      messages.RunID
	Session  messages.SessionID // the session key it was appended under
	FirstSeq uint64             // seq of its run_started
	LastSeq  uint64             // seq of its terminal event; 0 while the run has not ended
	Summary  []byte             // last PutRunSummary value, nil if none
}

// Catalog is the run catalogue, a capability of both journals. Append
// maintains it in the same atomic batch as the events: an event of type
// run_started (with a run id) creates the run's entry, and the first
// terminal event (Type.Terminal()) of the run in the same session sets its
// LastSeq. A second run_started of a known run, and a terminal event of a
// run the catalogue does not know, change nothing. Entries are never
// trimmed: a run's entry and summary outlive its events.
//
// Session keys are opaque to the journal except for one rule: the part of
// a key before its first '/' is its scope ("acme" for "acme/S1"); a key
// without '/' has scope "". Catalog methods are safe for concurrent use and
// return ErrClosed after Close.
type Catalog interface {
	// LiveRuns lists the runs without a terminal event, in the order their run_started was appended.
	LiveRuns(ctx context.Context) ([]RunInfo, error)
	// Run returns what the journal knows of run.
	Run(ctx context.Context, run messages.RunID) (RunInfo, bool, error)
	// ListRuns pages over the runs of the sessions whose key starts with scope+"/"
	// (scope "" lists every run), in the order their run_started was appended,
	// after the run `after` ("" = from the start), at most limit; next is the cursor of the next page ("" on the last).
	//
	// It reads only the runs of that scope. A scope containing '/' is an
	// error; an unknown after is an error matching ErrUnknownRun; limit is
	// capped at MaxListRuns, and limit <= 0 returns nothing.
	ListRuns(ctx context.Context, scope string, after messages.RunID, limit int) (runs []RunInfo, next messages.RunID, err error)
	// PutRunSummary stores an opaque summary of run (the caller's JSON). It need not be fsynced
	// on its own (a crash may lose it; the caller rebuilds it from the events). Unknown run: error.
	//
	// The error for an unknown run matches ErrUnknownRun; a summary larger
	// than MaxRunSummary is refused.
	PutRunSummary(ctx context.Context, run messages.RunID, summary []byte) error
}

// Bounds of the Catalog.
const (
	// MaxListRuns caps ListRuns' limit.
	MaxListRuns = 1000
	// MaxRunSummary is the largest summary PutRunSummary stores.
	MaxRunSummary = 1 << 20
)

// scopeOf returns the scope of a session key: the part before its first
// '/', or "" for a key without '/'.
func scopeOf(session messages.SessionID) string {
	scope, _, ok := strings.Cut(string(session), "/")
	if !ok {
		return ""
	}
	return scope
}

// checkListArgs validates ListRuns' scope and clamps its limit.
func checkListArgs(scope string, limit int) (int, error) {
	if strings.Contains(scope, "/") {
		return 0, fmt.Errorf("journal: list runs: scope %q contains '/'", scope)
	}
	return min(limit, MaxListRuns), nil
}

// inScope reports whether session belongs to scope ("" is every session).
func inScope(session messages.SessionID, scope string) bool {
	return scope == "" || scopeOf(session) == scope
}

// runChange is what one batch does to one run of the catalogue.
type runChange struct {
	run   messages.RunID
	start uint64 // seq of its first run_started in the batch, 0 if none
	end   uint64 // seq of its first terminal event in the batch, 0 if none
}

// runChanges lists the runs a batch starts or ends, in the order of their
// first such event. Events without a run id change nothing.
func runChanges(events []*messages.Encoded) []runChange {
	var out []runChange
	for _, e := range events {
		start, end := e.Type == messages.RunStarted, e.Type.Terminal()
		if !start && !end || e.RunID == "" {
			continue
		}
		i := slices.IndexFunc(out, func(c runChange) bool { return c.run == e.RunID })
		if i < 0 {
			out = append(out, runChange{run: e.RunID})
			i = len(out) - 1
		}
		c := &out[i]
		if start && c.start == 0 {
			c.start = e.Seq
		}
		if end && c.end == 0 {
			c.end = e.Seq
		}
	}
	return out
}
