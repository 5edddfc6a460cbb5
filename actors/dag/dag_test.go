package dag_test

import (
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/conclave-ai/conclave/actors/dag"
	"github.com/conclave-ai/conclave/messages"
)

func plan(nodes ...messages.PlanNode) messages.Plan { return messages.Plan{Nodes: nodes} }
func n(id string, deps ...string) messages.PlanNode {
	return messages.PlanNode{ID: id, Goal: "g", Deps: deps}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		plan messages.Plan
		want string // substring of the error; "" = valid
	}{
		{"valid diamond", plan(n("a"), n("b", "a"), n("c", "a"), n("d", "b", "c")), ""},
		{"empty", plan(), "no nodes"},
		{"empty id", plan(n("")), "empty id"},
		{"duplicate id", plan(n("a"), n("a")), `duplicate node id "a"`},
		{"unknown dep", plan(n("a", "zz")), `unknown node "zz"`},
		{"self dep", plan(n("a", "a")), "depends on itself"},
		{"dup dep", plan(n("a"), n("b", "a", "a")), "twice"},
		{"cycle", plan(n("a", "c"), n("b", "a"), n("c", "b")), "cycle"},
		{"too many nodes", chain(dag.MaxNodes + 1), "plan has 100001 nodes, more than 100000"},
		{"slash in id", plan(n("a/b")), `node id "a/b" contains '/'`},
		{"unknown kind", plan(kind(n("a"), "robot")), `node "a" has unknown kind "robot"`},
		{"explicit leaf", plan(kind(n("a"), messages.KindLeaf)), ""},
		// Teams.
		{"valid team", plan(n("a"), team("t", plan(n("a"), n("b", "a")), "a"), n("c", "t")), ""},
		{"team without plan", plan(kind(n("t"), messages.KindTeam)), `team node "t" has no team plan`},
		{"empty team", plan(team("t", plan())), `team "t": plan has no nodes`},
		{"leaf with team", plan(withTeam(n("a"), plan(n("x")))), `node "a" is not a team node but has a team plan`},
		{"debate with team", plan(withTeam(debate("d", 2, 1), plan(n("x")))), `node "d" is not a team node`},
		{"team dep outside", plan(n("y"), team("t1", plan(n("x", "y")))), `team "t1": node "x" depends on unknown node "y"`},
		{"team dup id", plan(team("t1", plan(n("x"), n("x")))), `team "t1": duplicate node id "x"`},
		{"team cycle", plan(team("t1", plan(n("x", "y"), n("y", "x")))), `team "t1": dependency cycle`},
		{"team slash id", plan(team("t1", plan(n("x/y")))), `team "t1": node id "x/y" contains '/'`},
		{"team size limit", plan(team("t", chain(dag.MaxTeamSize))), ""},
		{"team too big", plan(team("t", chain(dag.MaxTeamSize+1))), `team "t": plan has 17 nodes, more than 16`},
		{"nested team path", plan(team("t1", plan(team("t2", plan(n("x", "zz")))))), `team "t1/t2": node "x" depends on unknown node "zz"`},
		{"depth 3", plan(nest(3)), ""},
		{"depth 4", plan(nest(4)), `team node "t4" is nested 4 deep, more than 3`},
		{"total nodes", plan(wide(dag.MaxNodes/dag.MaxTeamSize + 1)...), "nodes over all its teams, more than 100000"},
		// Debates.
		{"valid debate", plan(n("a"), dep(debate("d", 4, 5), "a")), ""},
		{"debate without settings", plan(kind(n("d"), messages.KindDebate)), `debate node "d" has no debate settings`},
		{"leaf with debate", plan(withDebate(n("a"), debate("x", 2, 1).Debate)), `node "a" is not a debate node but has debate settings`},
		{"team with debate", plan(withDebate(team("t", plan(n("x"))), debate("x", 2, 1).Debate)), `node "t" is not a debate node`},
		{"one agent", plan(debate("d", 1, 1)), `debate node "d" has 1 agents, want 2..4`},
		{"five agents", plan(debate("d", 5, 1)), `has 5 agents, want 2..4`},
		{"zero rounds", plan(debate("d", 2, 0)), `rounds 0 not in 1..5`},
		{"six rounds", plan(debate("d", 2, 6)), `rounds 6 not in 1..5`},
		{"empty agent id", plan(agents(debate("d", 2, 1), "", "b")), `agent with an empty id`},
		{"dup agent id", plan(agents(debate("d", 2, 1), "a", "a")), `duplicate agent id "a"`},
		{"slash agent id", plan(agents(debate("d", 2, 1), "a/b", "c")), `agent id "a/b" contains '/'`},
		{"min rounds above rounds", plan(tweak(debate("d", 2, 2), func(c *messages.DebateConfig) { c.MinRounds = 3 })), `min_rounds 3 not in 0..2`},
		{"min rounds negative", plan(tweak(debate("d", 2, 2), func(c *messages.DebateConfig) { c.MinRounds = -1 })), `min_rounds -1`},
		{"min rounds = rounds", plan(tweak(debate("d", 2, 2), func(c *messages.DebateConfig) { c.MinRounds = 2 })), ""},
		{"compact after 5", plan(tweak(debate("d", 2, 2), func(c *messages.DebateConfig) { c.CompactAfter = 5 })), ""},
		{"compact after 6", plan(tweak(debate("d", 2, 2), func(c *messages.DebateConfig) { c.CompactAfter = 6 })), `compact_after 6 not in 0..5`},
		{"debate in team", plan(team("t", plan(debate("d", 2, 9)))), `team "t": debate node "d": rounds 9`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := dag.Validate(tt.plan)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Validate = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, dag.ErrInvalidPlan) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate = %v, want ErrInvalidPlan containing %q", err, tt.want)
			}
		})
	}
}

func TestValidate_ReportsAll(t *testing.T) {
	t.Parallel()
	err := dag.Validate(plan(n("a/b"), team("t", plan(n("x", "y"))), debate("d", 1, 1)))
	for _, want := range []string{`"a/b" contains '/'`, `team "t": node "x" depends on unknown node "y"`, `has 1 agents`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate = %v, want it to contain %q", err, want)
		}
	}
}

// Plan builders for the tests of this package.

func kind(nd messages.PlanNode, k messages.NodeKind) messages.PlanNode { nd.Kind = k; return nd }

func withTeam(nd messages.PlanNode, p messages.Plan) messages.PlanNode { nd.Team = &p; return nd }

func withDebate(nd messages.PlanNode, c *messages.DebateConfig) messages.PlanNode {
	nd.Debate = c
	return nd
}

func dep(nd messages.PlanNode, deps ...string) messages.PlanNode { nd.Deps = deps; return nd }

// team is a team node id running p.
func team(id string, p messages.Plan, deps ...string) messages.PlanNode {
	return withTeam(kind(n(id, deps...), messages.KindTeam), p)
}

// debate is a debate node with agents a0, a1, … arguing rounds rounds.
func debate(id string, agents, rounds int) messages.PlanNode {
	c := &messages.DebateConfig{Rounds: rounds}
	for i := range agents {
		c.Agents = append(c.Agents, messages.DebateAgent{ID: "a" + itoa(i)})
	}
	return withDebate(kind(n(id), messages.KindDebate), c)
}

// agents renames a debate node's agents.
func agents(nd messages.PlanNode, ids ...string) messages.PlanNode {
	nd.Debate.Agents = nil
	for _, id := range ids {
		nd.Debate.Agents = append(nd.Debate.Agents, messages.DebateAgent{ID: id})
	}
	return nd
}

func tweak(nd messages.PlanNode, f func(*messages.DebateConfig)) messages.PlanNode {
	f(nd.Debate)
	return nd
}

// chain is the plan x0 <- x1 <- ... of size nodes.
func chain(size int) messages.Plan {
	p := plan(n("x0"))
	for i := 1; i < size; i++ {
		p.Nodes = append(p.Nodes, n("x"+itoa(i), "x"+itoa(i-1)))
	}
	return p
}

// nest is team t1 holding team t2 … holding team t<depth> holding a leaf.
func nest(depth int) messages.PlanNode {
	nd := n("leaf")
	for d := depth; d >= 1; d-- {
		nd = team("t"+itoa(d), plan(nd))
	}
	return nd
}

// wide is count team nodes of MaxTeamSize leaves each.
func wide(count int) []messages.PlanNode {
	nodes := make([]messages.PlanNode, count)
	inner := make([]messages.PlanNode, dag.MaxTeamSize)
	for i := range inner {
		inner[i] = n("x" + itoa(i))
	}
	for i := range nodes {
		nodes[i] = team("t"+itoa(i), plan(inner...))
	}
	return nodes
}

func TestValidate_LongChainNoStackBlowup(t *testing.T) {
	t.Parallel()
	nodes := []messages.PlanNode{n("x0")}
	for i := 1; i < 50000; i++ {
		nodes = append(nodes, n("x"+itoa(i), "x"+itoa(i-1)))
	}
	if err := dag.Validate(plan(nodes...)); err != nil {
		t.Fatal(err)
	}
	if w := dag.Waves(plan(nodes...)); len(w) != 50000 {
		t.Fatalf("waves = %d, want 50000", len(w))
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

func TestWaves(t *testing.T) {
	t.Parallel()
	got := dag.Waves(plan(n("d", "b", "c"), n("c", "a"), n("b", "a"), n("a"), n("e")))
	want := [][]string{{"a", "e"}, {"b", "c"}, {"d"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Waves = %v, want %v", got, want)
	}
}

func TestDownstream(t *testing.T) {
	t.Parallel()
	p := plan(n("a"), n("b", "a"), n("c", "b"), n("d"))
	got := dag.Downstream(p, "a")
	if !reflect.DeepEqual(got, map[string]bool{"b": true, "c": true}) {
		t.Fatalf("Downstream(a) = %v", got)
	}
}
