package actors

import (
	"fmt"
	"slices"
	"strings"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/conclave-ai/conclave/actors/dag"
	"github.com/conclave-ai/conclave/messages"
)

// Wave boundaries. Between the end of one wave and the start of the next
// (and before wave 0), a supervisor changes its graph, in this order:
//
//  1. (run only) the sources the finished wave's nodes cited are numbered,
//     in node-id order: citation_added;
//  2. the sub-teams its workers asked for (spawn_subteam), in node-id
//     order, each after a spawn_approval interrupt under hitl node and
//     above: subteam_spawned, and the team node joins the plan;
//  3. (run only) steering: every note translated by then, in arrival
//     order, applied atomically or rejected: steering_applied or
//     steering_rejected. A note still being translated holds the boundary
//     until its translation ends.
//
// Then the next wave starts with the new plan's waves.

// spawnAsk is a worker's sub-team request, waiting for its wave's end.
type spawnAsk struct {
	parent   string
	req      messages.SpawnRequest
	decided  bool // the spawn gate answered
	approved bool
}

// boundary starts the boundary before wave next.
func (w *graphRunner) boundary(ctx actor.Context, next int) {
	r := w.r
	w.atBoundary, w.nextWave = true, next
	if r.team == nil && next > 0 {
		r.numberCitations(ctx, r.g.Waves[next-1])
	}
	slices.SortFunc(w.spawns, func(a, b spawnAsk) int { return strings.Compare(a.parent, b.parent) })
	w.continueBoundary(ctx)
}

// continueBoundary does what is left of the boundary; it returns early
// while the supervisor waits for a human (spawn gate) or a translation.
func (w *graphRunner) continueBoundary(ctx actor.Context) {
	r := w.r
	if !w.atBoundary || r.failCode != "" || r.terminal != nil || r.parked != nil {
		return
	}
	for len(w.spawns) > 0 {
		s := &w.spawns[0]
		if !s.decided && r.spec.hitl.Includes(messages.HITLNode) && (r.team == nil || r.team.depth < dag.MaxTeamDepth) {
			w.spawnGate(ctx, s)
			return
		}
		ask := *s
		w.spawns = w.spawns[1:]
		switch {
		case r.team != nil && r.team.depth >= dag.MaxTeamDepth:
			// Sub-teams nest one level deeper; no deeper than plans may.
			r.emit(ctx, messages.NewWarning(messages.WarnSpawnRejected,
				fmt.Sprintf("sub-team of %s not spawned: teams nest at most %d deep", ask.parent, dag.MaxTeamDepth)))
		case ask.approved || !ask.decided:
			w.applySpawn(ctx, ask)
		}
	}
	if r.steering.queue.translating() {
		return // the translation's report continues the boundary
	}
	r.steering.applySteering(ctx)
	w.atBoundary = false
	w.startWave(ctx, w.nextWave)
}

// spawnGate asks a human whether a worker's sub-team may run.
func (w *graphRunner) spawnGate(ctx actor.Context, s *spawnAsk) {
	r := w.r
	r.target().raiseInterrupt(ctx, &messages.InterruptRaisedPayload{Kind: messages.InterruptSpawnApproval, NodeID: s.parent,
		Goal: s.req.Goal, SuggestedRoles: slices.Clone(s.req.Roles), Evidence: w.spawnEvidence(r.e.cfg.NewID().String(), s)},
		func(res *messages.Resolution) { w.spawnDecided(ctx, s, res) })
}

// spawnDecided applies a spawn gate's outcome.
func (w *graphRunner) spawnDecided(ctx actor.Context, s *spawnAsk, res *messages.Resolution) {
	if res.Cancelled {
		return
	}
	s.decided, s.approved = true, res.Decision == messages.DecisionApprove
	w.continueBoundary(ctx)
}

// applySpawn adds a worker's sub-team to the graph as a team node that
// depends on the worker; the worker's dependents also depend on it, so
// they see the sub-team's output next to the worker's.
func (w *graphRunner) applySpawn(ctx actor.Context, s spawnAsk) {
	r := w.r
	id := s.parent + ".team"
	for k := 2; r.g.Has(id); k++ {
		id = fmt.Sprintf("%s.team%d", s.parent, k)
	}
	roles := s.req.Roles
	if len(roles) == 0 {
		roles = []string{"researcher", "critic"}
	}
	team := messages.Plan{Nodes: make([]messages.PlanNode, len(roles))}
	for i, role := range roles {
		team.Nodes[i] = messages.PlanNode{ID: fmt.Sprintf("r%d", i+1), Goal: role + ": " + s.req.Goal, Role: role}
	}
	plan := r.g.Plan.Clone()
	for i := range plan.Nodes {
		n := &plan.Nodes[i]
		if !r.g.Fixed(n.ID) && slices.Contains(n.Deps, s.parent) {
			n.Deps = append(n.Deps, id)
		}
	}
	plan.Nodes = append(plan.Nodes, messages.PlanNode{ID: id, Goal: s.req.Goal, Deps: []string{s.parent}, Kind: messages.KindTeam, Team: &team})
	r.emit(ctx, &messages.SubteamSpawnedPayload{ParentNodeID: s.parent, TeamID: id, Goal: s.req.Goal, Roles: roles,
		ChildGraphSummary: fmt.Sprintf("%d nodes: %s", len(roles), strings.Join(roles, ", ")), AppliedAtWave: w.nextWave,
		Plan: plan, Waves: dag.WavesFrom(plan, r.g.StartedWaves(), w.nextWave)})
}

// numberCitations gives the sources cited by a finished wave's nodes
// their run-wide numbers, in node-id order (deterministic whatever order
// the nodes finished in).
func (r *runActor) numberCitations(ctx actor.Context, wave []string) {
	for _, id := range wave {
		if !r.g.Has(id) {
			continue
		}
		for _, c := range r.node(id).Cites {
			var n int
			before := r.cites.Len()
			r.cites, n, _ = r.cites.Add(c.URL, c.Title, c.FirstSeenBy, c.AccessedVia, c.FirstSeenAt)
			if r.cites.Len() > before {
				list := r.cites.List()
				r.emit(ctx, &messages.CitationAddedPayload{Citation: list[n-1]})
			}
		}
	}
}

// synthesisInput is what a synthesiser reads of a completed node: its
// output, and the numbers of the sources it cited.
func (r *runActor) synthesisInput(id string) string {
	n := r.node(id)
	var refs strings.Builder
	for _, c := range n.Cites {
		refs.WriteString(r.cites.RenderInline(c.URL))
	}
	if refs.Len() == 0 {
		return fmt.Sprintf("[%s] %s", id, n.Output)
	}
	return fmt.Sprintf("[%s] %s (sources %s)", id, n.Output, refs.String())
}
