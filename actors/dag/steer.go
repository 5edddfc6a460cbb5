package dag

import (
	"errors"
	"fmt"
	"slices"

	"github.com/conclave-ai/conclave/messages"
)

// ErrInvalidDiff wraps every Apply failure.
var ErrInvalidDiff = errors.New("dag: invalid graph diff")

// Apply applies the operations of d in order to a copy of p, atomically: it
// returns the changed plan, or the zero Plan and an error wrapping
// ErrInvalidDiff (and ErrInvalidPlan when the result is not a valid plan);
// p is never modified and the result shares no memory with p or d.
//
// d must pass d.Validate (so it has at least one operation and no field
// that does not belong to its operation). Operations name top-level nodes
// of p only. A frozen node (started or finished; frozen may be nil for
// none) keeps its place, settings and dependencies: it cannot be removed,
// split, given a role or tools, wrapped in a team, be the To of a reroute,
// or be a dependent whose dependencies a removal, split or wrap would
// change. It may be the From or NewFrom of a reroute and a dependency of
// new nodes. See messages.DiffOpKind for what each operation does; the
// details Apply settles:
//
//   - remove_node: each dependent's dependency on the node is replaced, in
//     place, by the node's own dependencies (deduplicated, first one kept).
//   - split_node: the Into nodes take the split node's place; each gets the
//     split node's dependencies appended to its own (deduplicated); each
//     dependent's dependency on it is replaced by all Into ids.
//   - reroute_edge: To must depend on From and not already on NewFrom.
//   - wrap_in_team: the team node takes the place of the first wrapped node
//     (in plan order) and its Team holds the wrapped nodes in plan order;
//     the team's dependencies are the wrapped nodes' outside dependencies in
//     order of first appearance (plan order), deduplicated.
//
// The result must pass Validate.
func Apply(p messages.Plan, d messages.GraphDiff, frozen func(id string) bool) (messages.Plan, error) {
	if frozen == nil {
		frozen = func(string) bool { return false }
	}
	if err := d.Validate(); err != nil {
		return messages.Plan{}, fmt.Errorf("%w: %w", ErrInvalidDiff, err)
	}
	a := applier{nodes: p.Clone().Nodes, frozen: frozen}
	for i := range d.Ops {
		if err := a.apply(&d.Ops[i]); err != nil {
			return messages.Plan{}, fmt.Errorf("%w: ops[%d] (%s): %w", ErrInvalidDiff, i, d.Ops[i].Op, err)
		}
	}
	out := messages.Plan{Nodes: a.nodes}
	if err := Validate(out); err != nil {
		return messages.Plan{}, fmt.Errorf("%w: the result is not a valid plan: %w", ErrInvalidDiff, err)
	}
	return out, nil
}

// applier holds the plan Apply is changing: its own copy, so operations
// change it in place.
type applier struct {
	nodes  []messages.PlanNode
	frozen func(id string) bool
}

// apply applies one operation.
func (a *applier) apply(op *messages.DiffOp) error {
	switch op.Op {
	case messages.OpAddNode:
		if a.find(op.Node.ID) >= 0 {
			return fmt.Errorf("node %q already exists", op.Node.ID)
		}
		a.nodes = append(a.nodes, op.Node.Clone())
		return nil
	case messages.OpRemoveNode:
		return a.remove(op.NodeID)
	case messages.OpSplitNode:
		return a.split(op.NodeID, op.Into)
	case messages.OpRerouteEdge:
		i, err := a.mutable(op.To)
		if err != nil {
			return err
		}
		n := &a.nodes[i]
		k := slices.Index(n.Deps, op.From)
		if k < 0 {
			return fmt.Errorf("node %q does not depend on %q", op.To, op.From)
		}
		if slices.Contains(n.Deps, op.NewFrom) {
			return fmt.Errorf("node %q already depends on %q", op.To, op.NewFrom)
		}
		n.Deps[k] = op.NewFrom // n.Deps is a's own copy
		return nil
	case messages.OpSetRole:
		i, err := a.mutable(op.NodeID)
		if err != nil {
			return err
		}
		a.nodes[i].Role = op.Role
		return nil
	case messages.OpSetTools:
		i, err := a.mutable(op.NodeID)
		if err != nil {
			return err
		}
		a.nodes[i].Tools = nil
		if len(op.Tools) > 0 {
			a.nodes[i].Tools = slices.Clone(op.Tools)
		}
		return nil
	case messages.OpWrapInTeam:
		return a.wrap(op)
	}
	return fmt.Errorf("unknown operation %q", op.Op) // unreachable after Validate
}

// find returns the index of node id, or -1. Linear: a diff has at most
// MaxDiffOps operations.
func (a *applier) find(id string) int {
	return slices.IndexFunc(a.nodes, func(n messages.PlanNode) bool { return n.ID == id })
}

// mutable returns the index of node id, or an error if there is no such
// node or it is frozen.
func (a *applier) mutable(id string) (int, error) {
	i := a.find(id)
	if i < 0 {
		return -1, fmt.Errorf("unknown node %q", id)
	}
	if a.frozen(id) {
		return -1, fmt.Errorf("node %q has started and cannot be changed", id)
	}
	return i, nil
}

// redirect replaces every dependency on one of the nodes in old by with
// (in place, deduplicated) in the nodes other than skip. A frozen node whose
// dependencies this would change is an error.
func (a *applier) redirect(old map[string]bool, with []string, skip map[string]bool) error {
	for i := range a.nodes {
		n := &a.nodes[i]
		if skip[n.ID] || !slices.ContainsFunc(n.Deps, func(d string) bool { return old[d] }) {
			continue
		}
		if a.frozen(n.ID) {
			return fmt.Errorf("node %q has started and its dependencies cannot change", n.ID)
		}
		var deps []string
		for _, d := range n.Deps {
			if old[d] {
				deps = append(deps, with...)
			} else {
				deps = append(deps, d)
			}
		}
		n.Deps = dedup(deps)
	}
	return nil
}

// remove applies remove_node.
func (a *applier) remove(id string) error {
	i, err := a.mutable(id)
	if err != nil {
		return err
	}
	if len(a.nodes) == 1 {
		return fmt.Errorf("node %q is the plan's last node", id)
	}
	gone := a.nodes[i]
	a.nodes = slices.Delete(a.nodes, i, i+1)
	return a.redirect(map[string]bool{id: true}, gone.Deps, nil)
}

// split applies split_node.
func (a *applier) split(id string, into []messages.PlanNode) error {
	i, err := a.mutable(id)
	if err != nil {
		return err
	}
	if len(into) < 2 {
		return fmt.Errorf("node %q must be split into at least 2 nodes", id)
	}
	old := a.nodes[i]
	parts := make([]messages.PlanNode, len(into))
	ids := make([]string, len(into))
	skip := make(map[string]bool, len(into))
	for k, n := range into {
		n = n.Clone()
		n.Deps = dedup(append(n.Deps, old.Deps...))
		parts[k], ids[k], skip[n.ID] = n, n.ID, true
	}
	a.nodes = slices.Replace(a.nodes, i, i+1, parts...)
	// An Into node that names the split node is left for Validate to
	// report; it is not one of the split node's dependents.
	return a.redirect(map[string]bool{id: true}, ids, skip)
}

// wrap applies wrap_in_team.
func (a *applier) wrap(op *messages.DiffOp) error {
	wrapped := make(map[string]bool, len(op.NodeIDs))
	for _, id := range op.NodeIDs {
		if _, err := a.mutable(id); err != nil {
			return err
		}
		wrapped[id] = true // distinct, by Validate
	}
	if i := a.find(op.TeamID); i >= 0 && !wrapped[op.TeamID] {
		return fmt.Errorf("team id %q is already a node", op.TeamID)
	}
	team := messages.PlanNode{ID: op.TeamID, Goal: op.Goal, Kind: messages.KindTeam, Team: &messages.Plan{}}
	var rest []messages.PlanNode
	at := -1
	for _, n := range a.nodes {
		if !wrapped[n.ID] {
			rest = append(rest, n)
			continue
		}
		if at < 0 {
			at = len(rest)
		}
		var inside []string
		for _, d := range n.Deps {
			if wrapped[d] {
				inside = append(inside, d)
			} else {
				team.Deps = append(team.Deps, d)
			}
		}
		n.Deps = inside
		team.Team.Nodes = append(team.Team.Nodes, n)
	}
	team.Deps = dedup(team.Deps)
	a.nodes = slices.Insert(rest, at, team)
	return a.redirect(wrapped, []string{op.TeamID}, map[string]bool{op.TeamID: true})
}

// dedup returns deps without repeats, first occurrence kept, in a new
// slice; nil when empty.
func dedup(deps []string) []string {
	var out []string
	seen := make(map[string]bool, len(deps))
	for _, d := range deps {
		if !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	return out
}
