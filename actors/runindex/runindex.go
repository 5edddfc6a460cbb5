// Package runindex keeps the summary of every run that is live in this
// process, folded from the run's events as the journal acknowledges them,
// for the runs API (status, node counts, outcome). Ended runs leave it
// once their final summary is stored with the journal's run catalogue
// (see actors: the engine reads ended runs from there), so it does not
// grow with the number of runs ever served. Fold is the one definition of
// how events change a summary; recovery folds the journal through it.
package runindex

import (
	"slices"
	"sync"
	"time"

	"github.com/conclave-ai/conclave/messages"
)

// Index holds the summaries of live runs. Hubs apply events as the
// journal acknowledges them; API handlers read. All methods are safe for
// concurrent use.
type Index struct {
	mu   sync.RWMutex // guards everything below
	runs map[messages.RunID]*entry
	// live counts the runs in the index by status; ended counts the runs
	// that ended in this process since it started, by terminal status.
	live  map[messages.RunStatus]int
	ended map[messages.RunStatus]int
}

type entry struct {
	tenant messages.TenantID
	sum    messages.RunSummary
}

// New returns an empty index.
func New() *Index {
	return &Index{runs: map[messages.RunID]*entry{}, live: map[messages.RunStatus]int{}, ended: map[messages.RunStatus]int{}}
}

// Register records a new run before its first event.
func (x *Index) Register(tenant messages.TenantID, run messages.RunID, session messages.SessionID, question string, at time.Time) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if _, ok := x.runs[run]; ok {
		return
	}
	x.runs[run] = &entry{tenant: tenant, sum: messages.RunSummary{
		RunID: run, SessionID: session, Question: question, Status: messages.StatusPlanning,
		CreatedAt: at.UTC(), UpdatedAt: at.UTC(), Wave: -1,
	}}
	x.live[messages.StatusPlanning]++
}

// Apply folds one event of a session of tenant into its run's summary.
// Events of runs not in the index, or not of that tenant and session, are
// ignored. When env is the run's terminal event it returns the run's final
// summary (ended is true): the caller stores it and then calls Remove.
func (x *Index) Apply(tenant messages.TenantID, env *messages.Envelope) (final messages.RunSummary, ended bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	e := x.runs[env.RunID]
	if e == nil || e.tenant != tenant || e.sum.SessionID != env.SessionID {
		return messages.RunSummary{}, false
	}
	s := &e.sum
	before := s.Status
	Fold(s, env)
	if s.Status != before {
		x.live[before]--
		x.live[s.Status]++
	}
	if !env.Type.Terminal() {
		return messages.RunSummary{}, false
	}
	x.ended[s.Status]++
	return *s, true
}

// Remove drops an ended run whose summary is stored elsewhere.
func (x *Index) Remove(run messages.RunID) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if e := x.runs[run]; e != nil {
		x.live[e.sum.Status]--
		delete(x.runs, run)
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

// Get returns the summary of a run of tenant that is in the index.
func (x *Index) Get(tenant messages.TenantID, run messages.RunID) (messages.RunSummary, bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	e := x.runs[run]
	if e == nil || e.tenant != tenant {
		return messages.RunSummary{}, false
	}
	return e.sum, true
}

// Len is the number of runs in the index.
func (x *Index) Len() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return len(x.runs)
}

// Filter selects runs for listing.
type Filter struct {
	Tenant  messages.TenantID
	Session messages.SessionID // empty: any
	Status  messages.RunStatus // empty: any
	// After is the cursor: the last run of the previous page ("" for the first page).
	After messages.RunID
	Limit int
}

// Match reports whether a summary of tenant's passes f's session and
// status filters.
func (f Filter) Match(s messages.RunSummary) bool {
	return (f.Session == "" || s.SessionID == f.Session) && (f.Status == "" || s.Status == f.Status)
}

// Counts returns, by status, the runs live in the index (non-terminal
// statuses) and the runs that ended since the process started (terminal
// statuses), for metrics.
func (x *Index) Counts() map[messages.RunStatus]int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	out := make(map[messages.RunStatus]int, len(allStatuses))
	for st, n := range x.live {
		if !st.Terminal() {
			out[st] = n
		}
	}
	for st, n := range x.ended {
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
