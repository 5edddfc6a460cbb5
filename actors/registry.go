package actors

import (
	"fmt"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/conclave-ai/conclave/actors/feed"
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
	sessionReq  struct {
		tenant messages.TenantID
		id     messages.SessionID
	}
	stopRunReq struct {
		runID messages.RunID
		stop  *messages.StopRun
	}
	shutdownReq struct{}
)

type sessionEntry struct {
	tenant   messages.TenantID
	pid      *actor.PID
	shared   *hubShared
	poisoned bool
}

type runEntry struct {
	pid   *actor.PID
	spec  *runSpec
	ended *atomic.Bool // set by the run supervisor right before it stops itself
}

// engineActor owns the registry of sessions and runs.
type engineActor struct {
	e        *Engine
	sessions map[messages.SessionID]*sessionEntry
	hubs     map[string]messages.SessionID // hub PID id → session
	runs     map[messages.RunID]*runEntry
	byPID    map[string]messages.RunID // run supervisor PID id → run
	ended    map[messages.RunID]bool   // runs that ended (for Abort's 409)
	shutdown *actor.PID                // who asked for shutdown; answered when all stopped
}

func newEngineActor(e *Engine) *engineActor {
	return &engineActor{
		e: e, sessions: map[messages.SessionID]*sessionEntry{}, hubs: map[string]messages.SessionID{},
		runs: map[messages.RunID]*runEntry{}, byPID: map[string]messages.RunID{}, ended: map[messages.RunID]bool{},
	}
}

func (a *engineActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *startRunReq:
		if a.shutdown != nil {
			ctx.Respond(ErrShuttingDown)
			return
		}
		ctx.Respond(a.startRun(ctx, m.spec))
	case *sessionReq:
		if s, ok := a.sessions[m.id]; ok && s.tenant == m.tenant {
			ctx.Respond(s)
			return
		}
		ctx.Respond(fmt.Errorf("%w: %s", ErrSessionNotFound, m.id))
	case *stopRunReq:
		r, ok := a.runs[m.runID]
		switch {
		case ok:
			ctx.Send(r.pid, m.stop)
			// A supervisor parked on the plan gate handles the cancellation
			// (a system message) first, then the queued StopRun.
			a.e.interrupts.CancelRun(m.runID)
			ctx.Respond(true)
		case a.ended[m.runID]:
			ctx.Respond(fmt.Errorf("%w: %s", ErrRunTerminal, m.runID))
		default:
			ctx.Respond(fmt.Errorf("%w: %s", ErrRunNotFound, m.runID))
		}
	case *shutdownReq:
		a.shutdown = ctx.Sender()
		for id, r := range a.runs {
			ctx.Send(r.pid, &messages.StopRun{Code: messages.ErrCodeInterrupted, Reason: "server shutting down"})
			a.e.interrupts.CancelRun(id)
		}
		a.maybeStopHubs(ctx)
	case *actor.Terminated:
		a.terminated(ctx, m.Who)
	}
}

func (a *engineActor) startRun(ctx actor.Context, spec *runSpec) any {
	s, ok := a.sessions[spec.session]
	if ok && s.tenant != spec.tenant {
		// Another tenant's session does not exist for this caller.
		return fmt.Errorf("%w: %s", ErrSessionNotFound, spec.session)
	}
	if !ok {
		shared := &hubShared{
			session: spec.session, journal: a.e.cfg.Journal,
			subs: map[*feed.Subscription]struct{}{}, terminated: map[messages.RunID]bool{},
		}
		pid, err := ctx.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return &hubActor{e: a.e, s: shared} }),
			hubNamePrefix+string(spec.session))
		if err != nil {
			return fmt.Errorf("actors: spawn hub: %w", err)
		}
		s = &sessionEntry{tenant: spec.tenant, pid: pid, shared: shared}
		a.sessions[spec.session] = s
		a.hubs[pid.Id] = spec.session
	}
	spec.hub = s.pid
	// Registered before the run exists, so its first event finds it.
	a.e.index.Register(spec.tenant, spec.runID, spec.session, spec.question, a.e.cfg.Now())
	ended := new(atomic.Bool)
	props := actor.PropsFromProducer(func() actor.Actor { return newRunActor(a.e, spec, ended) },
		actor.WithSupervisor(agentStrategy(a.e.cfg)), actor.WithMailbox(actor.UnboundedLockfree()))
	pid, err := ctx.SpawnNamed(props, runNamePrefix+string(spec.runID))
	if err != nil {
		return fmt.Errorf("actors: spawn run: %w", err)
	}
	a.runs[spec.runID] = &runEntry{pid: pid, spec: spec, ended: ended}
	a.byPID[pid.Id] = spec.runID
	return RunRef{Tenant: spec.tenant, RunID: spec.runID, SessionID: spec.session}
}

func (a *engineActor) terminated(ctx actor.Context, who *actor.PID) {
	if id, ok := a.byPID[who.Id]; ok {
		r := a.runs[id]
		delete(a.byPID, who.Id)
		delete(a.runs, id)
		a.ended[id] = true
		if !r.ended.Load() {
			// The supervisor died (it is stopped on any panic) before ending
			// its run: end it on its behalf so the run still has its one
			// terminal event.
			a.e.cfg.Logger.Error("run supervisor died; ending run", "run", id)
			a.e.publish(ctx, r.spec.hub, &messages.Emit{RunID: id, AgentID: supervisorAgentID, Lane: messages.RunLane(),
				Payload: &messages.RunErrorPayload{Code: messages.ErrCodeInternal, Message: "run supervisor failed"}})
		}
		a.maybeStopHubs(ctx)
		return
	}
	if sid, ok := a.hubs[who.Id]; ok {
		delete(a.hubs, who.Id)
		delete(a.sessions, sid)
		a.maybeStopHubs(ctx)
	}
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
		if !s.poisoned {
			s.poisoned = true
			ctx.Poison(s.pid)
		}
	}
}
