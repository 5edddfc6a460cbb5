// Package dag validates council plans and computes their waves.
package dag

import (
	"errors"
	"fmt"
	"slices"

	"github.com/conclave-ai/conclave/messages"
)

// Limits on a plan.
const (
	MaxNodes   = messages.MaxNodes
	MaxIDLen   = 128
	MaxGoalLen = 16 << 10
)

// ErrInvalidPlan wraps every validation failure.
var ErrInvalidPlan = errors.New("dag: invalid plan")

// Validate checks a plan before anything runs: at least one node, no more
// than MaxNodes, non-empty unique ids, known dependencies, no self or
// duplicate dependency, and no cycle. All problems are reported together.
func Validate(p messages.Plan) error {
	var errs []error
	if len(p.Nodes) == 0 {
		errs = append(errs, errors.New("plan has no nodes"))
	}
	if len(p.Nodes) > MaxNodes {
		errs = append(errs, fmt.Errorf("plan has %d nodes, more than %d", len(p.Nodes), MaxNodes))
	}
	ids := make(map[string]bool, len(p.Nodes))
	for _, n := range p.Nodes {
		switch {
		case n.ID == "":
			errs = append(errs, errors.New("node with an empty id"))
		case len(n.ID) > MaxIDLen:
			errs = append(errs, fmt.Errorf("node id %.32q… is longer than %d bytes", n.ID, MaxIDLen))
		case ids[n.ID]:
			errs = append(errs, fmt.Errorf("duplicate node id %q", n.ID))
		}
		if len(n.Goal) > MaxGoalLen {
			errs = append(errs, fmt.Errorf("node %q: goal longer than %d bytes", n.ID, MaxGoalLen))
		}
		ids[n.ID] = true
	}
	for _, n := range p.Nodes {
		seen := make(map[string]bool, len(n.Deps))
		for _, d := range n.Deps {
			switch {
			case d == n.ID:
				errs = append(errs, fmt.Errorf("node %q depends on itself", n.ID))
			case !ids[d]:
				errs = append(errs, fmt.Errorf("node %q depends on unknown node %q", n.ID, d))
			case seen[d]:
				errs = append(errs, fmt.Errorf("node %q lists dependency %q twice", n.ID, d))
			}
			seen[d] = true
		}
	}
	if len(errs) == 0 {
		if cyc := findCycle(p); cyc != nil {
			errs = append(errs, fmt.Errorf("dependency cycle %v", cyc))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrInvalidPlan, errors.Join(errs...))
	}
	return nil
}

// findCycle returns the node ids of one cycle, or nil. Iterative DFS, so a
// long chain cannot overflow the stack.
func findCycle(p messages.Plan) []string {
	deps := make(map[string][]string, len(p.Nodes))
	for _, n := range p.Nodes {
		deps[n.ID] = n.Deps
	}
	const (
		unseen = iota
		active
		done
	)
	state := make(map[string]int, len(p.Nodes))
	type frame struct {
		id string
		i  int
	}
	for _, root := range p.Nodes {
		if state[root.ID] != unseen {
			continue
		}
		stack := []frame{{id: root.ID}}
		state[root.ID] = active
		for len(stack) > 0 {
			top := &stack[len(stack)-1]
			if top.i == len(deps[top.id]) {
				state[top.id] = done
				stack = stack[:len(stack)-1]
				continue
			}
			next := deps[top.id][top.i]
			top.i++
			switch state[next] {
			case active:
				var cyc []string
				for j := len(stack) - 1; j >= 0; j-- {
					cyc = append(cyc, stack[j].id)
					if stack[j].id == next {
						break
					}
				}
				slices.Reverse(cyc)
				return cyc
			case unseen:
				state[next] = active
				stack = append(stack, frame{id: next})
			}
		}
	}
	return nil
}

// Waves groups a valid plan's nodes by level: a node's wave is one more than
// the highest wave of its dependencies (0 without dependencies). Node ids
// within a wave are sorted, so the schedule is deterministic.
func Waves(p messages.Plan) [][]string {
	byID := make(map[string]*messages.PlanNode, len(p.Nodes))
	for i := range p.Nodes {
		byID[p.Nodes[i].ID] = &p.Nodes[i]
	}
	level := make(map[string]int, len(p.Nodes))
	var visit func(id string) int
	visit = func(id string) int {
		if l, ok := level[id]; ok {
			return l
		}
		l := 0
		for _, d := range byID[id].Deps {
			l = max(l, visit(d)+1)
		}
		level[id] = l
		return l
	}
	var waves [][]string
	for _, n := range p.Nodes {
		l := visit(n.ID)
		for len(waves) <= l {
			waves = append(waves, nil)
		}
		waves[l] = append(waves[l], n.ID)
	}
	for _, w := range waves {
		slices.Sort(w)
	}
	return waves
}

// Downstream returns every node that depends, directly or transitively, on id.
func Downstream(p messages.Plan, id string) map[string]bool {
	dependents := make(map[string][]string, len(p.Nodes))
	for _, n := range p.Nodes {
		for _, d := range n.Deps {
			dependents[d] = append(dependents[d], n.ID)
		}
	}
	out := make(map[string]bool)
	queue := []string{id}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		for _, c := range dependents[cur] {
			if !out[c] {
				out[c] = true
				queue = append(queue, c)
			}
		}
	}
	return out
}
