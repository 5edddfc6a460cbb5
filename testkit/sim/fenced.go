package sim

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/conclave-ai/conclave/cluster"
	"github.com/conclave-ai/conclave/internal/regress"
	"github.com/conclave-ai/conclave/journal"
	"github.com/conclave-ai/conclave/messages"
)

// fencedStore is the cluster's shared journal in a simulation: what the
// JetStream stream is to the nodes of `conclave serve --cluster`, in
// memory, so that it runs deterministically inside the synctest bubble (the
// embedded nats-server cannot: real sockets, goroutines of its own). Every
// node appends and reads through a fencedJournal of its own, with the
// fencing semantics of journal.JetStream:
//
//   - each session has a message count (JetStream's last subject sequence
//     of the session's events subject): every Append and every Fence adds
//     one;
//   - a handle remembers the count as it last appended or fenced; its next
//     Append is refused with journal.ErrFenced when another handle appended
//     or fenced since, and the remembered count is dropped (as JetStream's
//     cached tail is: the next Append reads it again);
//   - Fence adds a message without events, so that whatever a former owner
//     still tries to append is refused.
//
// Events and the run catalogue are a journal.Memory's. The store also
// records who wrote each session (writes), for the simulator's one-writer
// invariant.
type fencedStore struct {
	mem *journal.Memory

	mu     sync.Mutex                    // guards msgs and writes; held across an append, so a check and its write are one step
	msgs   map[messages.SessionID]uint64 // messages appended to each session (batches and fences)
	writes map[messages.SessionID][]write
	// fenced counts the appends refused with journal.ErrFenced.
	fenced atomic.Int64
	// tails are the Tail calls following each session, called in the
	// append, under mu: in seq order, and without a goroutine of their
	// own (a JetStream ordered consumer delivers on its own; here the
	// order of everything must come from the driver).
	tails map[messages.SessionID][]*tailFn
}

// tailFn is one Tail's callback (a pointer: its identity is the key).
type tailFn struct{ fn func([]*messages.Encoded) }

// write is one message a node put in a session: a batch of events
// (first..last) or a fence (first = last+1, as in journal.JetStream).
type write struct {
	node        string
	first, last uint64
	fence       bool
}

func newFencedStore() *fencedStore {
	return &fencedStore{mem: journal.NewMemory(), msgs: map[messages.SessionID]uint64{}, writes: map[messages.SessionID][]write{},
		tails: map[messages.SessionID][]*tailFn{}}
}

// handle is a node's view of the store, named for the one-writer
// invariant (a node's incarnation: "n2.1").
func (s *fencedStore) handle(node string) *fencedJournal {
	return &fencedJournal{store: s, node: node, tails: map[messages.SessionID]uint64{}}
}

// close closes the events' journal: every handle then fails with
// journal.ErrClosed.
func (s *fencedStore) close() error { return s.mem.Close() }

// interleaved checks that each session had one writer at a time: once a
// node's writes are followed by another node's (a takeover's fence, or a
// new owner's events), the first node never appends to it again unless it
// takes the session back with a fence of its own. It returns one line per
// violation.
func (s *fencedStore) interleaved() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for sess, ws := range s.writes {
		retired := map[string]write{} // node → the first write of the node that followed it
		for i, w := range ws {
			if w.fence {
				delete(retired, w.node) // a takeover: the node owns the session again
			}
			if by, ok := retired[w.node]; ok {
				out = append(out, fmt.Sprintf("session %s: node %s appended seqs %d..%d after node %s took it over at seq %d: two owners interleaved",
					sess, w.node, w.first, w.last, by.node, by.first-1))
				continue
			}
			if i > 0 && ws[i-1].node != w.node {
				retired[ws[i-1].node] = w
			}
		}
	}
	return out
}

// fencedJournal is one node's handle on a fencedStore: a journal.Journal
// and journal.Catalog with Fence, as journal.JetStream is.
type fencedJournal struct {
	store  *fencedStore
	node   string
	closed atomic.Bool

	mu    sync.Mutex                    // guards tails
	tails map[messages.SessionID]uint64 // the session's message count as this handle last appended or fenced
}

var (
	_ journal.Journal     = (*fencedJournal)(nil)
	_ journal.Catalog     = (*fencedJournal)(nil)
	_ cluster.TailJournal = (*fencedJournal)(nil)
)

func (j *fencedJournal) check(ctx context.Context) error {
	if j.closed.Load() {
		return journal.ErrClosed
	}
	return ctx.Err()
}

// Append implements journal.Journal: refused with journal.ErrFenced when
// another handle wrote to the session since this one last did.
func (j *fencedJournal) Append(ctx context.Context, s messages.SessionID, events []*messages.Encoded) error {
	if err := j.check(ctx); err != nil {
		return err
	}
	if len(events) == 0 {
		return nil
	}
	st := j.store
	st.mu.Lock()
	defer st.mu.Unlock()
	j.mu.Lock()
	defer j.mu.Unlock()
	expect, known := j.tails[s]
	if !known {
		expect = st.msgs[s] // nothing cached: read the tail, as JetStream's Append does
	}
	if expect != st.msgs[s] && !regress.NoFencing.Load() {
		delete(j.tails, s)
		st.fenced.Add(1)
		return fmt.Errorf("%w; node %s expected the session's last message at %d, it is at %d", journal.ErrFenced, j.node, expect, st.msgs[s])
	}
	if err := st.mem.Append(ctx, s, events); err != nil {
		delete(j.tails, s) // read again
		return err
	}
	st.msgs[s]++
	j.tails[s] = st.msgs[s]
	st.writes[s] = append(st.writes[s], write{node: j.node, first: events[0].Seq, last: events[len(events)-1].Seq})
	for _, t := range st.tails[s] {
		t.fn(slices.Clone(events)) // the hub reuses its batch's slice
	}
	return nil
}

// Tail calls fn with each batch appended to session s after the call, in
// seq order, from inside the Append that stored it (fn must not block, nor
// append), and returns the session's head at the start; stop ends it
// (journal.JetStream.Tail, for cluster.Followers).
func (j *fencedJournal) Tail(ctx context.Context, s messages.SessionID, fn func([]*messages.Encoded)) (head uint64, stop func(), err error) {
	if err := j.check(ctx); err != nil {
		return 0, nil, err
	}
	st := j.store
	st.mu.Lock()
	defer st.mu.Unlock()
	if head, err = st.mem.Head(ctx, s); err != nil {
		return 0, nil, err
	}
	t := &tailFn{fn: fn}
	st.tails[s] = append(st.tails[s], t)
	return head, func() {
		st.mu.Lock()
		defer st.mu.Unlock()
		st.tails[s] = slices.DeleteFunc(st.tails[s], func(o *tailFn) bool { return o == t })
	}, nil
}

// Fence makes every handle that wrote to the session before this call fail
// its next Append with journal.ErrFenced, and returns the session's head
// (journal.JetStream.Fence).
func (j *fencedJournal) Fence(ctx context.Context, s messages.SessionID) (uint64, error) {
	if err := j.check(ctx); err != nil {
		return 0, err
	}
	st := j.store
	st.mu.Lock()
	defer st.mu.Unlock()
	head, err := st.mem.Head(ctx, s)
	if err != nil {
		return 0, err
	}
	st.msgs[s]++
	j.mu.Lock()
	j.tails[s] = st.msgs[s]
	j.mu.Unlock()
	st.writes[s] = append(st.writes[s], write{node: j.node, first: head + 1, last: head, fence: true})
	return head, nil
}

// ReadAfter implements journal.Journal.
func (j *fencedJournal) ReadAfter(ctx context.Context, s messages.SessionID, after uint64, limit int) ([]*messages.Encoded, error) {
	if err := j.check(ctx); err != nil {
		return nil, err
	}
	return j.store.mem.ReadAfter(ctx, s, after, limit)
}

// Head implements journal.Journal.
func (j *fencedJournal) Head(ctx context.Context, s messages.SessionID) (uint64, error) {
	if err := j.check(ctx); err != nil {
		return 0, err
	}
	return j.store.mem.Head(ctx, s)
}

// First implements journal.Journal.
func (j *fencedJournal) First(ctx context.Context, s messages.SessionID) (uint64, error) {
	if err := j.check(ctx); err != nil {
		return 0, err
	}
	return j.store.mem.First(ctx, s)
}

// Trim implements journal.Journal. Like journal.JetStream's, it writes no
// events message: it fences nobody.
func (j *fencedJournal) Trim(ctx context.Context, s messages.SessionID, before uint64) error {
	if err := j.check(ctx); err != nil {
		return err
	}
	return j.store.mem.Trim(ctx, s, before)
}

// Sessions implements journal.Journal.
func (j *fencedJournal) Sessions(ctx context.Context) ([]messages.SessionID, error) {
	if err := j.check(ctx); err != nil {
		return nil, err
	}
	return j.store.mem.Sessions(ctx)
}

// Close implements journal.Journal: it closes this handle, not the store
// (the other nodes go on with it). Idempotent.
func (j *fencedJournal) Close() error {
	j.closed.Store(true)
	return nil
}

// LiveRuns implements journal.Catalog.
func (j *fencedJournal) LiveRuns(ctx context.Context) ([]journal.RunInfo, error) {
	if err := j.check(ctx); err != nil {
		return nil, err
	}
	return j.store.mem.LiveRuns(ctx)
}

// Run implements journal.Catalog.
func (j *fencedJournal) Run(ctx context.Context, run messages.RunID) (journal.RunInfo, bool, error) {
	if err := j.check(ctx); err != nil {
		return journal.RunInfo{}, false, err
	}
	return j.store.mem.Run(ctx, run)
}

// ListRuns implements journal.Catalog.
func (j *fencedJournal) ListRuns(ctx context.Context, scope string, after messages.RunID, limit int) ([]journal.RunInfo, messages.RunID, error) {
	if err := j.check(ctx); err != nil {
		return nil, "", err
	}
	return j.store.mem.ListRuns(ctx, scope, after, limit)
}

// PutRunSummary implements journal.Catalog.
func (j *fencedJournal) PutRunSummary(ctx context.Context, run messages.RunID, summary []byte) error {
	if err := j.check(ctx); err != nil {
		return err
	}
	return j.store.mem.PutRunSummary(ctx, run, summary)
}
