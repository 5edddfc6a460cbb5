package soak

import (
	"math/rand/v2"
	"sync"
)

// recentRun is a run the clients may follow.
type recentRun struct {
	session, run string
	// cursorMax is the largest cursor a client may send for the session
	// without being ahead of it: the last seq known of the session when
	// the run started (0 if none), then the run's last seq once it ended.
	cursorMax uint64
	ended     bool
}

// recentRuns is a ring of the runs started last, from which the clients
// pick. It is safe for concurrent use.
type recentRuns struct {
	mu   sync.Mutex // guards the fields below
	ring []recentRun
	next int // slot of the next add
	n    int // filled slots
	// sessionLast is the last seq known of each reused session (nil when
	// every run has its own session: nothing to remember).
	sessionLast map[string]uint64
}

func newRecentRuns(size int, reusedSessions bool) *recentRuns {
	r := &recentRuns{ring: make([]recentRun, size)}
	if reusedSessions {
		r.sessionLast = map[string]uint64{}
	}
	return r
}

// add records a run that was just created.
func (r *recentRuns) add(session, run string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ring[r.next] = recentRun{session: session, run: run, cursorMax: r.sessionLast[session]}
	r.next = (r.next + 1) % len(r.ring)
	r.n = min(r.n+1, len(r.ring))
}

// ended records that run ended with lastSeq its session's seq.
func (r *recentRuns) ended(session, run string, lastSeq uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sessionLast != nil {
		r.sessionLast[session] = max(r.sessionLast[session], lastSeq)
	}
	for i := range r.ring[:r.n] {
		if e := &r.ring[i]; e.run == run {
			e.cursorMax, e.ended = max(e.cursorMax, lastSeq), true
			return
		}
	}
}

// pick returns a random recent run; ok is false while there is none.
func (r *recentRuns) pick(rng *rand.Rand) (recentRun, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n == 0 {
		return recentRun{}, false
	}
	return r.ring[rng.IntN(r.n)], true
}
