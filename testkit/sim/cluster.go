package sim

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing/synctest"
	"time"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/cluster"
	"github.com/conclave-ai/conclave/journal"
	"github.com/conclave-ai/conclave/messages"
)

// Cluster mode (Scenario.Nodes > 1): several engines, each a node of a
// cluster, share one journal (fencedStore: JetStream's fencing, in
// memory), and an ownership table (owners: cluster.Node's buckets) says
// which node owns the session, the only one that runs its hub and its
// runs. The driver sends its requests to the owner, as the cluster's HTTP
// layer forwards them. A crash kills the owner (its runs frozen, as a
// killed process leaves them), another node takes the session over
// (fence, then actors.Engine.Adopt: its runs are rebuilt from the
// journal), and the dead node comes back as a new member owning nothing.
// A pause (Scenario.Pauses) makes the owner a stale owner: its actors are
// held while one of its model streams goes on, its lease runs out, another
// node takes the session over, and then it resumes: what it appends is
// refused (journal.ErrFenced), and it stops, as a node that lost its
// membership does (cluster.Node.Lost), to come back as a new member.

// owners is the cluster's ownership table: which node owns each session,
// and which nodes are members (a crashed or paused node, whose lease ran
// out, is not).
type owners struct {
	mu    sync.Mutex // guards the maps
	owner map[messages.SessionID]string
	alive map[string]bool
}

// placement is a node's actors.Placement on the table: a claim takes a
// session that no live node owns, fencing it first, and adopts its runs
// when it was another node's (cluster.Node.claim and took).
type placement struct {
	node  string
	tab   *owners
	j     *fencedJournal
	adopt func(context.Context, messages.SessionID) error // the node's engine's Adopt

	mu   sync.Mutex // guards held
	held map[messages.SessionID]bool
}

var _ actors.Placement = (*placement)(nil)

// Claim implements actors.Placement.
func (p *placement) Claim(ctx context.Context, key messages.SessionID) error {
	_, err := p.takeOver(ctx, key, nil)
	return err
}

// takeOver claims key as Claim does; between runs after the fence and
// before the adoption (a stale owner resuming then). It reports the node
// the session was taken from ("" if it was nobody's or already this
// node's).
func (p *placement) takeOver(ctx context.Context, key messages.SessionID, between func()) (from string, err error) {
	p.tab.mu.Lock()
	cur := p.tab.owner[key]
	switch {
	case cur == p.node:
		p.tab.mu.Unlock()
		if p.Holds(key) {
			return "", nil
		}
	case cur != "" && p.tab.alive[cur]:
		p.tab.mu.Unlock()
		return "", fmt.Errorf("%w: session %s is owned by node %s", actors.ErrNotOwner, key, cur)
	default:
		p.tab.owner[key] = p.node
		p.tab.mu.Unlock()
	}
	if _, err := p.j.Fence(ctx, key); err != nil {
		return "", fmt.Errorf("sim: node %s: fence session %s: %w", p.node, key, err)
	}
	if between != nil {
		between()
	}
	if cur != "" && cur != p.node {
		if err := p.adopt(ctx, key); err != nil {
			return "", fmt.Errorf("sim: node %s: adopt session %s from node %s: %w", p.node, key, cur, err)
		}
		from = cur
	}
	p.mu.Lock()
	p.held[key] = true
	p.mu.Unlock()
	return from, nil
}

// Holds implements actors.Placement.
func (p *placement) Holds(key messages.SessionID) bool {
	p.mu.Lock()
	held := p.held[key]
	p.mu.Unlock()
	p.tab.mu.Lock()
	defer p.tab.mu.Unlock()
	return held && p.tab.owner[key] == p.node && p.tab.alive[p.node]
}

// Release implements actors.Placement (the simulation's hubs never go
// idle: HubIdleAfter is negative).
func (p *placement) Release(_ context.Context, key messages.SessionID) error {
	p.mu.Lock()
	delete(p.held, key)
	p.mu.Unlock()
	p.tab.mu.Lock()
	defer p.tab.mu.Unlock()
	if p.tab.owner[key] == p.node {
		delete(p.tab.owner, key)
	}
	return nil
}

// simNode is one incarnation of a cluster node: its engine, on its own
// dispatcher and journal handle, and its HTTP face.
type simNode struct {
	name  string // "n2.1": node 2, first life
	tag   string // in its models' and tools' gate keys
	j     *fencedJournal
	place *placement
	// followers serve the node's streams from the shared journal.
	followers *cluster.Followers
	disp      *Dispatcher
	e         *actors.Engine
	front     *front
}

// simCluster is the simulated cluster: its nodes (the current incarnation of
// each), the shared journal and the ownership table.
type simCluster struct {
	store *fencedStore
	tab   *owners
	nodes []*simNode
	lives []int // incarnations of each node so far
	owner int   // the node the driver talks to: the session's owner
	// takeovers counts the sessions taken over from a dead or paused
	// node, stale the pauses that made a stale owner.
	takeovers, stale int
}

// bootCluster starts sc.Nodes engines on one shared journal; the first
// node serves the driver until another takes the session over.
func (w *world) bootCluster(ctx context.Context) error {
	w.cl = &simCluster{store: newFencedStore(), tab: &owners{owner: map[messages.SessionID]string{}, alive: map[string]bool{}},
		nodes: make([]*simNode, w.sc.Nodes), lives: make([]int, w.sc.Nodes)}
	w.j = w.cl.store.handle("driver")
	w.faults = &journalFaults{} // never armed: the cluster's journal is JetStream's, not a disk
	w.flight.reset()
	for i := range w.sc.Nodes {
		if err := w.startNode(i); err != nil {
			return err
		}
	}
	w.serveFrom(0)
	return nil
}

// startNode starts a new incarnation of node i, a member owning nothing.
func (w *world) startNode(i int) error {
	cl := w.cl
	cl.lives[i]++
	n := &simNode{name: fmt.Sprintf("n%d.%d", i+1, cl.lives[i])}
	n.tag = " @" + n.name
	n.j = cl.store.handle(n.name)
	n.place = &placement{node: n.name, tab: cl.tab, j: n.j, held: map[messages.SessionID]bool{}}
	tools, err := w.toolsTagged(n.tag)
	if err != nil {
		return err
	}
	n.disp = NewDispatcher()
	cfg := w.engineConfig(n.j, n.disp, w.modelsTagged(n.tag), tools)
	cfg.Placement = n.place
	// Streams on any node follow the session from the shared journal, as
	// in `conclave serve --cluster`; their replay markers take the ids
	// markers take (a client's reads must not shift the journal's ids).
	n.followers = cluster.NewFollowersWith(n.j, cluster.FollowersOptions{NewID: w.markerIDs.New, Now: time.Now})
	cfg.Followers = n.followers
	e, err := actors.New(cfg)
	if err != nil {
		_ = n.disp.Shutdown(context.Background())
		return fmt.Errorf("start node %s: %w", n.name, err)
	}
	n.e = e
	n.place.adopt = e.Adopt
	w.boots++
	if w.sc.httpClients() > 0 {
		if n.front, err = startFront(e, w.log, w.sc.Seed, w.boots); err != nil {
			return fmt.Errorf("start node %s's HTTP server: %w", n.name, err)
		}
	}
	cl.tab.mu.Lock()
	cl.tab.alive[n.name] = true
	cl.tab.mu.Unlock()
	cl.nodes[i] = n
	return nil
}

// serveFrom makes node i the one the driver and the clients talk to.
func (w *world) serveFrom(i int) {
	n := w.cl.nodes[i]
	w.cl.owner = i
	w.e, w.disp, w.front = n.e, n.disp, n.front
}

// stopNode stops node i's incarnation (its engine freezes its runs:
// KeepRunsOnShutdown) and takes it out of the members. A stale owner's
// engine ends with its hub failed on a fenced append: that error is
// expected.
func (w *world) stopNode(ctx context.Context, i int) error {
	n := w.cl.nodes[i]
	w.cl.tab.mu.Lock()
	w.cl.tab.alive[n.name] = false
	w.cl.tab.mu.Unlock()
	var errs []error
	if n.front != nil {
		n.front.ln.cut()
	}
	if err := n.e.Shutdown(ctx); err != nil && !errors.Is(err, journal.ErrFenced) {
		errs = append(errs, err)
	}
	if n.front != nil {
		errs = append(errs, n.front.stop(ctx))
	}
	errs = append(errs, n.followers.Shutdown(ctx), n.disp.Shutdown(ctx), n.j.Close())
	if w.cl.owner == i {
		w.e, w.disp, w.front = nil, nil, nil
	}
	return errors.Join(errs...)
}

// haltCluster stops every node and the shared journal.
func (w *world) haltCluster(ctx context.Context) error {
	var errs []error
	for i, n := range w.cl.nodes {
		if n != nil && n.e != nil {
			errs = append(errs, w.stopNode(ctx, i))
			n.e = nil
		}
	}
	if w.j != nil {
		errs = append(errs, w.j.Close())
		w.j = nil
	}
	errs = append(errs, w.cl.store.close())
	w.e, w.disp, w.front = nil, nil, nil
	return errors.Join(errs...)
}

// other draws a node other than i.
func (cl *simCluster) other(i int, rng *rand.Rand) int {
	return (i + 1 + rng.IntN(len(cl.nodes)-1)) % len(cl.nodes)
}

// crashNode kills the owner, lets another node (drawn from rng) take the
// session over, and starts the dead node again as a new member.
func (w *world) crashNode(ctx context.Context, rng *rand.Rand) error {
	cl := w.cl
	dead := cl.owner
	if err := w.stopNode(ctx, dead); err != nil {
		return fmt.Errorf("stop the crashed node %s: %w", cl.nodes[dead].name, err)
	}
	next := cl.other(dead, rng)
	if err := w.takeOver(ctx, next, nil); err != nil {
		return err
	}
	synctest.Wait() // as pauseNode
	// What the dead node's models handed out and its journal never took
	// is gone with it (a restart's reset).
	w.flight.reset()
	return w.startNode(dead)
}

// pauseNode makes the owner a stale owner: its actors are held while one
// of its gates (drawn from rng) goes on, so that what that sets off waits
// in its mailboxes; its lease runs out and another node takes the session
// over; then it resumes, and whatever it appends must be refused. Drawn
// from rng too: whether it resumes right after the fence (it is then held
// again while the new owner adopts the runs: the adoption waits, virtual
// time moves, and the stale node's timers would fire meanwhile) or once
// the new owner adopted them. It then stops (it lost its membership) and
// starts again as a new member.
//
// How many ids the stale node draws once resumed depends on the Go
// scheduler (how far its stream ran while its actors were held, what its
// shutdown ends): after it resumed and after it stopped, the ids start
// over, as after a crash inside a group commit, so that the new owner's
// do not depend on it.
func (w *world) pauseNode(ctx context.Context, rng *rand.Rand) error {
	cl := w.cl
	stale := cl.owner
	n := cl.nodes[stale]
	n.disp.Hold()
	var mine []string
	for _, g := range w.sched.Pending() {
		if strings.Contains(g, n.tag+" ") {
			mine = append(mine, g)
		}
	}
	if len(mine) > 0 {
		w.sched.Release(mine[rng.IntN(len(mine))])
	}
	synctest.Wait()
	cl.tab.mu.Lock()
	cl.tab.alive[n.name] = false // its lease ran out
	cl.tab.mu.Unlock()
	epoch := staleEpoch + 2*uint64(cl.stale)
	resumed := false
	var between func()
	if rng.IntN(2) == 0 {
		between = func() {
			resumed = true
			n.disp.Release()
			synctest.Wait()
			n.disp.Hold()
			w.ids.reseed(w.sc.Seed, epoch)
		}
	}
	next := cl.other(stale, rng)
	err := w.takeOver(ctx, next, between)
	// Adopt returns once the runs are back in place; what their restart
	// sets off on the new owner settles before the stale node resumes.
	synctest.Wait()
	n.disp.Release()
	if err != nil {
		return err
	}
	if !resumed {
		synctest.Wait()
	}
	cl.stale++
	if err := w.stopNode(ctx, stale); err != nil {
		return fmt.Errorf("stop the stale node %s: %w", n.name, err)
	}
	w.ids.reseed(w.sc.Seed, epoch+1)
	w.flight.reset() // as crashNode
	return w.startNode(stale)
}

// staleEpoch is where the ids' epochs after a stale owner start
// (idSource.reseed; a crash inside a group commit takes 1, 2, …).
const staleEpoch = 1 << 40

// takeOver makes node i take the session over (if anybody had it) and
// serve the driver.
func (w *world) takeOver(ctx context.Context, i int, between func()) error {
	cl := w.cl
	cl.tab.mu.Lock()
	_, owned := cl.tab.owner[journalKey]
	cl.tab.mu.Unlock()
	if owned {
		from, err := cl.nodes[i].place.takeOver(ctx, journalKey, between)
		if err != nil {
			return fmt.Errorf("node %s takes the session over: %w", cl.nodes[i].name, err)
		}
		if from != "" {
			cl.takeovers++
		}
	} else if between != nil {
		between()
	}
	w.serveFrom(i)
	return nil
}

// checkCluster: each session had one writer at a time.
func (d *driver) checkCluster() {
	if d.w.cl == nil {
		return
	}
	for _, v := range d.w.cl.store.interleaved() {
		d.fail("cluster: %s", v)
	}
	d.res.Takeovers, d.res.Stale = d.w.cl.takeovers, d.w.cl.stale
	d.res.Fenced = int(d.w.cl.store.fenced.Load())
}
