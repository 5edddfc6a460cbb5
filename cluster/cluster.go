// Package cluster runs Conclave on several nodes that share one NATS
// JetStream engine (`conclave serve --cluster nats://…`).
//
// JetStream holds everything the nodes share:
//
//   - the journal (journal.JetStream): every session's events and the run
//     catalogue, replicated by JetStream, readable by every node;
//   - membership: the key-value bucket <Prefix>_NODES, one key per live node
//     with a time to live of Lease, renewed every Lease/4 (a node whose key
//     expired is dead);
//   - ownership: the bucket <Prefix>_OWNERS, one key per session naming the
//     node that owns it: the only node that runs the session's hub and runs
//     and appends to it. Ownership changes only by compare-and-set on the
//     key's revision, so exactly one node wins a session.
//
// A node takes a session over from a dead node (every Lease/2 it sweeps the
// owners for keys of dead nodes), or claims an unowned one when a run
// starts in it. Either way it first fences the session in the journal
// (journal.JetStream.Fence): whatever the old owner still tries to append
// is refused. It then recovers the session's live runs from the journal,
// exactly as a single node does after a crash (actors.Engine.Adopt).
//
// A node that cannot renew its own key for a whole Lease (it was stopped,
// or cut off from JetStream) may have been declared dead and its sessions
// taken: it stops (Lost is closed), fail-stop, and a supervisor restarts it
// as a new member.
package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/internal/retry"
	"github.com/conclave-ai/conclave/journal"
	"github.com/conclave-ai/conclave/messages"
)

// Options configures Join.
type Options struct {
	// NodeID names this node among the members; default a new UUID. A
	// restarted process must not reuse the id of its previous life while
	// that id may still be alive in the bucket (a UUID never is).
	NodeID string
	// Lease is how long a node that stopped renewing its key stays a
	// member. A dead node's sessions move after at most Lease + Lease/2.
	// Default 10 s; at least 1 s.
	Lease time.Duration
	// Prefix names the buckets (<Prefix>_NODES, <Prefix>_OWNERS). Default
	// "CONCLAVE".
	Prefix string
	// Replicas of the buckets, as the journal's stream. Default 1.
	Replicas int
	// StartTimeout is how long Join tries to create the buckets and
	// register this node, with backoff, while JetStream does not answer or
	// fails (it is starting or electing a leader, or several nodes join at
	// once). Default 0: one attempt.
	StartTimeout time.Duration
	// Logger; default slog.Default().
	Logger *slog.Logger
}

// Member is a live node, as its key says.
type Member struct {
	ID      string    `json:"id"`
	Started time.Time `json:"started"`
	// URL is the base URL of the node's HTTP API, as the other nodes
	// reach it (SetURL): where a streamed request is proxied.
	URL string `json:"url,omitempty"`
}

// ErrNotOwner is matched by the *NotOwnerError Claim returns (it is
// actors.ErrNotOwner: the engine hands the error on as is).
var ErrNotOwner = actors.ErrNotOwner

// NotOwnerError names the live node that owns a session.
type NotOwnerError struct {
	Session messages.SessionID
	Owner   string
}

func (e *NotOwnerError) Error() string {
	return fmt.Sprintf("cluster: session %s is owned by node %s", e.Session, e.Owner)
}

// Is makes errors.Is(err, ErrNotOwner) true.
func (e *NotOwnerError) Is(target error) bool { return target == ErrNotOwner }

// OwnerNode names the owner (for the HTTP layer's Conclave-Owner header).
func (e *NotOwnerError) OwnerNode() string { return e.Owner }

// ErrUnavailable is matched by the errors of a Claim that failed on
// JetStream (a server lost, a leader being elected): retry shortly. It is
// actors.ErrUnavailable (503 with Retry-After in the API).
var ErrUnavailable = actors.ErrUnavailable

// ErrLost is returned once this node lost its membership.
var ErrLost = errors.New("cluster: this node lost its membership (its lease expired)")

// Node is this process's membership of the cluster.
type Node struct {
	opts    Options
	log     *slog.Logger
	journal *journal.JetStream
	nodes   jetstream.KeyValue
	owners  jetstream.KeyValue
	self    Member

	mu       sync.Mutex
	owned    map[messages.SessionID]uint64        // session → revision of its owner key
	claiming map[messages.SessionID]chan struct{} // claims running, closed when done
	// view is every owner key's value, kept by a watch of the bucket
	// (the loop goroutine writes it): the sweep reads no key it does not
	// act on.
	view      map[string]string
	adopt     func(context.Context, messages.SessionID) error
	lastRenew time.Time
	// takingOver counts the takeovers running (claim): from the
	// compare-and-set that makes a session's key name this node until it
	// holds the session, its interrupts are nowhere (unsettled); turns
	// counts their beginnings and ends.
	takingOver atomic.Int32
	turns      atomic.Uint64

	counts   counters
	lost     chan struct{}
	lostOnce sync.Once
	stop     context.CancelFunc
	done     chan struct{}
}

// Join makes this process a member: it registers its key and starts
// renewing it. The journal must be the cluster's shared journal. Call
// OnAdopt before the first sweep matters (it runs Lease/2 after Join).
func Join(ctx context.Context, nc *nats.Conn, j *journal.JetStream, opts Options) (*Node, error) {
	if opts.NodeID == "" {
		opts.NodeID = uuid.NewString()
	}
	if opts.Lease == 0 {
		opts.Lease = 10 * time.Second
	}
	if opts.Lease < time.Second {
		return nil, fmt.Errorf("cluster: lease %v is shorter than 1s", opts.Lease)
	}
	if opts.Prefix == "" {
		opts.Prefix = "CONCLAVE"
	}
	if opts.Replicas == 0 {
		opts.Replicas = 1
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if strings.ContainsAny(opts.NodeID, " .*>") {
		return nil, fmt.Errorf("cluster: node id %q: no spaces, dots, * or >", opts.NodeID)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	until := time.Now().Add(opts.StartTimeout)
	log := opts.Logger.With("node", opts.NodeID)
	var nodes, owners jetstream.KeyValue
	err = retry.Until(ctx, until, log, "the cluster's buckets "+opts.Prefix+"_NODES and "+opts.Prefix+"_OWNERS", func(ctx context.Context) error {
		cctx, cancel := context.WithTimeout(ctx, joinTimeout)
		defer cancel()
		nodes, err = js.CreateOrUpdateKeyValue(cctx, jetstream.KeyValueConfig{
			Bucket: opts.Prefix + "_NODES", TTL: opts.Lease, Replicas: opts.Replicas, Storage: jetstream.FileStorage, History: 1,
		})
		if err != nil {
			return fmt.Errorf("cluster: nodes bucket: %w", err)
		}
		// LimitMarkerTTL lets a release's purge marker expire (Release): an
		// idle session leaves nothing in the bucket.
		owners, err = js.CreateOrUpdateKeyValue(cctx, jetstream.KeyValueConfig{
			Bucket: opts.Prefix + "_OWNERS", Replicas: opts.Replicas, Storage: jetstream.FileStorage, History: 1,
			LimitMarkerTTL: releaseMarkerTTL,
		})
		if err != nil {
			return fmt.Errorf("cluster: owners bucket: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	n := &Node{
		opts: opts, log: log, journal: j, nodes: nodes, owners: owners,
		self:  Member{ID: opts.NodeID, Started: time.Now().UTC()},
		owned: map[messages.SessionID]uint64{}, claiming: map[messages.SessionID]chan struct{}{}, view: map[string]string{}, lost: make(chan struct{}), done: make(chan struct{}),
	}
	val, _ := json.Marshal(n.self)
	err = retry.Until(ctx, until, log, "registering this node in "+opts.Prefix+"_NODES", func(ctx context.Context) error {
		cctx, cancel := context.WithTimeout(ctx, joinTimeout)
		defer cancel()
		_, err := nodes.Create(cctx, n.self.ID, val)
		if errors.Is(err, jetstream.ErrKeyExists) {
			// An earlier attempt whose answer was lost, or a former life of
			// this --node-id whose key has not expired yet.
			if e, gerr := nodes.Get(cctx, n.self.ID); gerr == nil && string(e.Value()) == string(val) {
				return nil
			}
		}
		if err != nil {
			return fmt.Errorf("cluster: register node %s: %w", n.self.ID, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, joinTimeout)
	defer cancel()
	n.lastRenew = time.Now()
	loopCtx, stop := context.WithCancel(context.Background())
	watch, err := owners.WatchAll(loopCtx)
	if err != nil {
		stop()
		_ = nodes.Delete(cctx, n.self.ID)
		return nil, fmt.Errorf("cluster: watch the owners: %w", err)
	}
	// A node that leaves deletes its key: the others sweep at once. (A key
	// that expires makes no event: a dead node is found by the sweep.)
	leaves, err := nodes.WatchAll(loopCtx, jetstream.UpdatesOnly())
	if err != nil {
		stop()
		_ = watch.Stop()
		_ = nodes.Delete(cctx, n.self.ID)
		return nil, fmt.Errorf("cluster: watch the members: %w", err)
	}
	n.stop = stop
	go n.loop(loopCtx, watch, leaves)
	return n, nil
}

// SetURL publishes the base URL at which the other nodes reach this node's
// HTTP API (known once it listens).
func (n *Node) SetURL(ctx context.Context, url string) error {
	n.mu.Lock()
	n.self.URL = url
	val, _ := json.Marshal(n.self)
	n.mu.Unlock()
	e, err := n.nodes.Get(ctx, n.self.ID)
	if err != nil {
		return fmt.Errorf("cluster: publish this node's URL: %w", err)
	}
	if _, err := n.nodes.Update(ctx, n.self.ID, val, e.Revision()); err != nil {
		return fmt.Errorf("cluster: publish this node's URL: %w", err)
	}
	return nil
}

// member returns the live member id (nil if it is not one).
func (n *Node) member(ctx context.Context, id string) (*Member, error) {
	e, err := n.nodes.Get(ctx, id)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cluster: membership of %s: %w", id, err)
	}
	var m Member
	if err := json.Unmarshal(e.Value(), &m); err != nil {
		return nil, fmt.Errorf("cluster: membership of %s: %w", id, err)
	}
	return &m, nil
}

// ID is this node's id.
func (n *Node) ID() string { return n.self.ID }

// Lost is closed when this node lost its membership: it must stop.
func (n *Node) Lost() <-chan struct{} { return n.lost }

// OnAdopt sets what a takeover runs once the session is fenced: the
// engine recovers its live runs (actors.Engine.Adopt).
func (n *Node) OnAdopt(fn func(context.Context, messages.SessionID) error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.adopt = fn
}

// ownerKey is a session's key in the owners bucket (keys allow a narrower
// alphabet than session ids).
func ownerKey(s messages.SessionID) string { return "s." + journal.SubjectToken(string(s)) }

// Claim makes this node the owner of session s if it is not owned by a
// live node, fencing and adopting it when it was another node's. It
// returns a *NotOwnerError when a live node owns it.
func (n *Node) Claim(ctx context.Context, s messages.SessionID) error {
	err := n.claim(ctx, s, true)
	if err != nil && !errors.Is(err, ErrNotOwner) && !errors.Is(err, ErrLost) && !errors.Is(ctx.Err(), context.Canceled) {
		err = fmt.Errorf("%w: %w", ErrUnavailable, err) // JetStream did not answer in time, or failed: retry
	}
	return err
}

// claim is Claim, one at a time per session: a claim fences the session,
// and a second one running meanwhile in this process would fence the
// first one's appends. Without create it only takes over a session whose
// key names a dead node (or this node's former life): a sweep must not
// claim a session that was given up meanwhile (Release).
func (n *Node) claim(ctx context.Context, s messages.SessionID, create bool) error {
	if n.isLost() {
		return ErrLost
	}
	unlock, err := n.lockSession(ctx, s)
	if err != nil {
		return err
	}
	defer unlock()
	n.mu.Lock()
	_, mine := n.owned[s]
	n.mu.Unlock()
	if mine {
		return nil
	}
	key := ownerKey(s)
	for range 8 {
		e, err := kvDo(ctx, func(ctx context.Context) (jetstream.KeyValueEntry, error) { return n.owners.Get(ctx, key) })
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound) && !create:
			return nil // nobody's: nothing to take over
		case errors.Is(err, jetstream.ErrKeyNotFound):
			rev, err := kvDo(ctx, func(ctx context.Context) (uint64, error) { return n.owners.Create(ctx, key, []byte(n.self.ID)) })
			if errors.Is(err, jetstream.ErrKeyExists) {
				continue // another node created it first: look again
			}
			if err != nil {
				return fmt.Errorf("cluster: claim session %s: %w", s, err)
			}
			return n.took(ctx, s, rev, "")
		case err != nil:
			return fmt.Errorf("cluster: claim session %s: %w", s, err)
		}
		owner := string(e.Value())
		if owner == n.self.ID {
			// Ours from before (a claim whose adoption failed): take it again.
			defer n.beginTakeover()()
			return n.took(ctx, s, e.Revision(), owner)
		}
		alive, err := n.alive(ctx, owner)
		if err != nil {
			return err
		}
		if alive {
			return &NotOwnerError{Session: s, Owner: owner}
		}
		defer n.beginTakeover()()
		rev, err := kvDo(ctx, func(ctx context.Context) (uint64, error) {
			return n.owners.Update(ctx, key, []byte(n.self.ID), e.Revision())
		})
		if err != nil {
			if isConflict(err) {
				continue
			}
			return fmt.Errorf("cluster: take session %s over: %w", s, err)
		}
		return n.took(ctx, s, rev, owner)
	}
	return fmt.Errorf("cluster: claim session %s: the owner key keeps changing", s)
}

// Holds reports whether this node owns session s now.
func (n *Node) Holds(s messages.SessionID) bool {
	n.mu.Lock()
	_, mine := n.owned[s]
	n.mu.Unlock()
	return mine && !n.isLost()
}

// releaseMarkerTTL is how long the marker a release leaves in the owners
// bucket lives; the watchers have seen it long before.
const releaseMarkerTTL = time.Minute

// Release gives up this node's ownership of session s, which must be
// idle: no hub and no run of it, live or asleep (the engine calls it when
// a session's idle hub has stopped; actors.Placement). The owner key is
// purged by compare-and-set on the revision this node wrote, so a node
// that took the session over meanwhile keeps it; the purge marker expires
// after releaseMarkerTTL, so an idle session leaves nothing behind, and
// the sweeps and the owners bucket grow with the sessions in use, not
// with every session ever run. Claims of s in this process wait
// meanwhile; the next one creates the key anew (and fences the session).
func (n *Node) Release(ctx context.Context, s messages.SessionID) error {
	unlock, err := n.lockSession(ctx, s)
	if err != nil {
		return err
	}
	defer unlock()
	n.mu.Lock()
	rev, mine := n.owned[s]
	delete(n.owned, s)
	n.mu.Unlock()
	if !mine {
		return nil
	}
	_, err = kvDo(ctx, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, n.owners.Purge(ctx, ownerKey(s), jetstream.LastRevision(rev), jetstream.PurgeTTL(releaseMarkerTTL))
	})
	switch {
	case err == nil:
		n.counts.released.Add(1)
		return nil
	case isConflict(err):
		return nil // taken over since: it was not this node's any more
	default:
		// The key still names this node: the next sweep adopts the session
		// again as a former life's (it has no run, so nothing restarts).
		return fmt.Errorf("cluster: release session %s: %w", s, err)
	}
}

// lockSession waits until no other claim of s runs in this process.
func (n *Node) lockSession(ctx context.Context, s messages.SessionID) (unlock func(), err error) {
	for {
		n.mu.Lock()
		busy, ok := n.claiming[s]
		if !ok {
			done := make(chan struct{})
			n.claiming[s] = done
			n.mu.Unlock()
			return func() {
				n.mu.Lock()
				delete(n.claiming, s)
				n.mu.Unlock()
				close(done)
			}, nil
		}
		n.mu.Unlock()
		select {
		case <-busy:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// joinTimeout bounds each attempt of Join's requests.
const joinTimeout = 5 * time.Second

// kvTimeout bounds one key-value operation of a claim: while JetStream
// elects a leader (a server lost) an operation waits, and a claim that
// fails fast is retried by its caller (503) instead of using up the
// request's whole deadline.
const kvTimeout = 3 * time.Second

// fenceTimeout bounds a claim's fence the same way (a claim whose fence
// failed is not held: the next claim of the session fences it again).
const fenceTimeout = 5 * time.Second

func kvDo[T any](ctx context.Context, op func(context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(ctx, kvTimeout)
	defer cancel()
	return op(ctx)
}

func isConflict(err error) bool {
	var apiErr *jetstream.APIError
	return errors.Is(err, jetstream.ErrKeyExists) ||
		errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence || apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// took finishes a claim won at revision rev: fence the session, then
// adopt it. from is the previous owner ("" for a new session).
func (n *Node) took(ctx context.Context, s messages.SessionID, rev uint64, from string) error {
	fctx, cancel := context.WithTimeout(ctx, fenceTimeout)
	defer cancel()
	if _, err := n.journal.Fence(fctx, s); err != nil {
		return fmt.Errorf("cluster: fence session %s: %w", s, err)
	}
	n.mu.Lock()
	adopt := n.adopt
	n.mu.Unlock()
	if from != "" && adopt != nil {
		if err := adopt(ctx, s); err != nil {
			return fmt.Errorf("cluster: adopt session %s (from node %s): %w", s, from, err)
		}
		n.log.Info("cluster: took a session over", "session", s, "from", from)
		n.counts.takeovers.Add(1)
	}
	n.mu.Lock()
	n.owned[s] = rev
	n.mu.Unlock()
	return nil
}

// beginTakeover counts a takeover running until the function it returns
// is called.
func (n *Node) beginTakeover() (end func()) {
	n.takingOver.Add(1)
	n.turns.Add(1)
	return func() {
		n.turns.Add(1)
		n.takingOver.Add(-1)
	}
}

// takeoverMark is what settled compares: the takeovers' beginnings and
// ends so far.
func (n *Node) takeoverMark() uint64 { return n.turns.Load() }

// settled reports whether no takeover ran on this node at any moment
// since mark was taken: a list read meanwhile may lack a session it took
// over.
func (n *Node) settled(mark uint64) bool {
	return n.takingOver.Load() == 0 && n.turns.Load() == mark
}

// unsettled says why some session has no owner serving it now ("" if
// every one has), given the live members: its owner key names a node that
// is not among them (its lease lapsed, and no node has taken the session
// over yet), or names this node, which does not hold it and is not
// claiming or releasing it (a former life's, until the next sweep), or
// this node is taking a session over. The
// session's runs and interrupts are then on no node: a list gathered from
// the members would silently lack them. It reads this node's view of the
// owners (kept by a watch), so it may lag a takeover by a moment, which
// errs on the side of reporting one.
func (n *Node) unsettled(live []Member) string {
	if k := n.takingOver.Load(); k > 0 {
		return fmt.Sprintf("node %s is taking %d session(s) over", n.self.ID, k)
	}
	alive := make(map[string]bool, len(live))
	for _, m := range live {
		alive[m.ID] = true
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	orphans := map[string]int{}
	for k, owner := range n.view {
		if owner == n.self.ID {
			id, err := journal.SubjectUntoken(strings.TrimPrefix(k, "s."))
			_, held := n.owned[messages.SessionID(id)]
			_, busy := n.claiming[messages.SessionID(id)] // a claim or a release under way
			if err == nil && !held && !busy {
				orphans[owner]++
			}
			continue
		}
		if !alive[owner] {
			orphans[owner]++
		}
	}
	if len(orphans) == 0 {
		return ""
	}
	var parts []string
	for owner, k := range orphans {
		parts = append(parts, fmt.Sprintf("%d of node %s", k, owner))
	}
	slices.Sort(parts)
	return "sessions not taken over yet: " + strings.Join(parts, ", ")
}

// Owner returns the node that owns session s ("" if none does), and
// whether that node is alive.
func (n *Node) Owner(ctx context.Context, s messages.SessionID) (string, bool, error) {
	e, err := n.owners.Get(ctx, ownerKey(s))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("cluster: owner of %s: %w", s, err)
	}
	owner := string(e.Value())
	alive, err := n.alive(ctx, owner)
	return owner, alive, err
}

// alive reports whether a node's membership key exists.
func (n *Node) alive(ctx context.Context, id string) (bool, error) {
	if id == n.self.ID {
		return !n.isLost(), nil
	}
	_, err := kvDo(ctx, func(ctx context.Context) (jetstream.KeyValueEntry, error) { return n.nodes.Get(ctx, id) })
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("cluster: membership of %s: %w", id, err)
	}
	return true, nil
}

// Members lists the live nodes.
func (n *Node) Members(ctx context.Context) ([]Member, error) {
	keys, err := n.nodes.Keys(ctx)
	if errors.Is(err, jetstream.ErrNoKeysFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cluster: members: %w", err)
	}
	var out []Member
	for _, k := range keys {
		e, err := n.nodes.Get(ctx, k)
		if err != nil {
			continue // expired since it was listed
		}
		var m Member
		if json.Unmarshal(e.Value(), &m) == nil {
			out = append(out, m)
		}
	}
	return out, nil
}

func (n *Node) isLost() bool {
	select {
	case <-n.lost:
		return true
	default:
		return false
	}
}

func (n *Node) markLost(why string) {
	n.lostOnce.Do(func() {
		n.log.Error("cluster: this node lost its membership and must stop: another node may own its sessions now", "why", why)
		close(n.lost)
	})
}

// loop renews this node's key every Lease/4 and keeps the view of the
// owners; it asks the sweeper to sweep every Lease/2, and at once when a
// member leaves. Sweeps run on their own goroutine: adopting a big session
// takes a while, and must never hold back the renewal (a node that misses
// it for a Lease stops).
func (n *Node) loop(ctx context.Context, watch, leaves jetstream.KeyWatcher) {
	defer close(n.done)
	sweepNow := make(chan struct{}, 1)
	sweeperDone := make(chan struct{})
	go n.sweeper(ctx, sweepNow, sweeperDone)
	defer func() { <-sweeperDone }() // runs after ctx ended: the sweeper returns too
	defer func() { _ = watch.Stop(); _ = leaves.Stop() }()
	askSweep := func() {
		select {
		case sweepNow <- struct{}{}:
		default: // one is already asked for
		}
	}
	left := leaves.Updates()
	renew := time.NewTicker(n.opts.Lease / 4)
	defer renew.Stop()
	sweep := time.NewTicker(n.opts.Lease / 2)
	defer sweep.Stop()
	updates := watch.Updates()
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-left:
			switch {
			case !ok:
				left = nil
			case e != nil && e.Operation() != jetstream.KeyValuePut:
				askSweep() // a member left: take its sessions over now
			}
		case e, ok := <-updates:
			switch {
			case !ok:
				updates = nil // the watch ended (the connection closed)
			case e == nil: // the initial values are in
			case e.Operation() == jetstream.KeyValuePut:
				n.mu.Lock()
				n.view[e.Key()] = string(e.Value())
				n.mu.Unlock()
			default:
				n.mu.Lock()
				delete(n.view, e.Key())
				n.mu.Unlock()
			}
		case <-renew.C:
			n.renew(ctx)
		case <-sweep.C:
			askSweep()
		}
	}
}

// sweeper sweeps when asked, until ctx ends.
func (n *Node) sweeper(ctx context.Context, asked <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	for {
		select {
		case <-ctx.Done():
			return
		case <-asked:
			if !n.isLost() {
				n.sweep(ctx)
			}
		}
	}
}

// renew puts this node's key again, unless it already expired: then the
// node is dead to the others and must stop.
func (n *Node) renew(ctx context.Context) {
	if n.isLost() {
		return
	}
	if time.Since(n.lastRenew) >= n.opts.Lease {
		n.markLost(fmt.Sprintf("no renewal for %v", time.Since(n.lastRenew).Round(time.Millisecond)))
		return
	}
	rctx, cancel := context.WithTimeout(ctx, n.opts.Lease/4)
	defer cancel()
	e, err := n.nodes.Get(rctx, n.self.ID)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		n.markLost("its membership key expired")
		return
	}
	if err != nil {
		n.log.Warn("cluster: renew membership", "err", err)
		return
	}
	n.mu.Lock()
	val, _ := json.Marshal(n.self)
	n.mu.Unlock()
	if _, err := n.nodes.Update(rctx, n.self.ID, val, e.Revision()); err != nil {
		n.log.Warn("cluster: renew membership", "err", err)
		return
	}
	n.lastRenew = time.Now()
}

// sweep takes over the sessions whose owner is dead: it reads the
// membership of each owner once, and only the keys it acts on.
func (n *Node) sweep(ctx context.Context) {
	n.mu.Lock()
	view := make(map[string]string, len(n.view))
	for k, owner := range n.view {
		view[k] = owner
	}
	n.mu.Unlock()
	dead := map[string]bool{n.self.ID: true} // keys naming this node that it does not hold: a former life's (same --node-id)
	for k, owner := range view {
		if owner == n.self.ID {
			id, err := journal.SubjectUntoken(strings.TrimPrefix(k, "s."))
			n.mu.Lock()
			_, held := n.owned[messages.SessionID(id)]
			n.mu.Unlock()
			if err != nil || held {
				continue
			}
		}
		isDead, seen := dead[owner]
		if !seen {
			alive, err := n.alive(ctx, owner)
			if err != nil {
				n.log.Warn("cluster: sweep", "err", err)
				return
			}
			isDead, dead[owner] = !alive, !alive
		}
		if !isDead {
			continue
		}
		id, err := journal.SubjectUntoken(strings.TrimPrefix(k, "s."))
		if err != nil {
			continue
		}
		if err := n.claim(ctx, messages.SessionID(id), false); err != nil && !errors.Is(err, ErrNotOwner) {
			n.log.Warn("cluster: take a session over", "session", id, "from", owner, "err", err)
		}
	}
}

// Shutdown stops renewing and sweeping and leaves the cluster: this node's
// key is deleted, so the others take its sessions over at once (they watch
// the members) instead of after a Lease.
func (n *Node) Shutdown(ctx context.Context) error {
	n.stop()
	select {
	case <-n.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	if n.isLost() {
		return nil
	}
	if err := n.nodes.Delete(ctx, n.self.ID); err != nil {
		return fmt.Errorf("cluster: leave: %w", err)
	}
	return nil
}
