package actors

// Cluster mode: the hooks through which package cluster makes an engine
// one node of several that share a journal (README, Cluster).

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/conclave-ai/conclave/actors/feed"
	"github.com/conclave-ai/conclave/internal/regress"
	"github.com/conclave-ai/conclave/journal"
	"github.com/conclave-ai/conclave/messages"
)

// ErrNotOwner is matched by the error of a request that another node of
// the cluster must serve (Placement.Claim). The error's OwnerNode method,
// when it has one, names that node.
var ErrNotOwner = errors.New("actors: another node owns the session")

// ErrUnavailable is matched by the error of a request that failed for a
// reason that passes (the cluster's JetStream electing a new leader, a
// node reconnecting): the caller should retry shortly.
var ErrUnavailable = errors.New("actors: temporarily unavailable")

// Placement decides which node owns a session (cluster.Node).
type Placement interface {
	// Claim makes this node the owner of the session stored under key
	// (its journal key) unless another live node owns it; the error then
	// says which (StartRun returns it as is).
	Claim(ctx context.Context, key messages.SessionID) error
	// Holds reports whether this node owns the session now: a Claim
	// succeeded and no Release followed.
	Holds(key messages.SessionID) bool
	// Release gives the session up. The engine calls it once the session
	// went idle (its hub stopped, no run live or asleep), so that an idle
	// session is nobody's and the next run in it may start on any node.
	Release(ctx context.Context, key messages.SessionID) error
}

// Giving idle sessions up. In cluster mode a session whose hub stopped for
// idleness (sessions.go) and that has no run, live or asleep, is released:
// its entry stays, idle, so that every request for it waits
// (errHubStopping), until Placement.Release returned (sessionReleased).
// A run that starts then finds the session no longer held (errNotHeld)
// and claims it again, which fences it; so a run never starts in a
// session this node gave up, and a claim on another node never takes a
// session from under a run here.

// releaseTimeout bounds giving one session up, once one of maxReleases
// slots is free: a sweep that stops thousands of idle hubs at once gives
// their sessions up a few at a time instead of sending JetStream thousands
// of requests together (which would time out, and leave them owned).
const (
	releaseTimeout = 10 * time.Second
	maxReleases    = 8
)

// errNotHeld answers a start in a session this node no longer holds (it
// was given up while idle): start claims it again.
var errNotHeld = fmt.Errorf("%w: this node gave the session up while idle; claim it again", ErrUnavailable)

// sessionReleased tells the engine actor that releaseSession is done.
type sessionReleased struct{ s *sessionEntry }

// release starts giving up the session of an idle hub that stopped, in
// cluster mode, unless a run of its is asleep. It reports whether it did:
// the session is then forgotten on sessionReleased.
func (a *engineActor) release(ctx actor.Context, s *sessionEntry) bool {
	if a.e.cfg.Placement == nil || a.closing || len(s.wakes) > 0 {
		return false
	}
	self, key := ctx.Self(), a.e.journalKeyOf(s.key)
	return a.e.background.Go(func() {
		a.e.releaseSession(key)
		a.e.system.Root.Send(self, &sessionReleased{s: s})
	})
}

// releaseSession gives up an idle session, unless the run catalogue lists
// a live run of it (a run asleep: the session stays this node's). Runs
// off the engine actor: it waits on JetStream.
func (e *Engine) releaseSession(key messages.SessionID) {
	e.releaseSlots <- struct{}{}
	defer func() { <-e.releaseSlots }()
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	live, err := e.sessionLiveRuns(ctx, key)
	if err == nil && len(live) > 0 {
		return
	}
	if err == nil {
		err = e.cfg.Placement.Release(ctx, key)
	}
	if err != nil {
		e.cfg.Logger.Warn("cluster: give up an idle session", "session", key, "err", err)
	}
}

// Followers serves Subscribe from the shared journal (cluster.Followers).
type Followers interface {
	// Follow attaches a subscription after cursor `after` to the events
	// of the session stored under key (session is its id as clients know
	// it). head is the session's head when it attached; unfollow
	// detaches the subscription.
	Follow(ctx context.Context, key, session messages.SessionID, after uint64, queue int) (sub *feed.Subscription, head uint64, unfollow func(), err error)
}

// adoptReq asks the engine actor to restore a session folded for Adopt.
type adoptReq struct{ folded *foldedSession }

// Adopt recovers the live runs of the session stored under key (its
// journal key), exactly as recovery at startup does for every session: a
// cluster node calls it when it takes the session over from a dead node,
// after fencing it (journal.JetStream.Fence). A session already in memory
// is left as it is. It returns once the runs are back in place (parked
// ones resumable). The journal is read and folded here, on the caller's
// goroutine: the engine actor, which every request goes through, only
// starts the folded runs.
func (e *Engine) Adopt(ctx context.Context, key messages.SessionID) error {
	k, scoped := sessKeyOf(key)
	if !scoped {
		return fmt.Errorf("%w: adopt: %q is not a session key (tenant/session)", ErrInvalidRequest, key)
	}
	live, err := e.sessionLiveRuns(ctx, key)
	if err != nil {
		return fmt.Errorf("actors: adopt session %s: list its live runs: %w", key, err)
	}
	// With no live run there is nothing to resume, but its hub starts all
	// the same: the session then goes idle and is given up like any other
	// (release), instead of staying this node's for good.
	folded := &foldedSession{key: k}
	if len(live) > 0 && !regress.AdoptSkipsReplay.Load() {
		if folded, err = e.foldSession(ctx, key, live); err != nil {
			return fmt.Errorf("actors: adopt session %s: %w", key, err)
		}
	}
	if _, err := e.request(ctx, &adoptReq{folded: folded}); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { e.restoring.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("actors: adopt session %s: runs not back in place: %w", key, ctx.Err())
	}
}

// adopt restores a folded session unless it is in memory already.
func (a *engineActor) adopt(ctx actor.Context, f *foldedSession) error {
	if s, err := a.session(f.key); s != nil || err != nil {
		return err
	}
	return a.restoreSession(ctx, f)
}

// follow is Subscribe in cluster mode.
func (e *Engine) follow(ctx context.Context, cmd messages.Subscribe) (*Subscription, error) {
	k := sessKey{tenantOr(cmd.Tenant), cmd.SessionID}
	sub, head, unfollow, err := e.cfg.Followers.Follow(ctx, k.journalKey(), k.id, cmd.After, e.cfg.SubscriberQueue)
	if err != nil {
		return nil, err
	}
	switch {
	case head == 0:
		unfollow()
		return nil, fmt.Errorf("%w: %s", ErrSessionNotFound, k.id)
	case cmd.After > head:
		unfollow()
		return nil, fmt.Errorf("%w: after=%d, last seq is %d", ErrCursorAhead, cmd.After, head)
	}
	return &Subscription{feed: sub, unfollow: unfollow}, nil
}

// Own makes sure this node may serve a session's runs: in cluster mode it
// claims the session (Placement.Claim), which fails with the owner's
// error when another live node owns it; otherwise it does nothing. The
// AG-UI and A2A endpoints call it first, so that a thread's requests are
// all served by its owner (the cluster forwards the whole request there).
func (e *Engine) Own(ctx context.Context, tenant messages.TenantID, session messages.SessionID) error {
	if e.cfg.Placement == nil {
		return nil
	}
	return e.cfg.Placement.Claim(ctx, sessKey{tenantOr(tenant), session}.journalKey())
}

// sessionLiveRuns lists the live runs of the session stored under key: from
// the journal's per-session index when it has one (journal.JetStream: a
// takeover then reads one session's markers, not every live run of the
// cluster), from LiveRuns otherwise.
func (e *Engine) sessionLiveRuns(ctx context.Context, key messages.SessionID) ([]journal.RunInfo, error) {
	if j, ok := e.cfg.Journal.(interface {
		SessionLiveRuns(context.Context, messages.SessionID) ([]journal.RunInfo, error)
	}); ok {
		return j.SessionLiveRuns(ctx, key)
	}
	live, err := e.catalog.LiveRuns(ctx)
	if err != nil {
		return nil, err
	}
	var mine []journal.RunInfo
	for _, r := range live {
		if r.Session == key {
			mine = append(mine, r)
		}
	}
	return mine, nil
}
