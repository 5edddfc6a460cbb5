// Package dag validates council plans and computes their waves.
package dag

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/conclave-ai/conclave/messages"
)

// Limits on a plan.
const (
	// MaxNodes bounds the top-level plan and the node count over all its
	// levels (teams included).
	MaxNodes   = messages.MaxNodes
	MaxIDLen   = 128
	MaxGoalLen = 16 << 10
	// MaxTeamSize bounds the nodes of every plan below the top level.
	MaxTeamSize = messages.MaxTeamSize
	// MaxTeamDepth bounds team nesting: a team node of the top-level plan
	// is at depth 1, a team node inside its Team at depth 2, and so on.
	MaxTeamDepth = 3
)

// ErrInvalidPlan wraps every validation failure.
var ErrInvalidPlan = errors.New("dag: invalid plan")

// Validate checks a plan before anything runs. Each level (the top-level
// plan and every team's nested plan) has at least one node and no more than
// MaxNodes (top level) or MaxTeamSize (teams), non-empty unique ids without
// '/', known dependencies within the level, no self or duplicate
// dependency, and no cycle. Each node has a known kind; a team node has a
// Team (nested at most MaxTeamDepth deep), a debate node a valid Debate,
// and no node has the other kind's settings. The plan holds at most
// MaxNodes nodes over all levels. All problems are reported together;
// those inside a team name its path (`team "t1/t2": ...`).
func Validate(p messages.Plan) error {
	var v validator
	v.level(p, "", 1)
	if v.total > MaxNodes && len(p.Nodes) <= MaxNodes {
		v.errs = append(v.errs, fmt.Errorf("plan has %d nodes over all its teams, more than %d", v.total, MaxNodes))
	}
	if len(v.errs) > 0 {
		return fmt.Errorf("%w: %w", ErrInvalidPlan, errors.Join(v.errs...))
	}
	return nil
}

// validator collects Validate's problems over the levels of a plan.
type validator struct {
	errs  []error
	total int // nodes seen over all levels
}

// level checks one level of a plan: the top-level plan (path "") or the
// Team of the team node at path. depth is the depth its team nodes have.
func (v *validator) level(p messages.Plan, path string, depth int) {
	bad := func(format string, args ...any) {
		err := fmt.Errorf(format, args...)
		if path != "" {
			err = fmt.Errorf("team %q: %w", path, err)
		}
		v.errs = append(v.errs, err)
	}
	before := len(v.errs)
	v.total += len(p.Nodes)
	limit := MaxNodes
	if path != "" {
		limit = MaxTeamSize
	}
	if len(p.Nodes) == 0 {
		bad("plan has no nodes")
	}
	if len(p.Nodes) > limit {
		bad("plan has %d nodes, more than %d", len(p.Nodes), limit)
	}
	ids := make(map[string]bool, len(p.Nodes))
	for i := range p.Nodes {
		n := &p.Nodes[i]
		switch {
		case n.ID == "":
			bad("node with an empty id")
		case len(n.ID) > MaxIDLen:
			bad("node id %.32q… is longer than %d bytes", n.ID, MaxIDLen)
		case strings.Contains(n.ID, "/"):
			bad("node id %q contains '/'", n.ID)
		case ids[n.ID]:
			bad("duplicate node id %q", n.ID)
		}
		if len(n.Goal) > MaxGoalLen {
			bad("node %q: goal longer than %d bytes", n.ID, MaxGoalLen)
		}
		ids[n.ID] = true
		checkKind(n, bad)
	}
	for _, n := range p.Nodes {
		seen := make(map[string]bool, len(n.Deps))
		for _, d := range n.Deps {
			switch {
			case d == n.ID:
				bad("node %q depends on itself", n.ID)
			case !ids[d]:
				bad("node %q depends on unknown node %q", n.ID, d)
			case seen[d]:
				bad("node %q lists dependency %q twice", n.ID, d)
			}
			seen[d] = true
		}
	}
	if len(v.errs) == before {
		if cyc := findCycle(p); cyc != nil {
			bad("dependency cycle %v", cyc)
		}
	}
	for _, n := range p.Nodes {
		if !n.IsTeam() || n.Team == nil {
			continue
		}
		if depth > MaxTeamDepth {
			bad("team node %q is nested %d deep, more than %d", n.ID, depth, MaxTeamDepth)
			continue
		}
		v.level(*n.Team, joinPath(path, n.ID), depth+1)
	}
}

// joinPath names node id of the team at path the way the runtime does.
func joinPath(path, id string) string {
	if path == "" {
		return id
	}
	return path + "/" + id
}

// checkKind checks a node's kind and the settings that go with it.
func checkKind(n *messages.PlanNode, bad func(format string, args ...any)) {
	switch n.Kind {
	case "", messages.KindLeaf:
	case messages.KindTeam:
		if n.Team == nil {
			bad("team node %q has no team plan", n.ID)
		}
	case messages.KindDebate:
		if n.Debate == nil {
			bad("debate node %q has no debate settings", n.ID)
		} else {
			checkDebate(n.ID, n.Debate, bad)
		}
	default:
		bad("node %q has unknown kind %.32q", n.ID, n.Kind)
	}
	if n.Team != nil && !n.IsTeam() {
		bad("node %q is not a team node but has a team plan", n.ID)
	}
	if n.Debate != nil && !n.IsDebate() {
		bad("node %q is not a debate node but has debate settings", n.ID)
	}
}

// checkDebate checks the settings of debate node id.
func checkDebate(id string, d *messages.DebateConfig, bad func(format string, args ...any)) {
	if len(d.Agents) < 2 || len(d.Agents) > messages.MaxDebateAgents {
		bad("debate node %q has %d agents, want 2..%d", id, len(d.Agents), messages.MaxDebateAgents)
	}
	seen := make(map[string]bool, len(d.Agents))
	for _, a := range d.Agents {
		switch {
		case a.ID == "":
			bad("debate node %q: agent with an empty id", id)
		case len(a.ID) > MaxIDLen:
			bad("debate node %q: agent id %.32q… is longer than %d bytes", id, a.ID, MaxIDLen)
		case strings.Contains(a.ID, "/"):
			bad("debate node %q: agent id %q contains '/'", id, a.ID)
		case seen[a.ID]:
			bad("debate node %q: duplicate agent id %q", id, a.ID)
		}
		seen[a.ID] = true
		if len(a.Persona) > MaxGoalLen {
			bad("debate node %q: agent %q: persona longer than %d bytes", id, a.ID, MaxGoalLen)
		}
		if len(a.Name) > MaxIDLen {
			bad("debate node %q: agent %q: name longer than %d bytes", id, a.ID, MaxIDLen)
		}
		if a.Color != "" && !isHexColor(a.Color) {
			bad("debate node %q: agent %q: color %.16q is not #rrggbb", id, a.ID, a.Color)
		}
		if c := a.Contentiousness; c != nil && (*c < 0 || *c > 1) {
			bad("debate node %q: agent %q: contentiousness %v not in 0..1", id, a.ID, *c)
		}
	}
	if d.Rounds < 1 || d.Rounds > messages.MaxDebateRounds {
		bad("debate node %q: rounds %d not in 1..%d", id, d.Rounds, messages.MaxDebateRounds)
	}
	if d.MinRounds < 0 || d.MinRounds > d.Rounds {
		bad("debate node %q: min_rounds %d not in 0..%d (rounds)", id, d.MinRounds, d.Rounds)
	}
	if d.CompactAfter < 0 || d.CompactAfter > messages.MaxDebateRounds {
		bad("debate node %q: compact_after %d not in 0..%d", id, d.CompactAfter, messages.MaxDebateRounds)
	}
}

// isHexColor reports whether s is "#rrggbb".
func isHexColor(s string) bool {
	if len(s) != 7 || s[0] != '#' {
		return false
	}
	for _, c := range s[1:] {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
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
// within a wave are sorted, so the schedule is deterministic. It is
// WavesFrom(p, nil, 0).
func Waves(p messages.Plan) [][]string { return WavesFrom(p, nil, 0) }

// WavesFrom is the schedule of a valid plan that changes at the start of
// wave from (a steering diff applied at that boundary). fixed holds the
// nodes of the waves before from, which have run, with their wave; each
// keeps it (ids of fixed that are not in p, and negative waves, are
// ignored). Every other node gets wave max(from, 1 + the highest wave of
// its dependencies), so it runs at from or later, after its dependencies.
// Node ids within a wave are sorted.
//
// Waves before from are returned as they are, empty or not. From from on,
// an empty wave between two others would be a boundary with nothing to run,
// so if no node lands in some wave index >= from, the later waves shift
// down to keep the waves contiguous; nothing moves below from. (With fixed
// holding only waves below from, as intended, no such gap can arise.)
func WavesFrom(p messages.Plan, fixed map[string]int, from int) [][]string {
	from = max(from, 0)
	deps := make(map[string][]string, len(p.Nodes))
	for _, n := range p.Nodes {
		deps[n.ID] = n.Deps
	}
	level := make(map[string]int, len(p.Nodes))
	for id, l := range fixed {
		if _, ok := deps[id]; ok && l >= 0 {
			level[id] = l
		}
	}
	var visit func(id string) int
	visit = func(id string) int {
		if l, ok := level[id]; ok {
			return l
		}
		l := from
		for _, d := range deps[id] {
			if _, ok := deps[d]; ok {
				l = max(l, visit(d)+1)
			}
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
	// Drop empty waves from from on; the relative order of the others, and
	// so every dependency's, is kept.
	out := waves[:min(from, len(waves))]
	for _, w := range waves[len(out):] {
		if len(w) > 0 {
			out = append(out, w)
		}
	}
	for _, w := range out {
		slices.Sort(w)
	}
	return out
}

// Qualify returns a deep copy of p in which every top-level node id and
// dependency is prefix+"/"+id: the run-wide names of the nodes of the team
// named prefix. Nested Team plans are copied unchanged; they are qualified
// when their own team runs.
func Qualify(prefix string, p messages.Plan) messages.Plan {
	q := p.Clone()
	for i := range q.Nodes {
		n := &q.Nodes[i]
		n.ID = prefix + "/" + n.ID
		for j, d := range n.Deps {
			n.Deps[j] = prefix + "/" + d
		}
	}
	return q
}

// CountAgents returns the number of model-driven agents a valid plan will
// run, for a cost estimate: a leaf is 1; a team is 1 (its synthesis) plus
// its Team's count; a debate is agents × rounds, plus rounds if it has a
// judge, plus 1 (its synthesis). A debate the judge ends early runs fewer.
func CountAgents(p messages.Plan) int {
	count := 0
	for _, n := range p.Nodes {
		switch {
		case n.IsTeam() && n.Team != nil:
			count += 1 + CountAgents(*n.Team)
		case n.IsDebate() && n.Debate != nil:
			d := n.Debate
			count += len(d.Agents)*d.Rounds + 1
			if d.Judge {
				count += d.Rounds
			}
		default:
			count++
		}
	}
	return count
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
