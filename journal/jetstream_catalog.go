package journal

// The run catalogue of JetStream (see Catalog, and jetstream.go for the
// subjects). Its records are published in the same atomic batch as the
// events that start and end runs.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/conclave-ai/conclave/messages"
)

// jsRunRecord is the body of a run's start record and live marker.
type jsRunRecord struct {
	Session messages.SessionID `json:"session"`
	First   uint64             `json:"first"`
}

// jsEndRecord is the body of a run's end record.
type jsEndRecord struct {
	Session messages.SessionID `json:"session"`
	Last    uint64             `json:"last"`
}

func jsonMsg(subject string, v any) *nats.Msg {
	m := nats.NewMsg(subject)
	m.Data, _ = json.Marshal(v) // plain structs: cannot fail
	return m
}

// catalogMsgs returns the catalogue records a batch of session s adds, and
// the live markers its ends make obsolete.
func (j *JetStream) catalogMsgs(ctx context.Context, s messages.SessionID, events []*messages.Encoded) (msgs []*nats.Msg, ended []string, err error) {
	for _, ch := range runChanges(events) {
		info, known, err := j.runRecord(ctx, ch.run)
		if err != nil {
			return nil, nil, err
		}
		live := j.subject("live", string(s), string(ch.run))
		if ch.start != 0 && !known {
			rec := jsRunRecord{Session: s, First: ch.start}
			msgs = append(msgs, jsonMsg(j.subject("run", string(ch.run)), rec))
			if scope := scopeOf(s); scope != "" {
				msgs = append(msgs, nats.NewMsg(j.subject("scope", scope, string(ch.run))))
			}
			if ch.end <= ch.start {
				msgs = append(msgs, jsonMsg(live, rec))
				continue
			}
			// Started and ended in this batch: no live marker.
			msgs = append(msgs, jsonMsg(j.subject("end", string(ch.run)), jsEndRecord{Session: s, Last: ch.end}))
			continue
		}
		if ch.end != 0 && known && info.LastSeq == 0 && ch.end > info.FirstSeq && info.Session == s {
			msgs = append(msgs, jsonMsg(j.subject("end", string(ch.run)), jsEndRecord{Session: s, Last: ch.end}))
			ended = append(ended, live)
		}
	}
	return msgs, ended, nil
}

// runRecord reads a run's start and end records (not its summary).
func (j *JetStream) runRecord(ctx context.Context, run messages.RunID) (RunInfo, bool, error) {
	m, err := j.last(ctx, j.subject("run", string(run)))
	if err != nil || m == nil {
		return RunInfo{}, false, err
	}
	var rec jsRunRecord
	if err := json.Unmarshal(m.Data, &rec); err != nil {
		return RunInfo{}, false, corruptf("run %s: catalogue record: %v", run, err)
	}
	info := RunInfo{Run: run, Session: rec.Session, FirstSeq: rec.First}
	end, err := j.last(ctx, j.subject("end", string(run)))
	if err != nil {
		return RunInfo{}, false, err
	}
	if end != nil {
		var e jsEndRecord
		if err := json.Unmarshal(end.Data, &e); err != nil {
			return RunInfo{}, false, corruptf("run %s: end record: %v", run, err)
		}
		info.LastSeq = e.Last
	}
	return info, true, nil
}

// runInfo reads everything the catalogue knows of a run.
func (j *JetStream) runInfo(ctx context.Context, run messages.RunID) (RunInfo, bool, error) {
	info, ok, err := j.runRecord(ctx, run)
	if err != nil || !ok {
		return info, ok, err
	}
	sum, err := j.last(ctx, j.subject("sum", string(run)))
	if err != nil {
		return RunInfo{}, false, err
	}
	if sum != nil {
		info.Summary = append([]byte{}, sum.Data...)
	}
	return info, true, nil
}

// each calls fn with every message on subject (wildcards allowed) from
// stream seq from on, in stream order, until fn returns false.
func (j *JetStream) each(ctx context.Context, subject string, from uint64, fn func(*jetstream.RawStreamMsg) (bool, error)) error {
	for {
		m, err := j.next(ctx, subject, from)
		if err != nil || m == nil {
			return err
		}
		if more, err := fn(m); err != nil || !more {
			return err
		}
		from = m.Sequence + 1
	}
}

// lastToken returns the id in the last token of a subject.
func lastToken(subject string) (string, error) {
	return SubjectUntoken(subject[strings.LastIndexByte(subject, '.')+1:])
}

// liveRuns lists the runs whose live markers match filter and which have no end.
func (j *JetStream) liveRuns(ctx context.Context, filter string) ([]RunInfo, error) {
	var out []RunInfo
	err := j.each(ctx, filter, 1, func(m *jetstream.RawStreamMsg) (bool, error) {
		id, err := lastToken(m.Subject)
		if err != nil {
			return false, corruptf("live marker %q: %v", m.Subject, err)
		}
		info, ok, err := j.runInfo(ctx, messages.RunID(id))
		if err != nil {
			return false, err
		}
		if ok && info.LastSeq == 0 {
			out = append(out, info)
		}
		return true, nil
	})
	return out, err
}

// LiveRuns implements Catalog.
func (j *JetStream) LiveRuns(ctx context.Context) ([]RunInfo, error) {
	if err := j.check(ctx); err != nil {
		return nil, err
	}
	return j.liveRuns(ctx, j.opts.Prefix+".live.*.*")
}

// SessionLiveRuns lists the live runs of one session, reading only that
// session's live markers (LiveRuns reads every session's). A cluster node
// taking a session over recovers them (actors.Engine.Adopt).
func (j *JetStream) SessionLiveRuns(ctx context.Context, s messages.SessionID) ([]RunInfo, error) {
	if err := j.check(ctx); err != nil {
		return nil, err
	}
	return j.liveRuns(ctx, j.subject("live", string(s))+".*")
}

// Run implements Catalog.
func (j *JetStream) Run(ctx context.Context, run messages.RunID) (RunInfo, bool, error) {
	if err := j.check(ctx); err != nil {
		return RunInfo{}, false, err
	}
	return j.runInfo(ctx, run)
}

// ListRuns implements Catalog.
func (j *JetStream) ListRuns(ctx context.Context, scope string, after messages.RunID, limit int) ([]RunInfo, messages.RunID, error) {
	if err := j.check(ctx); err != nil {
		return nil, "", err
	}
	limit, err := checkListArgs(scope, limit)
	if err != nil || limit <= 0 {
		return nil, "", err
	}
	filter, cursor := j.opts.Prefix+".run.*", func(r messages.RunID) string { return j.subject("run", string(r)) }
	if scope != "" {
		filter = j.subject("scope", scope) + ".*"
		cursor = func(r messages.RunID) string { return j.subject("scope", scope, string(r)) }
	}
	from := uint64(1)
	if after != "" {
		m, err := j.last(ctx, cursor(after))
		if err != nil {
			return nil, "", err
		}
		if m == nil {
			return nil, "", fmt.Errorf("%w: list runs after %q", ErrUnknownRun, after)
		}
		from = m.Sequence + 1
	}
	var out []RunInfo
	var next messages.RunID
	err = j.each(ctx, filter, from, func(m *jetstream.RawStreamMsg) (bool, error) {
		if len(out) == limit {
			next = out[len(out)-1].Run
			return false, nil
		}
		id, err := lastToken(m.Subject)
		if err != nil {
			return false, corruptf("run record %q: %v", m.Subject, err)
		}
		info, ok, err := j.runInfo(ctx, messages.RunID(id))
		if err != nil {
			return false, err
		}
		if ok {
			out = append(out, info)
		}
		return true, nil
	})
	if err != nil {
		return nil, "", err
	}
	return out, next, nil
}

// PutRunSummary implements Catalog. A summary must also fit the server's
// max payload (1 MB by default, less the headers).
func (j *JetStream) PutRunSummary(ctx context.Context, run messages.RunID, summary []byte) error {
	if err := j.check(ctx); err != nil {
		return err
	}
	if len(summary) > MaxRunSummary {
		return fmt.Errorf("journal: run %s: summary of %d bytes is larger than %d", run, len(summary), MaxRunSummary)
	}
	if len(summary) > j.maxMsg {
		return fmt.Errorf("journal: run %s: summary of %d bytes is larger than the server's max payload allows (%d)", run, len(summary), j.maxMsg)
	}
	m, err := j.last(ctx, j.subject("run", string(run)))
	if err != nil {
		return err
	}
	if m == nil {
		return fmt.Errorf("%w: %s", ErrUnknownRun, run)
	}
	msg := nats.NewMsg(j.subject("sum", string(run)))
	msg.Header.Set(jetstream.MsgRollup, jetstream.MsgRollupSubject)
	msg.Data = summary
	if _, err = j.publish(ctx, []*nats.Msg{msg}); errors.Is(err, errDuplicate) {
		return nil // an earlier attempt stored it
	}
	return err
}
