package actors

import (
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

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
//     Config.RestartWindow; then stop. A restarted agent emits
//     agent_restarted on its lane and runs again from its first turn (its
//     attempt count lives outside the instance). A stopped agent's parent
//     closes the agent's lane as failed: the run supervisor fails the run,
//     a node gives the model an error tool result and carries on.
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
