package actors

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/conclave-ai/conclave/actors/feed"
	"github.com/conclave-ai/conclave/internal/regress"
	"github.com/conclave-ai/conclave/messages"
)

const (
	hubNamePrefix = "hub-"
	runNamePrefix = "run-"
)

// Requests the Engine's methods send to its own engine actor. They are not
// in package messages because nothing but the Engine sends them.
type (
	startRunReq struct{ spec *runSpec }
	// sessionReq asks for an existing session's head (a sessionHead);
	// a session not in memory is answered from the journal, without
	// starting a hub.
	sessionReq  struct{ key sessKey }
	sessionHead uint64
	// publishReq sends an event to an existing session's hub (Engine.Publish),
	// from the engine actor, so it is ordered with the hub's idle stop.
	publishReq struct {
		key  sessKey
		emit *messages.Emit
	}
	// subscribeReq attaches a new feed to a session's hub. The engine
	// actor sends the hubSubscribe itself: it is also the one that poisons
	// hubs at shutdown, so (per-sender FIFO) the subscription is attached,
	// and later closed by the stopping hub, never lost as a dead letter.
	subscribeReq struct {
		key   sessKey
		after uint64
		queue int
	}
	// attached answers subscribeReq.
	attached struct {
		feed *feed.Subscription
		hub  *actor.PID
	}
	// stopRunReq forwards a message to a live run's supervisor: a
	// *messages.StopRun or a *messages.Steering.
	stopRunReq struct {
		runID messages.RunID
		msg   any
		abort *abortRecord // an Abort's: journaled before it is answered
	}
	shutdownReq struct{}
	recoverReq  struct{}
	// freezeRun asks a run supervisor to stop its agents and itself
	// without a word (Config.KeepRunsOnShutdown).
	freezeRun struct{}
	// startedRun answers startRunReq: the run, and a channel closed once
	// its run_started is durable.
	startedRun struct {
		ref   RunRef
		acked <-chan struct{}
		hub   *hubShared // ackErr, once acked is closed
	}
	recoverDone struct{ err error }
)

type runEntry struct {
	pid   *actor.PID   // nil while the run is asleep
	spec  *runSpec     // nil while the run is asleep
	key   sessKey      // the run's tenant and session
	ended *atomic.Bool // set by the run supervisor right before it stops itself
	// sleep is set while the run falls asleep and sleeps (asleep.go).
	sleep *sleepState
}

// engineActor owns the registry of sessions and runs.
type engineActor struct {
	e        *Engine
	sessions map[sessKey]*sessionEntry
	hubs     map[string]*sessionEntry // hub PID id → session
	hubGen   uint64                   // makes hub names unique (sessions.go)
	runs     map[messages.RunID]*runEntry
	byPID    map[string]messages.RunID // run supervisor PID id → run
	shutdown *actor.PID                // who asked for shutdown; answered when all stopped
	closing  bool                      // shutdown began: no hub starts any more
	quotas   *admission                // concurrent runs and creation rate per tenant
}

func newEngineActor(e *Engine) *engineActor {
	return &engineActor{
		e: e, sessions: map[sessKey]*sessionEntry{}, hubs: map[string]*sessionEntry{},
		runs: map[messages.RunID]*runEntry{}, byPID: map[string]messages.RunID{},
		quotas: newAdmission(),
	}
}

func (a *engineActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *recoverReq:
		ctx.Respond(&recoverDone{err: a.recoverSessions(ctx)})
	case *adoptReq:
		if err := a.adopt(ctx, m.folded); err != nil {
			ctx.Respond(err)
			return
		}
		ctx.Respond(true)
	case *startRunReq:
		if a.shutdown != nil {
			ctx.Respond(ErrShuttingDown)
			return
		}
		ctx.Respond(a.startRun(ctx, m.spec))
	case *sessionReq:
		ctx.Respond(a.sessionInfo(m))
	case *publishReq:
		s, err := a.existingSession(ctx, m.key)
		if err != nil {
			ctx.Respond(err)
			return
		}
		ctx.Send(s.pid, m.emit)
		ctx.Respond(true)
	case *sweepIdle:
		a.sweepIdleHubs(ctx)
	case *hubStayedMsg:
		if s := a.hubs[ctx.Sender().Id]; s != nil {
			a.hubStayed(s)
		}
	case *sessionReleased:
		a.forgetSession(ctx, m.s)
	case *subscribeReq:
		ctx.Respond(a.subscribe(ctx, m))
	case *stopRunReq:
		r, ok := a.runs[m.runID]
		switch {
		case a.closing:
			// Shutting down: a frozen run would ignore it, and an ended
			// one is ending anyway; a refusal is the only true answer.
			ctx.Respond(ErrShuttingDown)
		case ok && r.ended.Load():
			ctx.Respond(fmt.Errorf("%w: %s", ErrRunTerminal, m.runID))
		case ok && r.sleep != nil:
			// Asleep, or falling asleep: asked again once it is awake.
			sender := ctx.Sender()
			a.whenAwake(ctx, m.runID, r, awaiting{
				then: func(ctx actor.Context) { ctx.RequestWithCustomSender(ctx.Self(), m, sender) },
				fail: func(ctx actor.Context, err error) { ctx.Send(sender, err) },
			})
		case ok:
			if stop, isStop := m.msg.(*messages.StopRun); isStop && !regress.AbortWithoutOutcome.Load() {
				// The run's end is decided here, once: a stop that comes
				// after another end was decided is refused with that end,
				// so the answer always matches the terminal event.
				if d, won := r.spec.outcome.claim(decision{code: stop.Code, msg: stop.Reason, abort: m.abort}); !won {
					ctx.Respond(fmt.Errorf("%w: %s is already %s", ErrRunTerminal, m.runID, d))
					return
				}
				// A supervisor parked on the plan gate handles the
				// cancellation (a system message) first, then the queued StopRun.
				ctx.Send(r.pid, m.msg)
				a.e.interrupts.CancelRun(m.runID)
				ctx.Respond(true)
				return
			}
			ctx.Send(r.pid, m.msg)
			if m.abort != nil { // regress.AbortWithoutOutcome: accepted, with no record
				m.abort.ack <- nil
			}
			ctx.Respond(true)
		default:
			// The caller found the run (Engine.Run) before asking: it is
			// not live, so it has ended.
			ctx.Respond(fmt.Errorf("%w: %s", ErrRunTerminal, m.runID))
		}
	case *shutdownReq:
		a.shutdown, a.closing = ctx.Sender(), true
		if a.e.cfg.KeepRunsOnShutdown {
			// Freeze: stop every run without a word, so that it resumes
			// where it was at the next start (recover.go).
			a.e.frozen.Store(true)
			for id, r := range a.runs {
				if r.sleep != nil { // in the journal already; one falling asleep leaves when it stopped (terminated)
					if r.sleep.settled {
						a.forgetAsleep(id)
					}
					continue
				}
				ctx.Send(r.pid, &freezeRun{})
				// Unpark parked actors so they see it; being frozen, they
				// publish nothing: the journal keeps the interrupts pending
				// for the next start.
				a.e.interrupts.CancelRun(id)
			}
		} else {
			stop := func(ctx actor.Context, id messages.RunID, r *runEntry) {
				ctx.Send(r.pid, &messages.StopRun{Code: messages.ErrCodeInterrupted, Reason: "server shutting down"})
				a.e.interrupts.CancelRun(id)
			}
			for id, r := range a.runs {
				if r.sleep != nil { // it ends as a live run does, once awake
					a.whenAwake(ctx, id, r, awaiting{
						then: func(ctx actor.Context) {
							if r := a.runs[id]; r != nil && r.sleep == nil {
								stop(ctx, id, r)
							}
						},
						// It cannot end now: it stays in the journal, live,
						// and the next start resumes it, rather than hold
						// the shutdown back.
						fail: func(ctx actor.Context, _ error) {
							if r := a.runs[id]; r != nil && r.sleep != nil {
								a.forgetAsleep(id)
								a.maybeStopHubs(ctx)
							}
						},
					})
					continue
				}
				stop(ctx, id, r)
			}
		}
		a.maybeStopHubs(ctx)
	case *sweepParked:
		a.sweepParkedRuns(ctx, m)
	case *wakeRun:
		a.wakeUp(ctx, m.id)
	case *runSettled:
		a.settled(ctx, m.id)
	case *actor.Terminated:
		a.terminated(ctx, m.Who)
	}
}

func (a *engineActor) startRun(ctx actor.Context, spec *runSpec) any {
	k := sessKey{spec.tenant, spec.session}
	if p := a.e.cfg.Placement; p != nil && !p.Holds(a.e.journalKeyOf(k)) {
		return errNotHeld // given up since start claimed it
	}
	// The session first: a start that must wait for a stopping hub is
	// asked again, and must not spend a rate token each time.
	s, err := a.openSession(ctx, k)
	if err != nil {
		return err
	}
	limits, live := a.e.limits(spec.tenant), 0
	if limits.ConcurrentRuns > 0 {
		live = a.liveRuns(spec.tenant)
	}
	if err := a.e.admitSpend(spec.tenant, limits); err != nil {
		return err
	}
	if err := a.quotas.admit(spec.tenant, limits, a.e.cfg.Now(), live); err != nil {
		return err
	}
	spec.out = a.newOutbox(spec, s.pid, 0, 0, nil)
	// Registered before the run exists, so its first event finds it.
	a.e.index.Register(spec.tenant, spec.runID, spec.session, spec.question, a.e.cfg.Now())
	acked := s.shared.ackOf(spec.runID)
	if err := a.spawnRun(ctx, spec, nil); err != nil {
		return err
	}
	return &startedRun{ref: RunRef{Tenant: spec.tenant, RunID: spec.runID, SessionID: spec.session}, acked: acked, hub: s.shared}
}

// liveRuns counts tenant's runs that have not ended. A run whose
// supervisor emitted its terminal event and is stopping no longer counts,
// so a client that saw the terminal event can start its next run at once.
func (a *engineActor) liveRuns(tenant messages.TenantID) int {
	n := 0
	for _, r := range a.runs {
		if r.key.tenant == tenant && !r.ended.Load() {
			n++
		}
	}
	return n
}

// newOutbox makes the outbox of a run whose session hub is hub; sent and
// filesBytes and used count the events, the bytes of files written and the model usage (per model) it already has (a
// run resumed after a restart: its spend so far counts against its
// budgets).
func (a *engineActor) newOutbox(spec *runSpec, hub *actor.PID, sent, filesBytes int64, used map[string]messages.Usage) *outbox {
	meter := a.e.newMeter(spec.tenant, spec.budget)
	meter.Restore(used)
	o := newOutbox(a.e, hub, a.e.limits(spec.tenant), meter)
	o.sent.Store(sent)
	o.correlation = spec.requestID
	o.filesBytes.Store(filesBytes)
	return o
}

// sessionInfo answers a sessionReq.
func (a *engineActor) sessionInfo(m *sessionReq) any {
	if s, err := a.session(m.key); err != nil {
		return err
	} else if s != nil {
		return sessionHead(s.shared.Head())
	}
	head, err := a.e.cfg.Journal.Head(context.Background(), a.e.journalKeyOf(m.key))
	switch {
	case err != nil:
		return fmt.Errorf("actors: session %s: %w", m.key.id, err)
	case head == 0:
		return fmt.Errorf("%w: %s", ErrSessionNotFound, m.key.id)
	}
	return sessionHead(head)
}

// spawnRun starts a run supervisor; replay, when set, rebuilds a run after
// a restart (recover.go).
func (a *engineActor) spawnRun(ctx actor.Context, spec *runSpec, replay *restoredRun) error {
	ended := new(atomic.Bool)
	if replay != nil {
		a.e.restoring.Add(1) // done when the run is back in place
	}
	var inst *runActor
	props := a.e.props(func() actor.Actor {
		inst = newRunActor(a.e, spec, ended)
		inst.replay = replay
		return inst
	}, actor.WithSupervisor(graphStrategy(&inst)), actor.WithMailbox(actor.UnboundedLockfree()))
	pid, err := ctx.SpawnNamed(props, runNamePrefix+string(spec.runID))
	if err != nil {
		return fmt.Errorf("actors: spawn run: %w", err)
	}
	if testHookRunSpawned != nil {
		testHookRunSpawned(spec)
	}
	a.runs[spec.runID] = &runEntry{pid: pid, spec: spec, key: sessKey{spec.tenant, spec.session}, ended: ended}
	a.e.runCount.Add(1)
	a.byPID[pid.Id] = spec.runID
	if s := a.sessions[sessKey{spec.tenant, spec.session}]; s != nil {
		s.runs++
	}
	return nil
}

func (a *engineActor) terminated(ctx actor.Context, who *actor.PID) {
	forgetProcess(ctx, who)
	if id, ok := a.byPID[who.Id]; ok {
		r := a.runs[id]
		delete(a.byPID, who.Id)
		if r.sleep != nil { // it fell asleep (asleep.go)
			a.supervisorAsleep(ctx, id, r)
			if a.e.frozen.Load() { // shutting down, keeping runs: it is in the journal
				a.forgetAsleep(id)
				a.maybeStopHubs(ctx)
			}
			return
		}
		delete(a.runs, id)
		a.e.runCount.Add(-1)
		a.e.interrupts.ForgetRun(id)
		if s := a.sessions[sessKey{r.spec.tenant, r.spec.session}]; s != nil {
			s.runs--
			s.shared.touch() // idle from now on, not from its last event
		}
		if !r.ended.Load() && !a.e.frozen.Load() { // a frozen run stops unended on purpose
			// The supervisor died (it is stopped on any panic) before ending
			// its run: end it on its behalf so the run still has its one
			// terminal event.
			a.e.cfg.Logger.Error("run supervisor died; ending run", "run", id)
			d, _ := r.spec.outcome.claim(decision{code: messages.ErrCodeInternal, msg: "run supervisor failed"})
			if d.code == "" { // it had decided to finish, but died before it could
				d = decision{code: messages.ErrCodeInternal, msg: "run supervisor failed"}
			}
			d.abort.post(ctx, r.spec) // an accepted abort it died before recording
			r.spec.post(ctx, supervisorAgentID, messages.RunLane(), &messages.RunErrorPayload{Code: d.code, Message: d.msg, RunIdentity: r.spec.identity()})
		}
		a.maybeStopHubs(ctx)
		return
	}
	if s, ok := a.hubs[who.Id]; ok {
		a.hubTerminated(ctx, s)
		a.maybeStopHubs(ctx)
	}
}

func (a *engineActor) subscribe(ctx actor.Context, m *subscribeReq) any {
	s, err := a.existingSession(ctx, m.key)
	if err != nil {
		return err
	}
	if head := s.shared.Head(); m.after > head {
		return fmt.Errorf("%w: after=%d, last seq is %d", ErrCursorAhead, m.after, head)
	}
	f := feed.New(s.shared, m.after, m.queue)
	ctx.Send(s.pid, &hubSubscribe{sub: f})
	return &attached{feed: f, hub: s.pid}
}

// maybeStopHubs continues a shutdown: once every run has ended, hubs are
// poisoned (so they first handle the events already queued), and once every
// hub has stopped the shutdown request is answered.
func (a *engineActor) maybeStopHubs(ctx actor.Context) {
	if a.shutdown == nil || len(a.runs) > 0 {
		return
	}
	if len(a.sessions) == 0 {
		ctx.Send(a.shutdown, true)
		a.shutdown = nil
		return
	}
	for _, s := range a.sessions {
		if !s.poisoned && !s.idle {
			s.poisoned = true
			ctx.Poison(s.pid)
		}
	}
}
