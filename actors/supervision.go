package actors

import (
	"slices"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/conclave-ai/conclave/actors/supervise"
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
//   - run supervisor → director, workers, synthesiser; team supervisor →
//     members; node → sub-agents: the policy of the agent's role
//     (runSpec.policy: director, worker, team, subagent; the synthesiser
//     has the default), applied by supervise.Strategy. one-for-one (the
//     default) restarts the failing agent alone; all-for-one restarts it
//     and every live sibling of its kind that has not reported (a team's
//     running members; a node's running sub-agents); stop restarts
//     nothing. A restart is allowed at most Limit times within Window;
//     then the agent stops, which escalates to the parent. A failure is a
//     panic, or a model error marked model.ErrTransient (a rate limit, a
//     dropped stream), which the agent raises as a panic for this
//     strategy; any other model error fails the agent without a restart.
//     A restarted agent emits agent_restarted on its lane (a sibling's
//     reason names the agent that failed), waits out an exponential
//     backoff with jitter (supervise.Policy.Wait: a model that keeps
//     failing or rate-limiting is not hammered; a sibling, which did not
//     fail, does not wait), and runs again from its first turn (its
//     attempt and failure counts live outside the instance). A stopped
//     agent's parent closes the agent's lane as failed: the run supervisor
//     fails the run, a team fails its node, a node gives the model an
//     error tool result and carries on.
//   - run or team supervisor → team and debate nodes, steerers: stop.
//
// A debate round is run by the debate actor itself (its agents are turns,
// not actors): its agents build on each other's turns, so by default
// (debater all-for-one) the debate restarts the whole round when one
// fails (debateActor.restartRound), with the debater policy's backoff and
// limit; debater stop fails the debate node instead. protoactor's
// ExponentialBackoffStrategy does not fit the backoff: it never stops (no
// escalation), grows linearly and draws its jitter from the global
// math/rand, so the wait lives in the agent (begin), where Stopping
// cancels it.
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

// Supervision roles (messages.Supervision): the role whose policy
// supervises an agent.
const (
	roleDirector = "director"
	roleWorker   = "worker"
	roleSubagent = "subagent"
	roleDebater  = "debater"
	roleTeam     = "team"
)

// policy is the supervision of the run's agents of role (one of the
// roles above; "" for the synthesiser and the other agents no role
// names): the run's choice (runSpec.supervision, the server's defaults
// merged in) over Config's limits and backoff, one-for-one unless the
// role defaults otherwise (debaters: all-for-one, their round).
func (s *runSpec) policy(cfg Config, role string) supervise.Policy {
	d := supervise.Policy{Strategy: messages.SupervisionOneForOne, Limit: cfg.RestartLimit, Window: cfg.RestartWindow,
		Backoff: cfg.RestartBackoff, BackoffMax: cfg.RestartBackoffMax}
	if role == roleDebater {
		d.Strategy = messages.SupervisionAllForOne
	}
	if role == "" {
		return d
	}
	return d.With(s.supervision.Role(role))
}

// graphStrategy is a run or team supervisor's (r is the supervisor, set
// once its actor is built): agents are supervised by their role's policy
// (PolicyOf), but team and debate nodes and steerers stop on a panic, and
// their parent closes their lane as failed (a steerer's as rejected).
// Their state is their progress through waves or rounds, and a restart in
// place would reopen lanes that already closed.
func graphStrategy(r **runActor) actor.SupervisorStrategy {
	return supervise.New(func() supervise.Group { return graphGroup{*r} })
}

// graphGroup is a run or team supervisor's children as supervise sees
// them (a type of its own: runActor has methods enough).
type graphGroup struct{ r *runActor }

var _ supervise.Group = graphGroup{}

// childKind is what a run or team supervisor's child is, by its actor
// name: an agent's name, or a node actor's prefix.
func childKind(pid *actor.PID) string {
	name := pid.Id[strings.LastIndexByte(pid.Id, '/')+1:]
	for _, p := range []string{teamNamePrefix, debateNamePrefix, steerNamePrefix, nodeNamePrefix} {
		if strings.HasPrefix(name, p) {
			return p
		}
	}
	return name
}

// PolicyOf implements supervise.Group: a worker's is its role's (the
// team's for a team's members), the director's its role's, the
// synthesiser's the default; node actors and steerers stop.
func (g graphGroup) PolicyOf(child *actor.PID) supervise.Policy {
	switch childKind(child) {
	case teamNamePrefix, debateNamePrefix, steerNamePrefix:
		return supervise.Stop
	}
	if c := g.r.agents.byPID[child.Id]; c != nil {
		return g.policyOfRole(c.role)
	}
	return g.r.spec.policy(g.r.e.cfg, "")
}

// policyOfRole is the policy of the supervisor's agents of role.
func (g graphGroup) policyOfRole(role model.Role) supervise.Policy {
	r := g.r
	switch {
	case role == model.RoleDirector:
		return r.spec.policy(r.e.cfg, roleDirector)
	case role == model.RoleWorker && r.team != nil:
		return r.spec.policy(r.e.cfg, roleTeam)
	case role == model.RoleWorker:
		return r.spec.policy(r.e.cfg, roleWorker)
	}
	return r.spec.policy(r.e.cfg, "")
}

// Siblings implements supervise.Group: the live agents of failed's kind
// (workers for a worker) that have not reported, in start order.
func (g graphGroup) Siblings(failed *actor.PID) []*actor.PID {
	kind := childKind(failed)
	var out []*actor.PID
	for _, c := range g.r.agents.childrenInOrder() {
		if c.pid.Id != failed.Id && !c.reported && !c.stopping && c.shared.done.Load() == nil && childKind(c.pid) == kind {
			out = append(out, c.pid)
		}
	}
	return out
}

// Restarting implements supervise.Group: the sibling's agent_restarted
// will say why it restarted.
func (g graphGroup) Restarting(sibling, failed *actor.PID, reason any) {
	c, f := g.r.agents.byPID[sibling.Id], g.r.agents.byPID[failed.Id]
	if c == nil || f == nil {
		return
	}
	c.shared.restartCause(f.agentID, reason)
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

// subagentStrategy is an agent's, for its sub-agents (a is the agent,
// set each time protoactor builds its instance): the subagent role's
// policy.
func subagentStrategy(a **agentActor) actor.SupervisorStrategy {
	return supervise.New(func() supervise.Group { return subGroup{*a} })
}

// subGroup is an agent's sub-agents as supervise sees them.
type subGroup struct{ a *agentActor }

var _ supervise.Group = subGroup{}

// PolicyOf implements supervise.Group: the subagent role's.
func (g subGroup) PolicyOf(*actor.PID) supervise.Policy {
	return g.a.spec.run.policy(g.a.spec.e.cfg, roleSubagent)
}

// Siblings implements supervise.Group: the agent's other sub-agents that
// have not reported.
func (g subGroup) Siblings(failed *actor.PID) []*actor.PID {
	var out []*actor.PID
	for _, s := range g.a.subs {
		if s.pid.Id != failed.Id && !s.reported && !s.cancel && s.shared.done.Load() == nil {
			out = append(out, s.pid)
		}
	}
	slices.SortFunc(out, func(x, y *actor.PID) int { return strings.Compare(x.Id, y.Id) })
	return out
}

// Restarting implements supervise.Group.
func (g subGroup) Restarting(sibling, failed *actor.PID, reason any) {
	s, f := g.a.subs[sibling.Id], g.a.subs[failed.Id]
	if s == nil || f == nil {
		return
	}
	s.shared.restartCause(f.agentID, reason)
}

// noChildren is a debate's strategy: a debate runs its tool-less turns
// itself; a speaker given tools (debatetools.go) is its one child at a
// time, restarted alone within Config's limits (the debater role's
// all-for-one applies to the round, which the debate restarts itself).
func noChildren(cfg Config) actor.SupervisorStrategy {
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
