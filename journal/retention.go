package journal

import (
	"bytes"
	"context"
	"time"

	"github.com/conclave-ai/conclave/messages"
)

// Retention is a per-session retention policy. The zero value keeps
// everything.
type Retention struct {
	// MaxAge drops the events stamped before now-MaxAge (the envelope's
	// timestamp, set by the hub). Only a prefix of the session is dropped:
	// trimming stops at the first event stamped at or after the cutoff, or
	// without a readable timestamp, so after a clock step backwards a
	// session keeps a little more, never less. 0 means no age limit.
	MaxAge time.Duration
	// MaxEvents keeps at most the last MaxEvents events. 0 means no limit.
	MaxEvents uint64
}

// retentionPage is how many events ApplyRetention reads at a time while it
// looks for the first event young enough to keep.
const retentionPage = 512

// ApplyRetention trims session in j according to r and returns how many
// events it dropped. Readers whose cursor falls before the new First get a
// replay_truncated event from their feed, never a silent gap. It never
// drops the start of a run that has not ended (Trim keeps it, see the
// Journal contract), so a session with a long-running run keeps more.
func ApplyRetention(ctx context.Context, j Journal, session messages.SessionID, r Retention, now time.Time) (trimmed uint64, err error) {
	first, err := j.First(ctx, session)
	if err != nil || first == 0 {
		return 0, err
	}
	head, err := j.Head(ctx, session)
	if err != nil {
		return 0, err
	}
	before := first
	if r.MaxEvents > 0 && head >= r.MaxEvents {
		before = max(before, head-r.MaxEvents+1)
	}
	if r.MaxAge > 0 {
		cutoff := now.Add(-r.MaxAge)
		byAge, err := firstYoungEvent(ctx, j, session, before, head, cutoff)
		if err != nil {
			return 0, err
		}
		before = max(before, byAge)
	}
	if before <= first {
		return 0, nil
	}
	if err := j.Trim(ctx, session, before); err != nil {
		return 0, err
	}
	// Trim keeps the start of the session's live runs: count what it did.
	after, err := j.First(ctx, session)
	if err != nil {
		return 0, err
	}
	return after - first, nil
}

// firstYoungEvent returns the seq of the first event from seq from on that
// must be kept by age: stamped at or after cutoff, or without a readable
// timestamp. It returns head+1 when every event is older.
func firstYoungEvent(ctx context.Context, j Journal, session messages.SessionID, from, head uint64, cutoff time.Time) (uint64, error) {
	after := from - 1
	for after < head {
		evs, err := j.ReadAfter(ctx, session, after, retentionPage)
		if err != nil {
			return 0, err
		}
		if len(evs) == 0 {
			break
		}
		for _, e := range evs {
			ts, ok := EventTime(e.JSON)
			if !ok || !ts.Before(cutoff) {
				return e.Seq, nil
			}
			after = e.Seq
		}
	}
	return after + 1, nil
}

var timestampField = []byte(`"timestamp":"`)

// EventTime reads the timestamp of an encoded envelope without decoding it.
// The envelope's fields come in a fixed order (id, seq, type, timestamp,
// ...; see messages.Envelope.AppendJSON), so the timestamp is in the first
// hundred-odd bytes and the search stops before the payload.
func EventTime(envelope []byte) (time.Time, bool) {
	// id (36 chars), a seq of up to 20 digits and the longest event type fit
	// well inside the first 256 bytes.
	head := envelope[:min(len(envelope), 256)]
	i := bytes.Index(head, timestampField)
	if i < 0 {
		return time.Time{}, false
	}
	rest := envelope[i+len(timestampField):]
	end := bytes.IndexByte(rest, '"')
	if end < 0 {
		return time.Time{}, false
	}
	ts, err := time.Parse(time.RFC3339Nano, string(rest[:end]))
	if err != nil {
		return time.Time{}, false
	}
	return ts, true
}
