package agui

import (
	"slices"
	"sync"
	"time"

	"github.com/conclave-ai/conclave/messages"
)

// suspension is a Conclave run whose AG-UI run ended with an interrupt
// outcome: where its stream stopped and the projection's state there, so
// that the resume can continue the same Conclave run as a new AG-UI run.
// Everything but the fields marked otherwise is fixed once it is added.
type suspension struct {
	tenant  messages.TenantID
	session messages.SessionID
	run     messages.RunID
	// aguiRunID is the AG-UI run that ended with the interrupt outcome.
	aguiRunID string
	// cursor is the last seq that AG-UI run consumed; the next starts after it.
	cursor uint64
	// proj is the projection at cursor, between two AG-UI runs. Whoever
	// streams from here works on a Clone, so a replay can start over.
	proj *Projector
	// interrupts are the ids the outcome reported, in order, with their
	// expiry as the registry had it.
	interrupts []string
	expires    map[string]time.Time
	deadline   time.Time

	// Guarded by suspensions.mu.
	resumedBy string        // the AG-UI runId of the resume that took it, "" until then
	answers   []ResumeEntry // that resume's entries, to recognise a replay
	busy      bool          // a stream is continuing from here
	next      *suspension   // where the resumed AG-UI run ended, if it ended suspended
	finished  bool          // the resumed AG-UI run reached the Conclave run's end
}

// suspensions holds the suspended runs of every thread, indexed by the ids
// of the interrupts they reported. Entries expire ResumeGrace after the
// last of their interrupts expires; the registry never holds more than max.
type suspensions struct {
	now   func() time.Time
	grace time.Duration
	max   int

	mu        sync.Mutex // guards everything below and the guarded fields of each suspension
	byID      map[string]*suspension
	all       map[*suspension]struct{}
	lastPrune time.Time
}

func newSuspensions(now func() time.Time, grace time.Duration, max int) *suspensions {
	return &suspensions{now: now, grace: grace, max: max, byID: map[string]*suspension{}, all: map[*suspension]struct{}{}}
}

// add registers s, which takes over the index of its interrupt ids.
func (r *suspensions) add(s *suspension) {
	now := r.now()
	last := now
	for _, t := range s.expires {
		if t.After(last) {
			last = t
		}
	}
	s.deadline = last.Add(r.grace)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pruneLocked(now, false)
	if len(r.all) >= r.max {
		r.pruneLocked(now, true)
	}
	for len(r.all) >= r.max {
		var oldest *suspension
		for x := range r.all {
			if !x.busy && (oldest == nil || x.deadline.Before(oldest.deadline)) {
				oldest = x
			}
		}
		if oldest == nil {
			break
		}
		r.removeLocked(oldest)
	}
	r.all[s] = struct{}{}
	for _, id := range s.interrupts {
		r.byID[id] = s
	}
}

// find returns the suspension that reported every one of ids, or nil.
func (r *suspensions) find(tenant messages.TenantID, ids []string) *suspension {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pruneLocked(r.now(), false)
	var s *suspension
	for _, id := range ids {
		x := r.byID[id]
		if x == nil || x.tenant != tenant || (s != nil && x != s) {
			return nil
		}
		s = x
	}
	return s
}

// pruneLocked drops expired suspensions, at most once a second unless
// force. Must be called with r.mu held.
func (r *suspensions) pruneLocked(now time.Time, force bool) {
	if !force && now.Sub(r.lastPrune) < time.Second {
		return
	}
	r.lastPrune = now
	for s := range r.all {
		if !s.busy && now.After(s.deadline) {
			r.removeLocked(s)
		}
	}
}

// removeLocked forgets s. Must be called with r.mu held.
func (r *suspensions) removeLocked(s *suspension) {
	delete(r.all, s)
	for _, id := range s.interrupts {
		if r.byID[id] == s {
			delete(r.byID, id)
		}
	}
}

func (r *suspensions) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.all)
}

// sameAnswers reports whether two resumes carry the same entries, in any
// order (a replay of the same resume).
func sameAnswers(a, b []ResumeEntry) bool {
	if len(a) != len(b) {
		return false
	}
	key := func(e ResumeEntry) string { return e.InterruptID + "\x00" + e.Status + "\x00" + string(e.Payload) }
	ka, kb := make([]string, len(a)), make([]string, len(b))
	for i := range a {
		ka[i], kb[i] = key(a[i]), key(b[i])
	}
	slices.Sort(ka)
	slices.Sort(kb)
	return slices.Equal(ka, kb)
}
