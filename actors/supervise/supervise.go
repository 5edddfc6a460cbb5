// Package supervise is the supervision of a run's agents that a user
// chooses per role (messages.Supervision): a Policy (strategy, restart
// limit and window, backoff) and a protoactor SupervisorStrategy that
// applies the policy of each failing child.
//
// protoactor's own strategies do not fit as they are: its
// AllForOneStrategy restarts every child of the supervisor, and a run or
// team supervisor's children are of several kinds (the director, worker
// nodes, team and debate nodes, the synthesiser) of which only the failing
// agent's own kind may restart together; an agent that already reported
// must not restart (its lane closed). So the supervisor names the
// siblings (Group), and Strategy restarts them with the failing child.
package supervise

import (
	"fmt"
	"hash/fnv"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/conclave-ai/conclave/messages"
)

// Policy is a role's supervision with every default applied.
type Policy struct {
	Strategy messages.SupervisionStrategy
	// Limit is how many restarts within Window a child gets; the failure
	// after that stops it.
	Limit  int
	Window time.Duration
	// Backoff is the wait before a restarted agent runs again after its
	// first failure, doubled per further failure up to BackoffMax; a
	// negative Backoff is no wait.
	Backoff, BackoffMax time.Duration
}

// Stop is the policy of children that are never restarted.
var Stop = Policy{Strategy: messages.SupervisionStop}

// With returns d with p's set fields applied (p may be nil).
func (d Policy) With(p *messages.SupervisionPolicy) Policy {
	if p == nil {
		return d
	}
	if p.Strategy != "" {
		d.Strategy = p.Strategy
	}
	if p.RestartLimit > 0 {
		d.Limit = p.RestartLimit
	}
	if p.WindowMS > 0 {
		d.Window = time.Duration(p.WindowMS) * time.Millisecond
	}
	if p.BackoffMS > 0 {
		d.Backoff = time.Duration(p.BackoffMS) * time.Millisecond
	}
	return d
}

// Wait is how long an agent waits before it runs again after its
// failures-th failure: Backoff doubled per earlier failure, at most
// BackoffMax, times a jitter factor in [0.8, 1.2) so that agents failing
// together (a rate-limited model) do not all come back at once. The
// jitter is a hash of key (the run and the agent) and the failure, not a
// random draw: the same run waits the same, in tests and in simulations.
// Zero failures (a restart of the server, or a sibling restarted with a
// failing agent), or a negative Backoff, is no wait.
func (p Policy) Wait(key string, failures int) time.Duration {
	if failures <= 0 || p.Backoff < 0 {
		return 0
	}
	d := p.Backoff
	for i := 1; i < failures && d < p.BackoffMax; i++ {
		d *= 2
	}
	if p.BackoffMax > 0 {
		d = min(d, p.BackoffMax)
	}
	h := fnv.New64a()
	fmt.Fprintf(h, "%s\x00%d", key, failures)
	u := float64(h.Sum64()>>11) / (1 << 53) // [0, 1)
	return time.Duration(float64(d) * (0.8 + 0.4*u))
}

// Group is a supervisor's view of its children, for Strategy. Its methods
// are called on the supervisor's goroutine (protoactor handles a child's
// failure in its parent's context), so they may read the supervisor's
// state without locks.
type Group interface {
	// PolicyOf is the policy of child.
	PolicyOf(child *actor.PID) Policy
	// Siblings are the children that restart with failed under
	// all-for-one: the live ones of failed's kind that have not reported,
	// failed excluded.
	Siblings(failed *actor.PID) []*actor.PID
	// Restarting is told, before the restart is sent, that sibling
	// restarts because failed failed with reason.
	Restarting(sibling, failed *actor.PID, reason any)
}

// Strategy supervises the children of one supervisor by the policy of
// each failing child (Group.PolicyOf):
//
//   - stop: the child is stopped; its parent closes its lane as failed.
//   - one-for-one: the child is restarted, at most Limit times within
//     Window, then stopped.
//   - all-for-one: the same, and each of its Group.Siblings is restarted
//     with it (a sibling's restart does not count against its own limit;
//     past the limit only the failing child stops, and its parent fails
//     what it belongs to).
//
// Every decision is published on the actor system's event stream as
// protoactor's strategies do (actor.SupervisorEvent).
type Strategy struct {
	group func() Group
}

var _ actor.SupervisorStrategy = (*Strategy)(nil)

// New returns a Strategy over the group group returns. It is a function
// because props (and their strategy) are built before the supervisor
// they belong to; it is only called on failures, once the supervisor
// runs.
func New(group func() Group) *Strategy { return &Strategy{group: group} }

// HandleFailure implements actor.SupervisorStrategy.
func (s *Strategy) HandleFailure(sys *actor.ActorSystem, sup actor.Supervisor, child *actor.PID, rs *actor.RestartStatistics, reason, _ any) {
	g := s.group()
	p := g.PolicyOf(child)
	if p.Strategy == messages.SupervisionStop || p.Limit <= 0 {
		publish(sys, child, reason, actor.StopDirective)
		sup.StopChildren(child)
		return
	}
	rs.Fail()
	if rs.NumberOfFailures(p.Window) > p.Limit {
		rs.Reset()
		publish(sys, child, reason, actor.StopDirective)
		sup.StopChildren(child)
		return
	}
	pids := []*actor.PID{child}
	if p.Strategy == messages.SupervisionAllForOne {
		for _, sib := range g.Siblings(child) {
			g.Restarting(sib, child, reason)
			pids = append(pids, sib)
		}
	}
	publish(sys, child, reason, actor.RestartDirective)
	sup.RestartChildren(pids...)
}

func publish(sys *actor.ActorSystem, child *actor.PID, reason any, d actor.Directive) {
	sys.EventStream.Publish(&actor.SupervisorEvent{Child: child, Reason: reason, Directive: d})
}
