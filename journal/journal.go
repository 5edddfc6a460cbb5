// Package journal stores the events of every session in seq order. The
// session hub is the only writer of a session; any number of subscribers
// read concurrently by cursor.
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
//     and durable for durable implementations.
//   - ReadAfter returns up to limit events with seq > after, in seq order.
//     It never returns an event that Append has not acknowledged.
//   - Head returns the last acknowledged seq (0 for an unknown session).
//   - All methods are safe for concurrent use; only one goroutine appends
//     to a given session at a time (its hub).
//   - After Close every method returns ErrClosed.
type Journal interface {
	Append(ctx context.Context, session messages.SessionID, events []*messages.Encoded) error
	ReadAfter(ctx context.Context, session messages.SessionID, after uint64, limit int) ([]*messages.Encoded, error)
	Head(ctx context.Context, session messages.SessionID) (uint64, error)
	Close() error
}
