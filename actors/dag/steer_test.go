package dag_test

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/conclave-ai/conclave/actors/dag"
	"github.com/conclave-ai/conclave/messages"
)

// Diff operation builders.

func addNode(nd messages.PlanNode) messages.DiffOp {
	return messages.DiffOp{Op: messages.OpAddNode, Node: &nd}
}

func removeNode(id string) messages.DiffOp {
	return messages.DiffOp{Op: messages.OpRemoveNode, NodeID: id}
}

func splitNode(id string, into ...messages.PlanNode) messages.DiffOp {
	return messages.DiffOp{Op: messages.OpSplitNode, NodeID: id, Into: into}
}

func reroute(from, to, newFrom string) messages.DiffOp {
	return messages.DiffOp{Op: messages.OpRerouteEdge, From: from, To: to, NewFrom: newFrom}
}

func setRole(id, role string) messages.DiffOp {
	return messages.DiffOp{Op: messages.OpSetRole, NodeID: id, Role: role}
}

func setTools(id string, tools ...string) messages.DiffOp {
	return messages.DiffOp{Op: messages.OpSetTools, NodeID: id, Tools: tools}
}

func wrap(teamID, goal string, ids ...string) messages.DiffOp {
	return messages.DiffOp{Op: messages.OpWrapInTeam, TeamID: teamID, Goal: goal, NodeIDs: ids}
}

// frozenSet is a frozen func for Apply.
func frozenSet(ids ...string) func(string) bool {
	return func(id string) bool { return slices.Contains(ids, id) }
}

func TestApply(t *testing.T) {
	t.Parallel()
	abc := plan(n("a"), n("b", "a"), n("c", "b"))
	tests := []struct {
		name   string
		plan   messages.Plan
		ops    []messages.DiffOp
		frozen []string
		want   messages.Plan // when err is ""
		err    string        // substring of the error
	}{
		// add_node
		{name: "add on frozen dep", plan: abc, frozen: []string{"a"},
			ops:  []messages.DiffOp{addNode(n("d", "a"))},
			want: plan(n("a"), n("b", "a"), n("c", "b"), n("d", "a"))},
		{name: "add team", plan: abc,
			ops:  []messages.DiffOp{addNode(team("t", plan(n("a"), n("b", "a")), "c"))},
			want: plan(n("a"), n("b", "a"), n("c", "b"), team("t", plan(n("a"), n("b", "a")), "c"))},
		{name: "add dep on later add", plan: abc,
			ops:  []messages.DiffOp{addNode(n("d", "e")), addNode(n("e"))},
			want: plan(n("a"), n("b", "a"), n("c", "b"), n("d", "e"), n("e"))},
		{name: "add existing", plan: abc, ops: []messages.DiffOp{addNode(n("b"))}, err: `node "b" already exists`},
		{name: "add unknown dep", plan: abc, ops: []messages.DiffOp{addNode(n("d", "zz"))}, err: `node "d" depends on unknown node "zz"`},
		{name: "add invalid debate", plan: abc, ops: []messages.DiffOp{addNode(debate("d", 1, 1))}, err: `has 1 agents`},
		{name: "add without id", plan: abc, ops: []messages.DiffOp{addNode(n(""))}, err: "node has an empty id"},
		// remove_node
		{name: "remove middle", plan: abc, ops: []messages.DiffOp{removeNode("b")},
			want: plan(n("a"), n("c", "a"))},
		{name: "remove inherits deduplicated in place", plan: plan(n("a"), n("b"), n("z"), n("x", "a", "b"), n("c", "z", "x", "b")),
			ops:  []messages.DiffOp{removeNode("x")},
			want: plan(n("a"), n("b"), n("z"), n("c", "z", "a", "b"))},
		{name: "remove root", plan: abc, ops: []messages.DiffOp{removeNode("a")},
			want: plan(n("b"), n("c", "b"))},
		{name: "remove frozen", plan: abc, frozen: []string{"a"}, ops: []messages.DiffOp{removeNode("a")}, err: `node "a" has started`},
		{name: "remove under frozen dependent", plan: abc, frozen: []string{"c"}, ops: []messages.DiffOp{removeNode("b")},
			err: `node "c" has started and its dependencies cannot change`},
		{name: "remove last", plan: plan(n("a")), ops: []messages.DiffOp{removeNode("a")}, err: "last node"},
		{name: "remove unknown", plan: abc, ops: []messages.DiffOp{removeNode("zz")}, err: `unknown node "zz"`},
		{name: "remove twice", plan: abc, ops: []messages.DiffOp{removeNode("c"), removeNode("c")}, err: `ops[1] (remove_node): unknown node "c"`},
		// split_node
		{name: "split", plan: abc, frozen: []string{"a"},
			ops:  []messages.DiffOp{splitNode("b", n("b1"), n("b2", "b1", "a"))},
			want: plan(n("a"), n("b1", "a"), n("b2", "b1", "a"), n("c", "b1", "b2"))},
		{name: "split keeps id", plan: abc,
			ops:  []messages.DiffOp{splitNode("b", n("b"), n("b2", "b"))},
			want: plan(n("a"), n("b", "a"), n("b2", "b", "a"), n("c", "b", "b2"))},
		{name: "split into one", plan: abc, ops: []messages.DiffOp{splitNode("b", n("b1"))}, err: "into needs at least 2 nodes"},
		{name: "split frozen", plan: abc, frozen: []string{"b"}, ops: []messages.DiffOp{splitNode("b", n("b1"), n("b2"))}, err: `node "b" has started`},
		{name: "split under frozen dependent", plan: abc, frozen: []string{"c"},
			ops: []messages.DiffOp{splitNode("b", n("b1"), n("b2"))}, err: `node "c" has started`},
		{name: "split into existing id", plan: abc, ops: []messages.DiffOp{splitNode("b", n("c"), n("b2"))}, err: `duplicate node id "c"`},
		{name: "split into dependent cycle", plan: abc, ops: []messages.DiffOp{splitNode("b", n("b1", "c"), n("b2"))}, err: "cycle"},
		// reroute_edge
		{name: "reroute", plan: plan(n("a"), n("b"), n("c", "x", "a"), n("x")), frozen: []string{"a", "b"},
			ops:  []messages.DiffOp{reroute("a", "c", "b")},
			want: plan(n("a"), n("b"), n("c", "x", "b"), n("x"))},
		{name: "reroute to frozen", plan: abc, frozen: []string{"c"}, ops: []messages.DiffOp{reroute("b", "c", "a")}, err: `node "c" has started`},
		{name: "reroute missing edge", plan: abc, ops: []messages.DiffOp{reroute("a", "c", "b")}, err: `node "c" does not depend on "a"`},
		{name: "reroute onto existing dep", plan: plan(n("a"), n("b"), n("c", "a", "b")), ops: []messages.DiffOp{reroute("a", "c", "b")},
			err: `node "c" already depends on "b"`},
		{name: "reroute onto itself", plan: abc, ops: []messages.DiffOp{reroute("b", "c", "b")}, err: `already depends on "b"`},
		{name: "reroute unknown new_from", plan: abc, ops: []messages.DiffOp{reroute("b", "c", "zz")}, err: `depends on unknown node "zz"`},
		{name: "reroute cycle", plan: abc, ops: []messages.DiffOp{reroute("a", "b", "c")}, err: "cycle"},
		// set_role, set_tools
		{name: "set role", plan: abc, frozen: []string{"a"}, ops: []messages.DiffOp{setRole("b", "critic")},
			want: plan(n("a"), withRole(n("b", "a"), "critic"), n("c", "b"))},
		{name: "set role frozen", plan: abc, frozen: []string{"b"}, ops: []messages.DiffOp{setRole("b", "critic")}, err: `node "b" has started`},
		{name: "set role unknown", plan: abc, ops: []messages.DiffOp{setRole("zz", "critic")}, err: `unknown node "zz"`},
		{name: "set tools", plan: abc, ops: []messages.DiffOp{setTools("c", "search", "fetch")},
			want: plan(n("a"), n("b", "a"), withTools(n("c", "b"), "search", "fetch"))},
		{name: "clear tools", plan: plan(withTools(n("a"), "search")), ops: []messages.DiffOp{setTools("a")},
			want: plan(n("a"))},
		{name: "set tools frozen", plan: abc, frozen: []string{"c"}, ops: []messages.DiffOp{setTools("c", "x")}, err: `node "c" has started`},
		// wrap_in_team
		{name: "wrap", plan: plan(n("a"), n("b", "a"), n("c", "b"), n("d", "c", "a")), frozen: []string{"a"},
			ops:  []messages.DiffOp{wrap("t", "G", "c", "b")},
			want: plan(n("a"), withGoal(team("t", plan(n("b"), n("c", "b")), "a"), "G"), n("d", "t", "a"))},
		{name: "wrap dedups", plan: plan(n("a"), n("x"), n("b", "a", "x"), n("c", "x", "a"), n("d", "b", "c")),
			ops:  []messages.DiffOp{wrap("t", "G", "b", "c")},
			want: plan(n("a"), n("x"), withGoal(team("t", plan(n("b"), n("c")), "a", "x"), "G"), n("d", "t"))},
		{name: "wrap all under own id", plan: abc,
			ops:  []messages.DiffOp{wrap("a", "G", "a", "b", "c")},
			want: plan(withGoal(team("a", abc), "G"))},
		{name: "wrap frozen", plan: abc, frozen: []string{"b"}, ops: []messages.DiffOp{wrap("t", "G", "b")}, err: `node "b" has started`},
		{name: "wrap under frozen dependent", plan: abc, frozen: []string{"c"}, ops: []messages.DiffOp{wrap("t", "G", "b")}, err: `node "c" has started`},
		{name: "wrap unknown", plan: abc, ops: []messages.DiffOp{wrap("t", "G", "zz")}, err: `unknown node "zz"`},
		{name: "wrap team id taken", plan: abc, ops: []messages.DiffOp{wrap("c", "G", "a")}, err: `team id "c" is already a node`},
		{name: "wrap cycle", plan: abc, ops: []messages.DiffOp{wrap("t", "G", "a", "c")}, err: "cycle"},
		{name: "wrap without goal", plan: abc, ops: []messages.DiffOp{{Op: messages.OpWrapInTeam, TeamID: "t", NodeIDs: []string{"a"}}}, err: "goal is required"},
		{name: "wrap twice", plan: abc, ops: []messages.DiffOp{wrap("t", "G", "a", "b", "c"), wrap("u", "G", "t")},
			want: plan(withGoal(team("u", plan(withGoal(team("t", abc), "G"))), "G"))},
		{name: "wrap too deep", plan: plan(nest(3)), ops: []messages.DiffOp{wrap("t0", "G", "t1")}, err: `is nested 4 deep`},
		{name: "wrap too many", plan: chain(dag.MaxTeamSize + 1), ops: []messages.DiffOp{wrap("t", "G", chainIDs(dag.MaxTeamSize+1)...)},
			err: `team "t": plan has 17 nodes, more than 16`},
		// Diffs that are not well formed.
		{name: "no ops", plan: abc, err: "no operations"},
		{name: "foreign field", plan: abc, ops: []messages.DiffOp{{Op: messages.OpRemoveNode, NodeID: "c", Role: "x"}}, err: "role does not belong to remove_node"},
		{name: "unknown op", plan: abc, ops: []messages.DiffOp{{Op: "rename_node", NodeID: "c"}}, err: `unknown operation "rename_node"`},
		// Atomicity: a later failure undoes the earlier operations.
		{name: "all or nothing", plan: abc, ops: []messages.DiffOp{removeNode("c"), setRole("b", "x"), removeNode("zz")}, err: `ops[2]`},
		{name: "nil plan", plan: messages.Plan{}, ops: []messages.DiffOp{addNode(n("a"))}, want: plan(n("a"))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			before := tt.plan.Clone()
			var frozen func(string) bool
			if tt.frozen != nil {
				frozen = frozenSet(tt.frozen...)
			}
			got, err := dag.Apply(tt.plan, messages.GraphDiff{Ops: tt.ops}, frozen)
			if !reflect.DeepEqual(tt.plan, before) {
				t.Fatalf("Apply modified its input:\n got %+v\nwant %+v", tt.plan, before)
			}
			if tt.err != "" {
				if !errors.Is(err, dag.ErrInvalidDiff) || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("Apply error = %v, want ErrInvalidDiff containing %q", err, tt.err)
				}
				if !reflect.DeepEqual(got, messages.Plan{}) {
					t.Fatalf("Apply returned %+v with its error, want the zero Plan", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("Apply: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Apply =\n%s\nwant\n%s", show(got), show(tt.want))
			}
		})
	}
}

func TestApply_InvalidResultWrapsErrInvalidPlan(t *testing.T) {
	t.Parallel()
	_, err := dag.Apply(plan(n("a")), messages.GraphDiff{Ops: []messages.DiffOp{addNode(n("b", "zz"))}}, nil)
	if !errors.Is(err, dag.ErrInvalidDiff) || !errors.Is(err, dag.ErrInvalidPlan) {
		t.Fatalf("Apply error = %v, want both ErrInvalidDiff and ErrInvalidPlan", err)
	}
	_, err = dag.Apply(plan(n("a")), messages.GraphDiff{}, nil)
	if !errors.Is(err, dag.ErrInvalidDiff) || !errors.Is(err, messages.ErrInvalidGraphDiff) {
		t.Fatalf("Apply error = %v, want both ErrInvalidDiff and messages.ErrInvalidGraphDiff", err)
	}
}

func TestApply_SharesNothing(t *testing.T) {
	t.Parallel()
	p := plan(withTools(n("a"), "search"), team("t", plan(n("x")), "a"), dep(debate("d", 2, 1), "t"))
	add := withTools(n("e", "a"), "fetch")
	d := messages.GraphDiff{Ops: []messages.DiffOp{addNode(add), splitNode("d", n("d1"), n("d2"))}}
	pBefore, dBefore := p.Clone(), (plan(*d.Ops[0].Node, d.Ops[1].Into[0], d.Ops[1].Into[1])).Clone()
	got, err := dag.Apply(p, d, nil)
	if err != nil {
		t.Fatal(err)
	}
	scribble(&got)
	if !reflect.DeepEqual(p, pBefore) {
		t.Fatal("changing Apply's result changed its input plan")
	}
	if after := plan(*d.Ops[0].Node, d.Ops[1].Into[0], d.Ops[1].Into[1]); !reflect.DeepEqual(after, dBefore) {
		t.Fatal("changing Apply's result changed its diff")
	}
}

// scribble overwrites every id, dependency, tool and debate agent of p, at
// every level.
func scribble(p *messages.Plan) {
	for i := range p.Nodes {
		nd := &p.Nodes[i]
		nd.ID += "!"
		for j := range nd.Deps {
			nd.Deps[j] += "!"
		}
		for j := range nd.Tools {
			nd.Tools[j] += "!"
		}
		if nd.Team != nil {
			scribble(nd.Team)
		}
		if nd.Debate != nil {
			nd.Debate.Rounds++
			for j := range nd.Debate.Agents {
				nd.Debate.Agents[j].ID += "!"
			}
		}
	}
}

func withRole(nd messages.PlanNode, role string) messages.PlanNode { nd.Role = role; return nd }

func withGoal(nd messages.PlanNode, goal string) messages.PlanNode { nd.Goal = goal; return nd }

func withTools(nd messages.PlanNode, tools ...string) messages.PlanNode {
	nd.Tools = tools
	return nd
}

// chainIDs are the ids of chain(size).
func chainIDs(size int) []string {
	ids := make([]string, size)
	for i := range ids {
		ids[i] = "x" + itoa(i)
	}
	return ids
}

// show renders a plan one node a line, for failure messages.
func show(p messages.Plan) string {
	var b strings.Builder
	var walk func(p messages.Plan, indent string)
	walk = func(p messages.Plan, indent string) {
		for _, nd := range p.Nodes {
			b.WriteString(indent + nd.ID + " <- [" + strings.Join(nd.Deps, " ") + "] " + string(nd.Kind) + " " + nd.Role + " " + strings.Join(nd.Tools, ",") + "\n")
			if nd.Team != nil {
				walk(*nd.Team, indent+"  ")
			}
		}
	}
	walk(p, "")
	return b.String()
}

func TestWavesFrom(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		plan  messages.Plan
		fixed map[string]int
		from  int
		want  [][]string
	}{
		{"no plan", plan(), nil, 0, nil},
		{"like Waves", plan(n("d", "b", "c"), n("c", "a"), n("b", "a"), n("a"), n("e")), nil, 0,
			[][]string{{"a", "e"}, {"b", "c"}, {"d"}}},
		{"new roots start at from", plan(n("a"), n("b", "a"), n("c", "b"), n("d"), n("e")), map[string]int{"a": 0, "d": 0}, 1,
			[][]string{{"a", "d"}, {"b", "e"}, {"c"}}},
		{"after fixed deps but not before from", plan(n("a"), n("b", "a"), n("x", "a"), n("y", "b", "x")), map[string]int{"a": 0, "b": 1}, 2,
			[][]string{{"a"}, {"b"}, {"x"}, {"y"}}},
		{"fixed keep waves their deps would not give", plan(n("a"), n("b"), n("c", "b")), map[string]int{"a": 0, "b": 1}, 2,
			[][]string{{"a"}, {"b"}, {"c"}}},
		{"unknown and negative fixed ignored", plan(n("a"), n("b", "a")), map[string]int{"zz": 0, "a": -1}, 0,
			[][]string{{"a"}, {"b"}}},
		{"empty waves before from kept", plan(n("a"), n("b", "a")), nil, 2,
			[][]string{nil, nil, {"a"}, {"b"}}},
		// fixed is meant to hold waves below from only; a fixed node at or
		// after from moves down to close the gap, never below from.
		{"gap from from on closed", plan(n("a"), n("b", "a"), n("c")), map[string]int{"a": 4}, 1,
			[][]string{nil, {"c"}, {"a"}, {"b"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := dag.WavesFrom(tt.plan, tt.fixed, tt.from); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("WavesFrom = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestQualify(t *testing.T) {
	t.Parallel()
	p := plan(n("a"), team("t", plan(n("a"), n("b", "a")), "a"), n("c", "t", "a"))
	before := p.Clone()
	got := dag.Qualify("u/v", p)
	want := plan(n("u/v/a"), team("u/v/t", plan(n("a"), n("b", "a")), "u/v/a"), n("u/v/c", "u/v/t", "u/v/a"))
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Qualify =\n%s\nwant\n%s", show(got), show(want))
	}
	scribble(&got)
	if !reflect.DeepEqual(p, before) {
		t.Fatal("Qualify's result shares memory with its input")
	}
}

func TestCountAgents(t *testing.T) {
	t.Parallel()
	judged := debate("j", 3, 2)
	judged.Debate.Judge = true
	tests := []struct {
		name string
		plan messages.Plan
		want int
	}{
		{"leaves", plan(n("a"), n("b", "a")), 2},
		{"team", plan(team("t", plan(n("a"), n("b")))), 3},
		{"nested teams", plan(n("a"), team("t", plan(team("u", plan(n("x"))), n("y")))), 1 + 1 + (1 + 1) + 1},
		{"debate", plan(debate("d", 2, 3)), 2*3 + 1},
		{"judged debate", plan(judged), 3*2 + 2 + 1},
		{"debate in team", plan(team("t", plan(debate("d", 4, 5)))), 1 + 4*5 + 1},
	}
	for _, tt := range tests {
		if got := dag.CountAgents(tt.plan); got != tt.want {
			t.Errorf("%s: CountAgents = %d, want %d", tt.name, got, tt.want)
		}
	}
}
