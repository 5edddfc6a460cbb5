package actors

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/conclave-ai/conclave/actors/runindex"
	"github.com/conclave-ai/conclave/actors/runstate"
	"github.com/conclave-ai/conclave/journal"
	"github.com/conclave-ai/conclave/messages"
)

// Runs: where a run's summary lives.
//
// A run that is live in this process is in the in-memory run index
// (runindex), folded from its events as the hub journals them. When its
// terminal event is journaled, its final summary is stored with the
// journal's run catalogue (journal.Catalog.PutRunSummary) by the summary
// writer, off the hub's mailbox, and the run leaves the index: memory does
// not grow with the runs served. An ended run is read from the catalogue;
// one whose summary was lost (a crash between its end and the summary's
// store) is folded again from its events, and stored.

// runReadTimeout bounds reading an ended run from the journal.
const runReadTimeout = 30 * time.Second

// Run returns the summary of a run owned by tenant.
func (e *Engine) Run(tenant messages.TenantID, run messages.RunID) (messages.RunSummary, error) {
	tenant = tenantOr(tenant)
	if s, ok := e.index.Get(tenant, run); ok {
		return s, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), runReadTimeout)
	defer cancel()
	info, ok, err := e.catalog.Run(ctx, run)
	if err != nil {
		return messages.RunSummary{}, fmt.Errorf("actors: run %s: %w", run, err)
	}
	if !ok || e.ownerOf(ctx, info) != tenant {
		return messages.RunSummary{}, fmt.Errorf("%w: %s", ErrRunNotFound, run)
	}
	if s, ok := e.index.Get(tenant, run); ok { // registered since: it is live after all
		return s, nil
	}
	if info.LastSeq == 0 && e.cfg.Placement != nil {
		// Live, but not here: another node owns its session (the error
		// names it, and the API forwards the call there), or its owner
		// died and this node takes the session over now.
		if err := e.cfg.Placement.Claim(ctx, info.Session); err != nil {
			return messages.RunSummary{}, err
		}
		if s, ok := e.index.Get(tenant, run); ok {
			return s, nil
		}
	}
	return e.storedSummary(ctx, info)
}

// Runs lists tenant's runs in the order they started (see runindex.Filter),
// with the cursor of the next page ("" on the last page). A page may hold
// fewer than f.Limit runs when the filters skip many: the cursor then
// continues where the search stopped.
func (e *Engine) Runs(ctx context.Context, f runindex.Filter) ([]messages.RunSummary, messages.RunID, error) {
	f.Tenant = tenantOr(f.Tenant)
	var out []messages.RunSummary
	after := f.After
	// Each call reads at most this many catalogue entries, so a filter
	// that matches little cannot make one request scan every run.
	budget := max(10*f.Limit, journal.MaxListRuns)
	for budget > 0 {
		page, next, err := e.catalog.ListRuns(ctx, string(f.Tenant), after, min(budget, journal.MaxListRuns))
		if err != nil {
			return nil, "", fmt.Errorf("actors: list runs: %w", err)
		}
		budget -= len(page)
		for _, info := range page {
			after = info.Run
			s, ok := e.index.Get(f.Tenant, info.Run)
			if !ok {
				if s, err = e.storedSummary(ctx, info); err != nil {
					return nil, "", err
				}
			}
			if !f.Match(s) {
				continue
			}
			if len(out) == f.Limit {
				return out, out[len(out)-1].RunID, nil
			}
			out = append(out, s)
		}
		if next == "" {
			return out, "", nil
		}
	}
	return out, after, nil
}

// ownerOf is the tenant of a run from the catalogue: the scope of its
// session's key, or for a legacy session the tenant recovery found.
func (e *Engine) ownerOf(ctx context.Context, info journal.RunInfo) messages.TenantID {
	if k, ok := sessKeyOf(info.Session); ok {
		return k.tenant
	}
	return e.legacyTenant[info.Session]
}

// storedRun is what the engine stores with the catalogue for an ended
// run: its final summary, without its answer when that would make it too
// large for the catalogue (journal.MaxRunSummary): the answer is then
// read from the run's terminal event (RunInfo.LastSeq) when asked for.
type storedRun struct {
	Summary         messages.RunSummary `json:"summary"`
	AnswerInJournal bool                `json:"answer_in_journal,omitempty"`
}

// encodeStoredRun encodes an ended run's summary for the catalogue.
func encodeStoredRun(s messages.RunSummary) ([]byte, error) {
	b, err := json.Marshal(storedRun{Summary: s})
	if err != nil || len(b) <= journal.MaxRunSummary {
		return b, err
	}
	s.Answer = ""
	return json.Marshal(storedRun{Summary: s, AnswerInJournal: true})
}

// storedSummary decodes a run's stored summary, or folds it again from
// the run's events (and stores it) when it was lost or never stored.
func (e *Engine) storedSummary(ctx context.Context, info journal.RunInfo) (messages.RunSummary, error) {
	if len(info.Summary) > 0 {
		var st storedRun
		if err := json.Unmarshal(info.Summary, &st); err == nil && st.Summary.RunID == info.Run {
			if st.AnswerInJournal {
				if env, err := e.eventAt(ctx, info.Session, info.LastSeq); err == nil && env != nil {
					if p, ok := env.Payload.(*messages.RunFinishedPayload); ok {
						st.Summary.Answer = p.Answer
					}
				}
			}
			return st.Summary, nil
		}
		e.cfg.Logger.Warn("run summary unreadable; folding it again from the journal", "run", info.Run)
	}
	s, complete, err := e.foldRun(ctx, info)
	if err != nil {
		return messages.RunSummary{}, err
	}
	// Never store what a trimmed journal left of the run, nor the summary
	// of a run that has not ended: in cluster mode another node may fold a
	// live run it does not hold, and its store could land after the
	// owner's final one.
	if complete && info.LastSeq != 0 {
		if b, err := encodeStoredRun(s); err == nil {
			if err := e.catalog.PutRunSummary(ctx, info.Run, b); err != nil {
				e.cfg.Logger.Warn("store a refolded run summary", "run", info.Run, "err", err)
			}
		}
	}
	return s, nil
}

// eventAt reads the event with seq of a session (nil if it is not kept).
func (e *Engine) eventAt(ctx context.Context, key messages.SessionID, seq uint64) (*messages.Envelope, error) {
	if seq == 0 {
		return nil, nil
	}
	evs, err := e.cfg.Journal.ReadAfter(ctx, key, seq-1, 1)
	if err != nil || len(evs) == 0 || evs[0].Seq != seq {
		return nil, err
	}
	return evs[0].Envelope()
}

// foldRun folds an ended run's summary from its events in the journal.
// complete is false when the journal no longer holds its terminal event
// (retention trimmed it): the summary then says the run ended, and what
// is left of it.
func (e *Engine) foldRun(ctx context.Context, info journal.RunInfo) (s messages.RunSummary, complete bool, err error) {
	s, err = e.foldEvents(ctx, info)
	if err != nil || info.LastSeq == 0 || s.Status.Terminal() {
		return s, err == nil && s.Status.Terminal(), err
	}
	s.Status, s.ErrorCode = messages.StatusFailed, messages.ErrCodeInternal
	s.Error = "the run has ended, but retention trimmed its events before its summary was stored"
	return s, false, nil
}

// foldEvents folds what the journal keeps of a run's events.
func (e *Engine) foldEvents(ctx context.Context, info journal.RunInfo) (messages.RunSummary, error) {
	base := messages.RunSummary{RunID: info.Run, SessionID: info.Session}
	if k, ok := sessKeyOf(info.Session); ok {
		base.SessionID = k.id
	}
	st := runstate.NewOutline(info.Run)
	err := e.scanRuns(ctx, info.Session, info.FirstSeq, info.LastSeq, map[messages.RunID]bool{info.Run: true}, func(env *messages.Envelope) bool {
		st.Apply(env)
		return true
	})
	return runindex.Summarize(base, st), err
}

// summaryWriter stores the final summaries of ended runs with the
// journal's catalogue, off the hubs' mailboxes (a store waits for a group
// commit), then drops the runs from the in-memory index. Its queue holds
// what the index held before: summaries of runs that just ended.
type summaryWriter struct {
	catalog journal.Catalog
	index   *runindex.Index
	e       *Engine

	mu     sync.Mutex // guards queue and closed
	queue  []endedRun
	closed bool
	wake   chan struct{} // capacity 1
}

type endedRun struct {
	run     messages.RunID
	summary messages.RunSummary
}

func newSummaryWriter(e *Engine, catalog journal.Catalog, index *runindex.Index) *summaryWriter {
	return &summaryWriter{e: e, catalog: catalog, index: index, wake: make(chan struct{}, 1)}
}

// ended queues a run's final summary. It never blocks (hubs call it).
func (w *summaryWriter) ended(run messages.RunID, s messages.RunSummary) {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return // the run stays in the index: the engine is gone anyway
	}
	w.queue = append(w.queue, endedRun{run, s})
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// run stores queued summaries until close, then what is left. The
// engine's store group owns it (Shutdown waits for it).
func (w *summaryWriter) run() {
	for {
		w.mu.Lock()
		batch, closed := w.queue, w.closed
		w.queue = nil
		w.mu.Unlock()
		for _, r := range batch {
			w.store(r)
		}
		if closed && len(batch) == 0 {
			return
		}
		if len(batch) == 0 {
			<-w.wake
		}
	}
}

func (w *summaryWriter) store(r endedRun) {
	ctx, cancel := context.WithTimeout(context.Background(), runReadTimeout)
	defer cancel()
	b, err := encodeStoredRun(r.summary)
	if err == nil {
		err = w.catalog.PutRunSummary(ctx, r.run, b)
	}
	if err != nil {
		// The run leaves memory anyway: Run folds its summary again from
		// its events when it is next read.
		w.e.cfg.Logger.Warn("store the summary of an ended run", "run", r.run, "err", err)
	}
	w.index.Remove(r.run)
}

// close makes run store what is queued and return. Idempotent.
func (w *summaryWriter) close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// scanRuns reads a session's events from seq from (1 for the start) up to
// through (0: to the end) and hands fn, decoded, those of runs (nil: of
// every run). fn returns false to stop. It is the one loop that reads a
// session: recovery, rewind, refolding a summary and finding a legacy
// session's tenant use it.
func (e *Engine) scanRuns(ctx context.Context, key messages.SessionID, from, through uint64, runs map[messages.RunID]bool, fn func(*messages.Envelope) bool) error {
	for after := max(from, 1) - 1; ; {
		limit := 4096
		if through != 0 {
			if after >= through {
				return nil
			}
			limit = int(min(uint64(limit), through-after)) // read nothing past through
		}
		batch, err := e.cfg.Journal.ReadAfter(ctx, key, after, limit)
		if err != nil {
			return fmt.Errorf("actors: read session %s: %w", key, err)
		}
		if len(batch) == 0 {
			return nil
		}
		for _, enc := range batch {
			if through != 0 && enc.Seq > through {
				return nil
			}
			if runs != nil && !runs[enc.RunID] {
				continue
			}
			env, err := enc.Envelope()
			if err != nil {
				return fmt.Errorf("actors: session %s seq %d: %w", key, enc.Seq, err)
			}
			if !fn(env) {
				return nil
			}
		}
		after = batch[len(batch)-1].Seq
	}
}
