package audit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
// the first CatchUp.
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
// (see Record). Call it before anything else records. The first CatchUp
// of a store (a new one, or the first start after an upgrade) starts the
// log at the journal's heads instead: what was decided before the log
// existed is not recorded. It returns how many sessions it caught up.
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
		b := l.db.NewBatch()
		defer b.Close()
		for _, key := range sessions {
			tenant, ok := tenantOfKey(key)
			if !ok {
				continue
			}
			head, err := src.Head(ctx, key)
			if err != nil {
				return 0, fmt.Errorf("audit: catch up %s: %w", key, err)
			}
			if err := l.setCursor(b, tenant, key, head, nil); err != nil {
				return 0, err
			}
		}
		if err := b.Set(keyStarted, sealValue(keyStarted, []byte("1")), nil); err != nil {
			return 0, fmt.Errorf("audit: %w", err)
		}
		if err := b.Commit(pebble.Sync); err != nil {
			return 0, fmt.Errorf("audit: %w", err)
		}
		return 0, nil
	}
	n := 0
	for _, key := range sessions {
		head, err := src.Head(ctx, key)
		if err != nil {
			return n, fmt.Errorf("audit: catch up %s: %w", key, err)
		}
		cur, ok, err := l.getCursor(key)
		if err != nil {
			return n, err
		}
		if !ok {
			if cur.Tenant, ok = tenantOfKey(key); !ok {
				l.log.Warn("audit: a session without a tenant in its key and no cursor is not caught up", "session", key)
				continue
			}
		}
		if cur.Seq >= head {
			continue
		}
		l.log.Info("audit: catching up a session's decisions from the journal", "session", key, "after", cur.Seq, "head", head)
		n++
		for after := cur.Seq; after < head; {
			encs, err := src.ReadAfter(ctx, key, after, catchUpPage)
			if err != nil {
				return n, fmt.Errorf("audit: catch up %s: %w", key, err)
			}
			if len(encs) == 0 {
				break
			}
			envs := make([]*messages.Envelope, 0, len(encs))
			for _, enc := range encs {
				env, err := enc.Envelope()
				if err != nil {
					return n, fmt.Errorf("audit: catch up %s seq %d: %w", key, enc.Seq, err)
				}
				envs = append(envs, env)
			}
			if err := l.record(cur.Tenant, key, envs); err != nil {
				return n, err
			}
			after = envs[len(envs)-1].Seq
		}
	}
	return n, nil
}

// tenantOfKey is the tenant of a "tenant/session" journal key.
func tenantOfKey(key messages.SessionID) (messages.TenantID, bool) {
	t, _, ok := strings.Cut(string(key), "/")
	if !ok || t == "" {
		return "", false
	}
	return messages.TenantID(t), true
}
