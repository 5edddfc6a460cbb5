package audit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/cockroachdb/pebble/v2"

	"github.com/conclave-ai/conclave/messages"
)

// A crash between the journal's fsync of a batch and the audit log's
// fsync of its records would lose those records: the decision happened
// (it is journaled) but is not in the log. Each session's cursor (the last
// seq Record was given) closes that window: at startup, before any hub
// runs, CatchUp reads every session's events after its cursor from the
// journal and records them.

// Source is what CatchUp reads of the journal (journal.Journal has it).
type Source interface {
	Sessions(ctx context.Context) ([]messages.SessionID, error)
	Head(ctx context.Context, session messages.SessionID) (uint64, error)
	ReadAfter(ctx context.Context, session messages.SessionID, after uint64, limit int) ([]*messages.Encoded, error)
}

// catchUpPage is how many events CatchUp reads at a time.
const catchUpPage = 1024

// Keys of the catch-up state.
const (
	prefixCursor = 'c' // c journal-key → sealed cursor
)

// keyStarted marks a store whose cursors cover the journal: written by
// the first CatchUp, once it has derived the log from the journal.
var keyStarted = []byte("i")

// cursor is the value of a cursor key.
type cursor struct {
	Tenant messages.TenantID `json:"tenant"`
	Seq    uint64            `json:"seq"`
}

func cursorKey(key messages.SessionID) []byte { return append([]byte{prefixCursor}, key...) }

// setCursor writes a session's cursor with w (the DB, or a batch: then
// opts is ignored until the batch commits).
func (l *Log) setCursor(w pebble.Writer, tenant messages.TenantID, key messages.SessionID, seq uint64, opts *pebble.WriteOptions) error {
	body, err := json.Marshal(cursor{Tenant: tenant, Seq: seq})
	if err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	k := cursorKey(key)
	if err := w.Set(k, sealValue(k, body), opts); err != nil {
		return fmt.Errorf("audit: cursor: %w", err)
	}
	return nil
}

// getCursor reads a session's cursor; ok is false when it has none.
func (l *Log) getCursor(key messages.SessionID) (cursor, bool, error) {
	var c cursor
	k := cursorKey(key)
	v, closer, err := l.db.Get(k)
	if errors.Is(err, pebble.ErrNotFound) {
		return c, false, nil
	} else if err != nil {
		return c, false, fmt.Errorf("audit: %w", err)
	}
	defer closer.Close()
	body, err := unseal(k, v)
	if err != nil {
		return c, false, err
	}
	if err := json.Unmarshal(body, &c); err != nil {
		return c, false, fmt.Errorf("%w: cursor of %s: %v", ErrCorrupt, key, err)
	}
	return c, true, nil
}

// CatchUp records the decisions src journaled after each session's cursor
// (see Record). Call it before anything else records. It returns how many
// sessions it caught up.
//
// A store that was never started (no start mark: a new log, the first
// start after an upgrade, or a log whose files were lost, its write-ahead
// log deleted after a kill -9) has no cursor: CatchUp then derives the
// whole log from what the journal holds, from each session's first event,
// and warns when that recorded anything (the journal held decisions the
// log did not). A log never starts empty beside a journal that holds
// decisions. Decisions whose events the journal no longer holds
// (retention) cannot be recovered; CatchUp warns of them.
//
// Session keys are "tenant/session" (actors.JournalKey); a session with
// neither a cursor nor a tenant in its key (journaled by a version without
// tenants, and never touched since) is skipped.
func (l *Log) CatchUp(ctx context.Context, src Source) (int, error) {
	release, err := l.acquire()
	if err != nil {
		return 0, err
	}
	defer release()
	if l.ro {
		return 0, ErrReadOnly
	}
	sessions, err := src.Sessions(ctx)
	if err != nil {
		return 0, fmt.Errorf("audit: catch up: %w", err)
	}
	_, closer, err := l.db.Get(keyStarted)
	started := err == nil
	if started {
		closer.Close()
	} else if !errors.Is(err, pebble.ErrNotFound) {
		return 0, fmt.Errorf("audit: %w", err)
	}
	if !started {
		return l.rebuild(ctx, src, sessions)
	}
	n := 0
	for _, key := range sessions {
		tenant, cur, head, ok, err := l.behind(ctx, src, key)
		if err != nil {
			return n, err
		}
		if !ok {
			continue
		}
		l.log.Info("audit: catching up a session's decisions from the journal", "session", key, "after", cur, "head", head)
		n++
		err = l.readSession(ctx, src, key, cur, head, func(envs []*messages.Envelope) error {
			return l.record(tenant, key, envs)
		})
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// behind returns a session's tenant, cursor and head, and whether the
// cursor is behind the head.
func (l *Log) behind(ctx context.Context, src Source, key messages.SessionID) (messages.TenantID, uint64, uint64, bool, error) {
	head, err := src.Head(ctx, key)
	if err != nil {
		return "", 0, 0, false, fmt.Errorf("audit: catch up %s: %w", key, err)
	}
	cur, ok, err := l.getCursor(key)
	if err != nil {
		return "", 0, 0, false, err
	}
	if !ok {
		if cur.Tenant, ok = tenantOfKey(key); !ok {
			l.log.Warn("audit: a session without a tenant in its key and no cursor is not caught up", "session", key)
			return "", 0, 0, false, nil
		}
	}
	return cur.Tenant, cur.Seq, head, cur.Seq < head, nil
}

// readSession hands fn the session's events after after up to head, a
// page at a time, decoded.
func (l *Log) readSession(ctx context.Context, src Source, key messages.SessionID, after, head uint64, fn func([]*messages.Envelope) error) error {
	for after < head {
		encs, err := src.ReadAfter(ctx, key, after, catchUpPage)
		if err != nil {
			return fmt.Errorf("audit: catch up %s: %w", key, err)
		}
		if len(encs) == 0 {
			return nil
		}
		if first := encs[0].Seq; first > after+1 {
			l.log.Warn("audit: the journal no longer holds some events the log never recorded (retention): their decisions are not in the log",
				"session", key, "from_seq", after+1, "to_seq", first-1)
		}
		envs := make([]*messages.Envelope, 0, len(encs))
		for _, enc := range encs {
			env, err := enc.Envelope()
			if err != nil {
				return fmt.Errorf("audit: catch up %s seq %d: %w", key, enc.Seq, err)
			}
			envs = append(envs, env)
		}
		if err := fn(envs); err != nil {
			return err
		}
		after = envs[len(envs)-1].Seq
	}
	return nil
}

// rebuild is CatchUp on a store without the start mark: it derives the log
// from every session's events the journal holds (after the session's
// cursor, if an earlier rebuild stopped midway), in the order of the
// decisions' timestamps across sessions, which is the order their hubs
// recorded them in (one index sequence per tenant covers many sessions).
// It holds the decisions in memory until it has read every session: they
// are human-paced, a few per run.
func (l *Log) rebuild(ctx context.Context, src Source, sessions []messages.SessionID) (int, error) {
	type decision struct {
		tenant messages.TenantID
		key    messages.SessionID
		env    *messages.Envelope
	}
	type caught struct {
		tenant messages.TenantID
		key    messages.SessionID
		head   uint64
	}
	var decisions []decision
	var done []caught
	for _, key := range sessions {
		tenant, cur, head, ok, err := l.behind(ctx, src, key)
		if err != nil {
			return 0, err
		}
		if !ok {
			continue
		}
		done = append(done, caught{tenant, key, head})
		err = l.readSession(ctx, src, key, cur, head, func(envs []*messages.Envelope) error {
			for _, env := range envs {
				if Audited(env.Type) {
					decisions = append(decisions, decision{tenant, key, env})
				}
			}
			return nil
		})
		if err != nil {
			return 0, err
		}
	}
	slices.SortStableFunc(decisions, func(a, b decision) int { return a.env.Timestamp.Compare(b.env.Timestamp) })
	for _, d := range decisions {
		if err := l.record(d.tenant, d.key, []*messages.Envelope{d.env}); err != nil {
			return 0, err
		}
	}
	for _, c := range done {
		if err := l.setCursor(l.db, c.tenant, c.key, c.head, pebble.NoSync); err != nil {
			return 0, err
		}
	}
	if len(decisions) > 0 {
		l.log.Warn("audit: the log had no start mark (a new log, or one whose files were lost) and the journal holds decisions: derived the log from the journal",
			"decisions", len(decisions), "sessions", len(done))
	}
	// Synced: the cursors written before it are durable with it.
	if err := l.db.Set(keyStarted, sealValue(keyStarted, []byte("1")), pebble.Sync); err != nil {
		return 0, fmt.Errorf("audit: %w", err)
	}
	return len(done), nil
}

// Started reports whether the store holds the start mark the first CatchUp
// writes. A store with records and no mark was only written by Record (a
// cluster node); one with neither is new, or lost its files.
func (l *Log) Started() (bool, error) {
	release, err := l.acquire()
	if err != nil {
		return false, err
	}
	defer release()
	_, closer, err := l.db.Get(keyStarted)
	if errors.Is(err, pebble.ErrNotFound) {
		return false, nil
	} else if err != nil {
		return false, fmt.Errorf("audit: %w", err)
	}
	return true, closer.Close()
}

// tenantOfKey is the tenant of a "tenant/session" journal key.
func tenantOfKey(key messages.SessionID) (messages.TenantID, bool) {
	t, _, ok := strings.Cut(string(key), "/")
	if !ok || t == "" {
		return "", false
	}
	return messages.TenantID(t), true
}
