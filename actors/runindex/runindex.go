// Package runindex keeps a summary of every run, folded from the run's
// events, for the runs API (status, node counts, outcome). The same fold
// rebuilds the index from a journal after a restart.
package runindex

import (
	"slices"
	"sync"
	"time"

	"github.com/conclave-ai/conclave/messages"
)

// Index holds the summaries. Hubs apply events as the journal acknowledges
// them; API handlers read. All methods are safe for concurrent use.
type Index struct {
	mu     sync.RWMutex // guards everything below
	runs   map[messages.RunID]*entry
	order  []messages.RunID // registration order, for stable pagination
	active map[messages.RunStatus]int
}

type entry struct {
	tenant messages.TenantID
	pos    int // in order
	sum    messages.RunSummary
}

// New returns an empty index.
func New() *Index {
	return &Index{runs: map[messages.RunID]*entry{}, active: map[messages.RunStatus]int{}}
}

// Register records a new run before its first event.
func (x *Index) Register(tenant messages.TenantID, run messages.RunID, session messages.SessionID, question string, at time.Time) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if _, ok := x.runs[run]; ok {
		return
	}
	x.runs[run] = &entry{tenant: tenant, pos: len(x.order), sum: messages.RunSummary{
		RunID: run, SessionID: session, Question: question, Status: messages.StatusPlanning,
		CreatedAt: at.UTC(), UpdatedAt: at.UTC(), Wave: -1,
	}}
	x.order = append(x.order, run)
	x.active[messages.StatusPlanning]++
}

// Apply folds one event into its run's summary. Events of unregistered runs
// are ignored.
func (x *Index) Apply(env *messages.Envelope) {
	x.mu.Lock()
	defer x.mu.Unlock()
	e := x.runs[env.RunID]
	if e == nil {
		return
	}
	s := &e.sum
	before := s.Status
	Fold(s, env)
	if s.Status != before {
		x.active[before]--
		x.active[s.Status]++
	}
}

// Fold applies env to s. It is the one definition of how events change a
// run's summary.
func Fold(s *messages.RunSummary, env *messages.Envelope) {
	s.UpdatedAt = env.Timestamp
	s.LastSeq = env.Seq
	switch p := env.Payload.(type) {
	case *messages.PlanProposedPayload:
		s.Nodes.Total = len(p.Plan.Nodes)
		s.Waves = len(p.Waves)
	case *messages.RunRewoundPayload:
		s.Status = messages.StatusRunning
		s.Nodes.Total, s.Waves = len(p.Plan.Nodes), len(p.Waves)
		s.Nodes.Completed = len(p.Reused)
	case *messages.PlanApprovedPayload:
		s.Status = messages.StatusRunning
		if p.Plan != nil { // an edited plan replaces the proposed one
			s.Nodes.Total = len(p.Plan.Nodes)
			s.Waves = len(p.Waves)
		}
	case *messages.WaveStartedPayload:
		s.Wave = p.Wave
	case *messages.NodeStartedPayload:
		s.Running++
	case *messages.NodeCompletedPayload:
		s.Running--
		s.Nodes.Completed++
	case *messages.NodeFailedPayload:
		s.Running--
		s.Nodes.Failed++
	case *messages.NodeCancelledPayload:
		s.Running--
		s.Nodes.Cancelled++
	case *messages.NodeSkippedPayload:
		s.Nodes.Skipped++
	case *messages.SynthesisStartedPayload:
		s.Status = messages.StatusSynthesizing
	case *messages.RunFinishedPayload:
		s.Status, s.Answer, s.Usage, s.Nodes = messages.StatusFinished, p.Answer, p.Usage, p.Nodes
		s.Running = 0
		s.EndedAt = &env.Timestamp
	case *messages.RunErrorPayload:
		s.Status = messages.StatusFailed
		switch p.Code {
		case messages.ErrCodeAborted:
			s.Status = messages.StatusAborted
		case messages.ErrCodeInterrupted:
			s.Status = messages.StatusInterrupted
		}
		s.ErrorCode, s.Error, s.Usage, s.Nodes = p.Code, p.Message, p.Usage, p.Nodes
		s.Running = 0
		s.EndedAt = &env.Timestamp
	}
}

// Get returns the summary of run if tenant owns it.
func (x *Index) Get(tenant messages.TenantID, run messages.RunID) (messages.RunSummary, bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	e := x.runs[run]
	if e == nil || e.tenant != tenant {
		return messages.RunSummary{}, false
	}
	return e.sum, true
}

// Filter selects runs for List.
type Filter struct {
	Tenant  messages.TenantID
	Session messages.SessionID // empty: any
	Status  messages.RunStatus // empty: any
	// After is the run id the previous page ended with (empty: first page).
	After messages.RunID
	Limit int
}

// List returns up to f.Limit summaries in registration order after f.After,
// and the cursor of the next page ("" when there is none).
func (x *Index) List(f Filter) ([]messages.RunSummary, messages.RunID) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	start := 0
	if f.After != "" {
		e, ok := x.runs[f.After]
		if !ok {
			return nil, ""
		}
		start = e.pos + 1
	}
	var out []messages.RunSummary
	for i := start; i < len(x.order); i++ {
		e := x.runs[x.order[i]]
		if e.tenant != f.Tenant || (f.Session != "" && e.sum.SessionID != f.Session) || (f.Status != "" && e.sum.Status != f.Status) {
			continue
		}
		if len(out) == f.Limit {
			return out, out[len(out)-1].RunID
		}
		out = append(out, e.sum)
	}
	return out, ""
}

// CountByStatus returns how many runs are in each status.
func (x *Index) CountByStatus() map[messages.RunStatus]int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	out := make(map[messages.RunStatus]int, len(x.active))
	for st, n := range x.active {
		out[st] = n
	}
	return out
}

// Statuses lists every run status, for exporting zero counts.
func Statuses() []messages.RunStatus {
	return slices.Clone(allStatuses)
}

var allStatuses = []messages.RunStatus{
	messages.StatusPlanning, messages.StatusRunning, messages.StatusSynthesizing,
	messages.StatusFinished, messages.StatusFailed, messages.StatusAborted, messages.StatusInterrupted,
}
