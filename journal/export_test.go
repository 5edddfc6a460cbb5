package journal

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/conclave-ai/conclave/messages"
)

// WithFS returns opts with the filesystem replaced (error injection, fsync
// counting).
func WithFS(opts Options, fs vfs.FS) Options {
	opts.FS = fs
	return opts
}

// QueuedCommits is how many batches wait for the committer.
func QueuedCommits(d *Durable) int { return len(d.commits) }

// PutRecord stores a format-2 record of session directly, chained to prev,
// bypassing Append (to plant damage).
func PutRecord(d *Durable, session messages.SessionID, seq uint64, prev uint32, e *messages.Encoded) error {
	key := eventKey(nil, sessionKey(keyEvent, session), seq)
	v := make([]byte, recordLen(string(e.Type), string(e.RunID), len(e.JSON)))
	putRecord(v, key, prev, string(e.Type), string(e.RunID), e.JSON)
	return d.db.Set(key, v, pebble.Sync)
}

// PutRaw stores value under session's event key seq, bypassing Append.
func PutRaw(d *Durable, session messages.SessionID, seq uint64, value []byte) error {
	return d.db.Set(eventKey(nil, sessionKey(keyEvent, session), seq), value, pebble.Sync)
}

// DeleteRaw deletes session's event seq, bypassing Append.
func DeleteRaw(d *Durable, session messages.SessionID, seq uint64) error {
	return d.db.Delete(eventKey(nil, sessionKey(keyEvent, session), seq), pebble.Sync)
}

// RecordSum returns the sum stored in session's event seq.
func RecordSum(d *Durable, session messages.SessionID, seq uint64) (uint32, error) {
	key := eventKey(nil, sessionKey(keyEvent, session), seq)
	v, ok, err := d.get(key)
	if err != nil || !ok {
		return 0, fmt.Errorf("seq %d: %v, %w", seq, ok, err)
	}
	r, err := decodeRecord(key, v)
	return r.sum, err
}

// EvictIdle runs one pass of the idle-session evictor (idle.go) and
// returns how many sessions left memory.
func EvictIdle(d *Durable) (int, error) { return d.evictIdle() }

// Flushes is how many memtable flushes the store has done.
func Flushes(d *Durable) int64 { return d.db.Metrics().Flush.Count }
