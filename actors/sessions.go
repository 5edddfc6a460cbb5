package actors

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/conclave-ai/conclave/actors/feed"
	"github.com/conclave-ai/conclave/messages"
)

// Sessions.
//
// Session ids are chosen by clients, so they are namespaced by tenant: two
// tenants' "S1" are two sessions, and neither can learn whether the
// other's exists, or claim it first. A session's events are journaled
// under "tenant/session" (the journal's scope is the tenant). Sessions
// journaled by earlier versions under the bare session id are "legacy":
// recovery finds them and their tenant (from their first run), and they
// keep their key.
//
// A session's hub runs only while the session is in use: it stops once the
// session has had no live run, no subscriber and no event for
// Config.HubIdleAfter, and the next request for the session starts a new
// one from the journal (head, seq and all). A request that arrives while
// an idle hub is stopping waits for it to have stopped (errHubStopping),
// so two hubs never write one session.

// sessKey names a session.
type sessKey struct {
	tenant messages.TenantID
	id     messages.SessionID
}

// journalKey is the session's key in the journal.
func (k sessKey) journalKey() messages.SessionID { return JournalKey(k.tenant, k.id) }

// JournalKey is the key under which the engine journals a session of
// tenant ("" is messages.LocalTenant): "tenant/session". Tools that read a
// journal directly use it.
func JournalKey(tenant messages.TenantID, session messages.SessionID) messages.SessionID {
	return messages.SessionID(string(tenantOr(tenant)) + "/" + string(session))
}

// sessKeyOf reads a journal key; ok is false for a legacy key (no tenant).
func sessKeyOf(key messages.SessionID) (sessKey, bool) {
	tenant, id, ok := strings.Cut(string(key), "/")
	if !ok {
		return sessKey{}, false
	}
	return sessKey{tenant: messages.TenantID(tenant), id: messages.SessionID(id)}, true
}

// DefaultHubIdleAfter is Config.HubIdleAfter's default.
const DefaultHubIdleAfter = time.Minute

type sessionEntry struct {
	key    sessKey
	pid    *actor.PID
	shared *hubShared
	runs   int // live runs of the session (their supervisors have not stopped)
	// poisoned: stopping for shutdown. idle: stopping for idleness;
	// stopped is closed once the hub has stopped.
	poisoned bool
	idle     bool
	stopped  chan struct{}
	// wakes are runs asleep that must wake once this idle hub has
	// stopped (asleep.go).
	wakes []messages.RunID
}

// errHubStopping answers a request for a session whose idle hub is
// stopping: the Engine retries it once done is closed.
type errHubStopping struct{ done <-chan struct{} }

func (errHubStopping) Error() string { return "actors: the session's hub is stopping; retry" }

// sweepIdle asks the engine actor to stop idle hubs.
type sweepIdle struct{}

// journalKeyOf is the journal key of a session: its legacy key, if it has
// one, else the scoped key.
func (e *Engine) journalKeyOf(k sessKey) messages.SessionID {
	if key, ok := e.legacy[k]; ok {
		return key
	}
	return k.journalKey()
}

// session returns the entry of a session that is in memory. A session
// whose idle hub is stopping answers errHubStopping.
func (a *engineActor) session(k sessKey) (*sessionEntry, error) {
	s, ok := a.sessions[k]
	switch {
	case !ok:
		return nil, nil
	case s.idle:
		return nil, errHubStopping{done: s.stopped}
	case s.poisoned:
		return nil, ErrShuttingDown
	}
	// Handed out: whatever the caller does next (subscribe, publish,
	// start a run) reaches the hub after this, so the sweep, which runs on
	// this actor too, must not judge the hub idle in between.
	s.shared.touch()
	return s, nil
}

// existingSession returns a session that exists, starting its hub from the
// journal if it is not in memory; ErrSessionNotFound if it has no events.
// journal.Head is an in-memory lookup for both journals, so this does no
// disk I/O on the engine actor.
func (a *engineActor) existingSession(ctx actor.Context, k sessKey) (*sessionEntry, error) {
	if s, err := a.session(k); s != nil || err != nil {
		return s, err
	}
	head, err := a.e.cfg.Journal.Head(context.Background(), a.e.journalKeyOf(k))
	if err != nil {
		return nil, fmt.Errorf("actors: session %s: %w", k.id, err)
	}
	if head == 0 {
		return nil, fmt.Errorf("%w: %s", ErrSessionNotFound, k.id)
	}
	return a.spawnHub(ctx, k)
}

// openSession returns a session, creating it if needed (StartRun).
func (a *engineActor) openSession(ctx actor.Context, k sessKey) (*sessionEntry, error) {
	if s, err := a.session(k); s != nil || err != nil {
		return s, err
	}
	return a.spawnHub(ctx, k)
}

func (a *engineActor) spawnHub(ctx actor.Context, k sessKey) (*sessionEntry, error) {
	if a.closing {
		// Its hub would never be stopped, nor its subscriptions closed.
		return nil, ErrShuttingDown
	}
	return a.newHub(ctx, k)
}

// newHub starts a session's hub, even during a shutdown: for a run asleep
// that wakes to end (its hub is stopped with the others once no run is
// left, maybeStopHubs).
func (a *engineActor) newHub(ctx actor.Context, k sessKey) (*sessionEntry, error) {
	shared := &hubShared{
		tenant: k.tenant, session: k.id, key: a.e.journalKeyOf(k), journal: a.e.cfg.Journal, newID: a.e.cfg.MarkerID, now: a.e.cfg.Now,
		subs: map[*feed.Subscription]struct{}{}, terminated: newRecentRuns(),
	}
	shared.touch()
	shared.load(a.e.cfg.Logger)
	a.hubGen++ // a new hub may start while the idle one it replaces is still stopping
	name := hubNamePrefix + string(k.tenant) + "." + string(k.id) + "." + strconv.FormatUint(a.hubGen, 10)
	pid, err := ctx.SpawnNamed(a.e.props(func() actor.Actor { return &hubActor{e: a.e, s: shared} }), name)
	if err != nil {
		return nil, fmt.Errorf("actors: spawn hub: %w", err)
	}
	s := &sessionEntry{key: k, pid: pid, shared: shared}
	a.sessions[k] = s
	a.hubs[pid.Id] = s
	a.e.hubCount.Add(1)
	return s, nil
}

// sweepIdleHubs asks the hubs of sessions that look idle (no live run,
// and no subscriber and no activity for HubIdleAfter) to stop. From then
// on requests for the session wait (errHubStopping). The hub has the last
// word: everything the engine sent it before is in its mailbox ahead of
// the request, so it stops only if it still has no subscriber and nothing
// pending, and otherwise answers hubStayed.
func (a *engineActor) sweepIdleHubs(ctx actor.Context) {
	after := a.e.cfg.HubIdleAfter
	if after <= 0 || a.closing {
		return
	}
	now := a.e.cfg.Now()
	for _, s := range a.sessions {
		if s.idle || s.poisoned || s.runs > 0 || !s.shared.idleSince(now, after) {
			continue
		}
		s.idle, s.stopped = true, make(chan struct{})
		ctx.Send(s.pid, &hubIdleStop{})
	}
}

// hubStayed: a hub asked to stop for idleness found work and goes on.
func (a *engineActor) hubStayed(s *sessionEntry) {
	if !s.idle {
		return
	}
	s.idle = false
	close(s.stopped) // the requests that waited go on with this hub
	s.stopped = nil
	s.shared.touch()
}

// Messages between the engine actor and a hub about idleness.
type (
	hubIdleStop  struct{}
	hubStayedMsg struct{}
)

// hubTerminated forgets a hub that stopped, and its session (in cluster
// mode, an idle session once it is given up: placement.go).
func (a *engineActor) hubTerminated(ctx actor.Context, s *sessionEntry) {
	a.e.hubCount.Add(-1)
	delete(a.hubs, s.pid.Id)
	if s.idle && !s.poisoned && a.release(ctx, s) {
		return // forgotten on sessionReleased
	}
	a.forgetSession(ctx, s)
}

// forgetSession drops a session whose hub stopped: the requests that
// waited for it go on, and its runs asleep that must wake do.
func (a *engineActor) forgetSession(ctx actor.Context, s *sessionEntry) {
	if a.sessions[s.key] == s {
		delete(a.sessions, s.key)
	}
	if s.stopped != nil {
		close(s.stopped)
	}
	for _, id := range s.wakes {
		ctx.Send(ctx.Self(), &wakeRun{id: id})
	}
	if !s.idle && !s.poisoned && s.runs > 0 {
		a.replaceHub(ctx, s)
	}
}

// replaceHub handles a hub its supervisor stopped (it kept panicking)
// while runs of its session were live: they cannot go on without one. A
// new hub takes the session over from the journal (what the old one had
// not journaled was never acknowledged), the runs send to it, and they
// end with run_error{code:"internal"}.
func (a *engineActor) replaceHub(ctx actor.Context, old *sessionEntry) {
	a.e.cfg.Logger.Error("session hub failed; ending the session's live runs", "session", old.key.id, "tenant", old.key.tenant, "runs", old.runs)
	s, err := a.spawnHub(ctx, old.key)
	if err != nil {
		a.e.cfg.Logger.Error("session hub failed and cannot be replaced; its runs are stranded until shutdown", "session", old.key.id, "err", err)
		return
	}
	const why = "the session's hub failed"
	for id, r := range a.runs {
		if r.key != old.key || r.spec == nil { // a run asleep finds the new hub when it wakes
			continue
		}
		r.spec.out.hub.Store(s.pid)
		s.runs++
		r.spec.outcome.claim(decision{code: messages.ErrCodeInternal, msg: why})
		a.e.interrupts.CancelRun(id)
		ctx.Send(r.pid, &messages.StopRun{Code: messages.ErrCodeInternal, Reason: why})
	}
}

// recentRuns remembers the last runs whose terminal event a hub stamped,
// so that an event of theirs that comes after it (which the run protocol
// rules out) is dropped. Bounded: a session can see any number of runs.
type recentRuns struct {
	set  map[messages.RunID]struct{}
	ring [recentRunsSize]messages.RunID
	next int
}

const recentRunsSize = 64

func newRecentRuns() *recentRuns { return &recentRuns{set: map[messages.RunID]struct{}{}} }

func (r *recentRuns) add(id messages.RunID) {
	if old := r.ring[r.next]; old != "" {
		delete(r.set, old)
	}
	r.ring[r.next] = id
	r.set[id] = struct{}{}
	r.next = (r.next + 1) % recentRunsSize
}

func (r *recentRuns) has(id messages.RunID) bool {
	_, ok := r.set[id]
	return ok
}
