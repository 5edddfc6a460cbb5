// Package runindex keeps the summary of every run that is live in this
// process, for the runs API (status, node counts, outcome). Each live run's
// state is folded from its events as the journal acknowledges them,
// through runstate (the one definition of what a run's events mean, in
// its outline form); a summary is a projection of that state (Summarize).
// Ended runs leave the index once their final summary is stored with the
// journal's run catalogue (see actors: the engine reads ended runs from
// there), so it does not grow with the number of runs ever served.
package runindex

import (
	"slices"
	"sync"
	"time"

	"github.com/conclave-ai/conclave/actors/runstate"
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
	// base is what the events do not say: session, question, creation;
	// while the run is asleep (st is nil), its whole summary.
	base   messages.RunSummary
	st     *runstate.Run
	status messages.RunStatus
}

func (e *entry) summary() messages.RunSummary {
	if e.st == nil {
		return e.base
	}
	return Summarize(e.base, e.st)
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
	x.runs[run] = &entry{tenant: tenant, st: runstate.NewOutline(run), status: messages.StatusPlanning,
		base: messages.RunSummary{RunID: run, SessionID: session, Question: question, CreatedAt: at.UTC(), UpdatedAt: at.UTC()}}
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
	if e == nil || e.tenant != tenant || e.base.SessionID != env.SessionID || e.st == nil {
		// e.st is nil while the run is asleep: it publishes nothing then
		// (it is woken, and Wake called, before it does).
		return messages.RunSummary{}, false
	}
	e.st.Apply(env)
	if st := Status(e.st); st != e.status {
		x.live[e.status]--
		x.live[st]++
		e.status = st
	}
	if !env.Type.Terminal() {
		return messages.RunSummary{}, false
	}
	x.ended[e.status]++
	return e.summary(), true
}

// Remove drops an ended run whose summary is stored elsewhere.
func (x *Index) Remove(run messages.RunID) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if e := x.runs[run]; e != nil {
		x.live[e.status]--
		delete(x.runs, run)
	}
}

// Status is a run's status in its state.
func Status(r *runstate.Run) messages.RunStatus {
	switch p := r.End.(type) {
	case *messages.RunFinishedPayload:
		return messages.StatusFinished
	case *messages.RunErrorPayload:
		switch p.Code {
		case messages.ErrCodeAborted:
			return messages.StatusAborted
		case messages.ErrCodeInterrupted:
			return messages.StatusInterrupted
		}
		return messages.StatusFailed
	}
	switch g := r.Graph; {
	case g != nil && g.Synthesis.Started:
		return messages.StatusSynthesizing
	case r.GateDecided && !r.Rejected:
		return messages.StatusRunning
	}
	return messages.StatusPlanning
}

// Summarize projects a run's state onto its summary; base holds what the
// events do not say (session, and the question and creation time of a run
// whose run_started is gone).
func Summarize(base messages.RunSummary, r *runstate.Run) messages.RunSummary {
	s := base
	s.Status, s.Wave, s.LastSeq = Status(r), -1, r.LastSeq
	if !r.UpdatedAt.IsZero() {
		s.UpdatedAt = r.UpdatedAt
	}
	if r.Started != nil {
		s.TraceID = r.Started.TraceID
	}
	if r.Started != nil && s.Question == "" && s.CreatedAt.IsZero() {
		s.Question, s.CreatedAt = r.Started.Question, r.StartedAt
	}
	if g := r.Graph; g != nil {
		s.Wave, s.Waves, s.Nodes = g.Wave, len(g.Waves), g.Counts()
		for _, n := range g.Nodes {
			if n.State == runstate.Running {
				s.Running++
			}
		}
	}
	s.Usage = r.Usage
	if r.Unpriced == "" {
		cost := r.CostUSD
		s.CostUSD = &cost
	}
	if r.Started != nil {
		s.Budget = r.Started.Budget
	}
	switch p := r.End.(type) {
	case *messages.RunFinishedPayload:
		s.Answer, s.Usage, s.Nodes = p.Answer, p.Usage, p.Nodes
	case *messages.RunErrorPayload:
		s.ErrorCode, s.Error, s.Usage, s.Nodes = p.Code, p.Message, p.Usage, p.Nodes
	}
	if r.Ended {
		at := r.EndedAt
		s.EndedAt, s.Running = &at, 0
	}
	return s
}

// Get returns the summary of a run of tenant that is in the index.
func (x *Index) Get(tenant messages.TenantID, run messages.RunID) (messages.RunSummary, bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	e := x.runs[run]
	if e == nil || e.tenant != tenant {
		return messages.RunSummary{}, false
	}
	return e.summary(), true
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

// Asleep reports whether run is parked (runstate.Run.Parked) and has
// published nothing for quiet: a run that can be put to sleep.
func (x *Index) Asleep(run messages.RunID, now time.Time, quiet time.Duration) bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	e := x.runs[run]
	return e != nil && e.st != nil && now.Sub(e.st.UpdatedAt) >= quiet && e.st.Parked()
}

// LastSeq is the seq of run's last journaled event (0 if it is not in the
// index).
func (x *Index) LastSeq(run messages.RunID) uint64 {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if e := x.runs[run]; e != nil {
		return e.summary().LastSeq
	}
	return 0
}

// Interrupts is how many interrupts of run are pending in its journaled
// events (0 while it is asleep).
func (x *Index) Interrupts(run messages.RunID) int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if e := x.runs[run]; e != nil && e.st != nil {
		return len(e.st.Interrupts)
	}
	return 0
}

// Sleep keeps only the summary of run, which has fallen asleep: its
// outline state leaves memory until Wake gives it back.
func (x *Index) Sleep(run messages.RunID) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if e := x.runs[run]; e != nil && e.st != nil {
		e.base, e.st = e.summary(), nil
	}
}

// Wake gives run, woken, its outline state again, folded from its events
// (NewOutline).
func (x *Index) Wake(run messages.RunID, outline *runstate.Run) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if e := x.runs[run]; e != nil && e.st == nil {
		b := e.base // back to what Register knew
		e.base = messages.RunSummary{RunID: b.RunID, SessionID: b.SessionID, Question: b.Question, CreatedAt: b.CreatedAt, UpdatedAt: b.CreatedAt}
		e.st = outline
	}
}
