// Package journal stores the events of every session in seq order. The
// session hub is the only writer of a session; any number of subscribers
// read concurrently by cursor.
//
// Two implementations: [Memory] (tests and `conclave run`) and [Durable]
// (`conclave serve`; an embedded Pebble store with group commit).
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
// Seqs are never reused: neither a failed Append nor Trim lowers the head.
//
// testkit.RunJournalSuite is the conformance suite every implementation passes.
package journal

import (
	"context"
	"errors"
	"fmt"

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
)

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
//     gapless. It never returns an event that Append has not acknowledged.
//     Events trimmed away are skipped: for after < First-1 the result starts
//     at First. The caller (the subscription feed) turns that jump into an
//     explicit replay_truncated event; the journal never hides it, since the
//     first returned seq is then greater than after+1.
//   - Head returns the last acknowledged seq (0 for an unknown session).
//     Trimming never changes it.
//   - First returns the seq of the oldest event ReadAfter can still return:
//     1 for a session never trimmed, head+1 for a session whose events were
//     all trimmed, 0 for a session without events.
//   - Trim drops the events with seq < before (retention). It never drops an
//     event that is not yet appended (before is capped at head+1), never
//     lowers First, and never changes Head: after trimming everything, the
//     next Append still needs head+1. Trimming an unknown session is a no-op.
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
