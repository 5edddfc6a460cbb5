package actors

import (
	"fmt"
	"hash/fnv"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/model"
)

// Supervision strategies, one per kind of parent:
//
//   - engine → hubs: restart (at most 10 times in 10 s, then stop). A hub's
//     state (seq, pending batch, subscribers) lives in hubShared, outside the
//     actor instance, so a restart loses nothing but the message that
//     panicked.
//   - engine → run supervisors: stop. A run supervisor's state is the run
//     itself; restarting it would re-run the plan. The engine closes a run
//     whose supervisor died with run_error{code:"internal"}.
//   - run supervisor → director, nodes, synthesiser, and node → sub-agents:
//     restart, at most Config.RestartLimit times within
//     Config.RestartWindow; then stop, which escalates to the parent. A
//     failure is a panic, or a model error marked model.ErrTransient (a
//     rate limit, a dropped stream), which the agent raises as a panic for
//     this strategy; any other model error fails the agent without a
//     restart. A restarted agent emits agent_restarted on its lane, waits
//     out an exponential backoff with jitter (Config.restartBackoff: a
//     model that keeps failing or rate-limiting is not hammered), and runs
//     again from its first turn (its attempt and failure counts live
//     outside the instance). A stopped agent's parent closes the agent's
//     lane as failed: the run supervisor fails the run, a node gives the
//     model an error tool result and carries on.
//
// These are protoactor's OneForOneStrategy: an agent's siblings share no
// state with it (each owns its lane and its turns), so one failing never
// restarts another. A debate round is the exception: its agents build on
// each other's turns, so the debate actor, which runs them, restarts the
// whole round when one fails (all-for-one, debateActor.restartRound), with
// the same backoff and limit. protoactor's ExponentialBackoffStrategy does not fit
// the backoff: it never stops (no escalation), grows linearly and draws
// its jitter from the global math/rand, so the wait lives in the agent
// (begin), where Stopping cancels it.
//
// protoactor drops the message during which an actor panicked; agents turn
// panics of their model goroutine into a message they re-panic on, so the
// panic is always raised inside the actor and seen by its supervisor.

// engineStrategy dispatches on the kind of child, which its name encodes.
func engineStrategy(cfg Config) actor.SupervisorStrategy {
	return &byChildName{
		prefixes:  []string{hubNamePrefix},
		match:     actor.NewOneForOneStrategy(10, 10*time.Second, func(any) actor.Directive { return actor.RestartDirective }),
		otherwise: actor.NewOneForOneStrategy(0, 0, func(any) actor.Directive { return actor.StopDirective }),
	}
}

// graphStrategy is a run or team supervisor's: agents restart (see
// agentStrategy), but team and debate nodes and steerers stop on a panic,
// and their parent closes their lane as failed (a steerer's as rejected). Their state is their progress
// through waves or rounds, and a restart in place would reopen lanes
// that already closed.
func graphStrategy(cfg Config) actor.SupervisorStrategy {
	return &byChildName{
		prefixes:  []string{teamNamePrefix, debateNamePrefix, steerNamePrefix},
		match:     actor.NewOneForOneStrategy(0, 0, func(any) actor.Directive { return actor.StopDirective }),
		otherwise: agentStrategy(cfg),
	}
}

// Actor name prefixes of a graph's node actors, by kind. A node's actor
// is named by its kind and its id local to its graph (ids never contain
// '/'), so names never collide and the strategy reads the kind from the
// last segment of the actor id.
const (
	nodeNamePrefix   = "node-"
	teamNamePrefix   = "team-"
	debateNamePrefix = "debate-"
	steerNamePrefix  = "steer-"
)

// childName is the actor name of a run or team supervisor's agent child:
// workers by kind and local id, the others by their local agent id
// (director, synthesizer, steer-<id>).
func childName(role model.Role, agentID string) string {
	if role == model.RoleWorker {
		return nodeNamePrefix + localID(agentID)
	}
	return localID(agentID)
}

// agentStrategy supervises agents (see above).
func agentStrategy(cfg Config) actor.SupervisorStrategy {
	return actor.NewOneForOneStrategy(cfg.RestartLimit, cfg.RestartWindow, func(any) actor.Directive { return actor.RestartDirective })
}

type byChildName struct {
	prefixes  []string
	match     actor.SupervisorStrategy
	otherwise actor.SupervisorStrategy
}

func (s *byChildName) HandleFailure(sys *actor.ActorSystem, sup actor.Supervisor, child *actor.PID, rs *actor.RestartStatistics, reason, msg any) {
	name := child.Id[strings.LastIndexByte(child.Id, '/')+1:]
	for _, p := range s.prefixes {
		if strings.HasPrefix(name, p) {
			s.match.HandleFailure(sys, sup, child, rs, reason, msg)
			return
		}
	}
	s.otherwise.HandleFailure(sys, sup, child, rs, reason, msg)
}

// restartBackoff is how long an agent waits before it runs again after
// its failures-th failure: RestartBackoff doubled per earlier failure, at
// most RestartBackoffMax, times a jitter factor in [0.8, 1.2) so that
// agents failing together (a rate-limited model) do not all come back at
// once. The jitter is a hash of the run, the agent and the failure, not a
// random draw: the same run waits the same, in tests and in simulations.
// Zero failures (a restart of the server, not of a failing agent), or a
// negative RestartBackoff, is no wait.
func (c Config) restartBackoff(run messages.RunID, agent string, failures int) time.Duration {
	if failures <= 0 || c.RestartBackoff < 0 {
		return 0
	}
	d := c.RestartBackoff
	for i := 1; i < failures && d < c.RestartBackoffMax; i++ {
		d *= 2
	}
	d = min(d, c.RestartBackoffMax)
	h := fnv.New64a()
	fmt.Fprintf(h, "%s\x00%s\x00%d", run, agent, failures)
	u := float64(h.Sum64()>>11) / (1 << 53) // [0, 1)
	return time.Duration(float64(d) * (0.8 + 0.4*u))
}
