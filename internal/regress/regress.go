// Package regress holds switches that put fixed bugs back, one per bug
// class the deterministic simulator (testkit/sim) must find. The
// simulator's own tests turn one on, run seeds, and show that a seed fails
// within a stated number; everything else leaves them off, and production
// code only ever reads them (one atomic load on a cold path each).
//
// They are process-wide globals, against the style guide's rule, because
// they stand for the absence of a fix in code that has no configuration
// path to carry them (journal.Open, Durable.Trim, the engine actor); they
// are internal, so nothing outside this module can turn them on.
package regress

import "sync/atomic"

var (
	// TrustDamagedJournal makes journal.Open accept a journal that lost
	// acknowledged events (a truncated or garbled write-ahead log) without
	// a word, so that the lost seqs are handed out again (issue 11, item 3).
	TrustDamagedJournal atomic.Bool
	// TrimLiveRuns makes a durable journal's Trim drop the start of runs
	// that have not ended, stranding a parked run at the next restart
	// (issue 11, item 7).
	TrimLiveRuns atomic.Bool
	// AbortWithoutOutcome makes Abort answer "accepted" without deciding
	// the run's outcome, and the run supervisor finish regardless, so that
	// an accepted abort may end with run_finished (issue 11, item 6).
	AbortWithoutOutcome atomic.Bool
	// UnboundedStreams makes model streams post their events without
	// taking the run's outbox credits: no backpressure between a model and
	// the journal (issue 11, item 1).
	UnboundedStreams atomic.Bool
	// TrustDamagedMarks makes journal.Open read the high-water mark log as
	// before issue 27: a damaged one passes for a torn tail, the floor log
	// is not read, and a repair without the log takes the store's heads,
	// so that seqs acknowledged before a double disk fault are handed out
	// again (issue 27, item 5).
	TrustDamagedMarks atomic.Bool
	// OrphanParkedInterrupts makes a parked agent that is stopped (its run
	// aborted or failed) stop without cancelling its interrupt: the run ends
	// with a question still open and listed as pending (issue 33).
	OrphanParkedInterrupts atomic.Bool
	// MarkerAtFirstRetained gives a replay_truncated marker the seq of the
	// first retained event instead of the one before it, so that a client
	// resuming after the marker skips that event (issue 33).
	MarkerAtFirstRetained atomic.Bool
	// AckBeforeSync makes the durable journal's committer acknowledge a
	// group before the fsync of its write-ahead log, so that a power loss
	// during that fsync loses events the hub already handed out (issue 33).
	AckBeforeSync atomic.Bool
	// LastEventIDInclusive makes the transport read an SSE stream's
	// Last-Event-ID header as the first seq to send rather than the last
	// one the client received, so that every EventSource resume repeats
	// the client's last event (issue 33: a duplicate at the resume of an
	// SSE stream, which clients subscribing on the engine never see).
	LastEventIDInclusive atomic.Bool
	// NoFencing takes the fence check out of the journal a cluster's nodes
	// share, as if its appends were sent without JetStream's expected last
	// subject sequence (journal.JetStream.Append): a node whose session
	// was taken over while it was paused goes on appending to it, between
	// the new owner's events (issue 33, cluster mode). The simulator's
	// shared journal (testkit/sim, fenced.go) reads it.
	NoFencing atomic.Bool
	// AdoptSkipsReplay makes a takeover (actors.Engine.Adopt) start the
	// session's hub without folding its live runs from the journal: the
	// runs of a crashed node are never resumed by the node that took its
	// session over (issue 33, cluster mode).
	AdoptSkipsReplay atomic.Bool
)
