package feed

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/conclave-ai/conclave/internal/regress"
	"github.com/conclave-ai/conclave/journal"
	"github.com/conclave-ai/conclave/messages"
)

// Replay reads a session's events from its journal for a Source: the
// session hub's, and a cluster node's follower of a session owned by
// another node.
type Replay struct {
	Journal journal.Journal
	Key     messages.SessionID // the session's key in the journal
	Session messages.SessionID // as clients know it (envelopes)
	NewID   func() uuid.UUID
	Now     func() time.Time
}

// ReadAfter implements Source.ReadAfter for a source whose head is head.
// Where the journal no longer holds the events right after the cursor
// (retention trimmed them, or a repair of a damaged journal lost them: see
// journal.Journal), it puts a replay_truncated event, meant for this
// subscriber alone, before the first event it still holds: never a silent
// gap. A batch is cut at a hole inside it, so the next read starts at the
// hole.
func (r Replay) ReadAfter(ctx context.Context, head, after uint64, limit int) ([]*messages.Encoded, error) {
	evs, err := r.Journal.ReadAfter(ctx, r.Key, after, limit)
	if err != nil {
		return nil, err
	}
	for i := 1; i < len(evs); i++ {
		if evs[i].Seq != evs[i-1].Seq+1 {
			evs = evs[:i]
			break
		}
	}
	if len(evs) > 0 && evs[0].Seq == after+1 {
		return evs, nil
	}
	first := uint64(0)
	switch {
	case len(evs) > 0:
		first = evs[0].Seq
	case after < head:
		// Acknowledged events up to head are gone, and nothing follows
		// them yet (lost in a repair): the next event will be head+1.
		first = head + 1
	default:
		if first, err = r.Journal.First(ctx, r.Key); err != nil || first <= after+1 {
			return nil, err // nothing retained is missing: the cursor is simply at the head
		}
	}
	seq := first - 1
	if regress.MarkerAtFirstRetained.Load() {
		seq = first
	}
	env := &messages.Envelope{ID: r.NewID(), Seq: seq, Type: messages.ReplayTruncated, Timestamp: r.Now().UTC(),
		SessionID: r.Session, Lane: messages.Lane{StreamID: messages.SessionStream},
		Payload: &messages.ReplayTruncatedPayload{After: after, FirstRetained: first}}
	enc, err := messages.Encode(env)
	if err != nil {
		return nil, err
	}
	if len(evs) >= limit { // the marker counts: at most limit events in all
		evs = evs[:max(limit-1, 0)]
	}
	return append([]*messages.Encoded{enc}, evs...), nil
}
