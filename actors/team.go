package actors

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/conclave-ai/conclave/actors/compact"
	"github.com/conclave-ai/conclave/actors/dag"
	"github.com/conclave-ai/conclave/actors/runstate"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/model"
)

// A team node runs its nested plan under a supervisor of its own: a
// runActor with a teamScope, spawned as the team node's actor by the
// supervisor of the graph the team is in. It runs the nested waves exactly
// like the run's (same scheduling, failure and skip rules, one level
// deeper, on the team node's lane), then a team synthesiser; the
// synthesis, compacted, is the team node's output. To its parent it is one
// more worker: it opens and closes the node's lane and reports AgentDone.

// teamScope is what makes a runActor a team supervisor.
type teamScope struct {
	node   *messages.PlanNode // the team node, run-wide id; node.Team holds local ids
	lane   messages.Lane      // the team node's lane
	depth  int                // 1 for a team of the run's plan
	wave   int                // the team node's wave in its parent graph
	inputs []string           // the team node's dependency outputs
	shared *agentShared
	// stopped: the parent stopped the team (the run is ending); the parent
	// closes the team's lane, the team only closes its nested lanes.
	stopped bool
	// restore puts a team that was running before a restart back where it
	// was: its part of the run's folded state (runstate.Run.Split;
	// recover.go); synthesized: its team_synthesized was published already.
	restore     *runstate.Run
	synthesized bool
}

// spawnTeam starts the supervisor of team node info.node.
func (w *graphRunner) spawnTeam(ctx actor.Context, info *nodeInfo, req model.Request, shared *agentShared, res *nodeResume) {
	r := w.r
	depth := 1
	if r.team != nil {
		depth = r.team.depth + 1
	}
	scope := &teamScope{node: info.node, lane: r.nodeLane(info.node.ID), depth: depth, wave: info.wave, inputs: req.Context, shared: shared}
	if res != nil && res.team != nil {
		scope.restore = res.team
		r.e.restoring.Add(1) // done once the team is back in place (resumeTeam)
	}
	var inst *runActor
	props := r.e.props(func() actor.Actor {
		inst = newRunActor(r.e, r.spec, new(atomic.Bool))
		inst.team = scope
		return inst
	}, actor.WithSupervisor(graphStrategy(&inst)), actor.WithMailbox(actor.UnboundedLockfree()))
	r.agents.spawnChild(ctx, props, teamNamePrefix+localID(info.node.ID), &child{agentID: info.node.ID, lane: scope.lane, role: model.RoleWorker, shared: shared})
}

// spawnChild spawns an agent, team or debate actor and records it as c.
func (k *agentSet) spawnChild(ctx actor.Context, props *actor.Props, name string, c *child) {
	r := k.r
	pid, err := ctx.SpawnNamed(props, name)
	if err != nil { // names are unique within a graph by construction
		panic(fmt.Sprintf("run %s: spawn %s: %v", r.spec.runID, c.agentID, err))
	}
	c.pid = sendablePID(pid)
	k.spawned++
	c.order = k.spawned
	k.byPID[pid.Id] = c
}

// childrenInOrder lists the live agents in the order they were started:
// what stopping them emits (their lanes closing) then comes in the same
// order every time, as a deterministic simulation needs (testkit/sim).
func (k *agentSet) childrenInOrder() []*child {
	out := slices.Collect(maps.Values(k.byPID))
	slices.SortFunc(out, func(a, b *child) int { return cmp.Compare(a.order, b.order) })
	return out
}

// startTeam opens the team node's lane and starts its first nested wave.
func (r *runActor) startTeam(ctx actor.Context) {
	t := r.team
	r.start = r.e.cfg.Now()
	sh := t.shared
	sh.attempts++
	if !sh.opened {
		sh.opened = true
		r.emit(ctx, &messages.NodeStartedPayload{NodeID: t.node.ID, Wave: t.wave, Goal: t.node.Goal, Deps: t.node.Deps, Kind: messages.KindTeam, Role: t.node.Role})
	} else {
		r.emit(ctx, &messages.AgentRestartedPayload{Attempt: sh.attempts, Reason: sh.lastPanic})
	}
	plan := dag.Qualify(t.node.ID, *t.node.Team)
	r.emit(ctx, &messages.TeamStartedPayload{TeamID: t.node.ID, Depth: t.depth, Role: t.node.Role, Plan: plan, Waves: dag.Waves(plan)})
	r.phase = phaseExecuting
	r.graph.startWave(ctx, 0)
}

// resumeTeam puts a team that was running before a restart back where it
// was: its nested graph goes on exactly as a run's does (resumeGraph).
func (r *runActor) resumeTeam(ctx actor.Context) {
	t := r.team
	defer r.e.restoring.Done()                                // its parked agents were added before this Done
	r.st, r.g = t.restore, t.restore.GraphOf(t.lane.StreamID) // the team's state is this supervisor's from now on
	t.restore = nil
	r.start = r.e.cfg.Now()
	r.graph.resumeGraph(ctx)
}

// teamStopping: the parent stops the team. protoactor stops the nested
// agents first; their Terminated close their lanes (closeDeadLane), and the
// last one ends the open wave. The parent closes the team's own lane.
func (r *runActor) teamStopping(ctx actor.Context) {
	if r.ended.Load() || r.e.frozen.Load() {
		return // ended, or frozen with the run: nothing more happens
	}
	r.team.stopped = true
	for _, c := range r.agents.byPID {
		c.stopping = true // protoactor is stopping them
	}
	if r.failCode == "" {
		r.failCode, r.failMsg = messages.ErrCodeAborted, "the team was stopped"
	}
	// A stopping actor gets no more messages: a batch's endingStep would
	// never come, so the ending goes on at once (endingFull).
	r.end.pace.waiting = false
	r.maybeEndFailure(ctx)
}

// endTeam closes the team node's lane with the team's outcome and reports
// it to the parent, which stops the team.
func (r *runActor) endTeam(ctx actor.Context) {
	t := r.team
	r.ended.Store(true)
	if t.stopped {
		return // the parent closes the lane (node_cancelled)
	}
	done := &messages.AgentDone{AgentID: t.node.ID, Usage: r.usage, Attempts: t.shared.attempts}
	switch p := r.terminal.(type) {
	case *messages.RunFinishedPayload:
		out, compacted := compact.Compact(p.Answer, compact.DefaultLimit)
		if !t.synthesized { // published before a restart already
			if compacted {
				r.emit(ctx, &messages.NodeCompactingPayload{NodeID: t.node.ID})
			}
			r.emit(ctx, &messages.TeamSynthesizedPayload{TeamID: t.node.ID, CompactedOutput: out, Compacted: compacted})
		}
		for _, n := range r.g.Plan.Nodes { // the nested nodes' sources, in plan order
			for _, c := range r.node(n.ID).Cites {
				r.cites, _, _ = r.cites.Add(c.URL, c.Title, c.FirstSeenBy, c.AccessedVia, c.FirstSeenAt)
			}
		}
		done.Output, done.Citations = out, r.cites.ToHandoff()
		done.Closing = &messages.NodeCompletedPayload{NodeID: t.node.ID, Output: out, Attempts: done.Attempts, Usage: r.usage, Citations: done.Citations}
	case *messages.RunErrorPayload:
		done.Closing = &messages.NodeFailedPayload{NodeID: t.node.ID, Error: p.Message, Attempts: done.Attempts}
		done.Err, done.Code = errors.New(p.Message), p.Code
	}
	if done.Closing != nil {
		r.emit(ctx, done.Closing) // on the team node's lane: the parent's graph's event (the parent applies it)
	}
	t.shared.done.Store(done)
	ctx.Request(ctx.Parent(), done)
}

// localID is a node's id within its own graph ("T/X" → "X").
func localID(id string) string { return id[strings.LastIndexByte(id, '/')+1:] }
