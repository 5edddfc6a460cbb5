package dag_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/conclave-ai/conclave/actors/dag"
	"github.com/conclave-ai/conclave/messages"
)

// randomOptions draws GenOptions for a small plan.
func randomOptions(r *rand.Rand) dag.GenOptions {
	nodes := 1 + r.IntN(30)
	return dag.GenOptions{
		Nodes:      nodes,
		Waves:      1 + r.IntN(nodes),
		TeamProb:   r.Float64() * 0.4,
		DebateProb: r.Float64() * 0.4,
		MaxDepth:   r.IntN(dag.MaxTeamDepth + 1),
	}
}

// TestRandomPlan_ValidAndLevelled: random plans with teams (nested up to
// MaxTeamDepth) and debates pass Validate, have the number of waves asked
// for, and Waves puts every node one wave after its latest dependency, at
// every level.
func TestRandomPlan_ValidAndLevelled(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	var teams, debates, deepest int
	for i := range 500 {
		opts := randomOptions(r)
		seed := r.Uint64()
		p := dag.RandomPlan(rand.New(rand.NewPCG(seed, 0)), opts)
		if again := dag.RandomPlan(rand.New(rand.NewPCG(seed, 0)), opts); !reflect.DeepEqual(p, again) {
			t.Fatalf("iteration %d: RandomPlan is not deterministic", i)
		}
		if err := dag.Validate(p); err != nil {
			t.Fatalf("iteration %d: %+v: Validate: %v\n%s", i, opts, err, show(p))
		}
		if got := len(dag.Waves(p)); got != opts.Waves {
			t.Fatalf("iteration %d: %d waves, want %d\n%s", i, got, opts.Waves, show(p))
		}
		var walk func(p messages.Plan, depth int)
		walk = func(p messages.Plan, depth int) {
			checkLevelled(t, p)
			for _, nd := range p.Nodes {
				switch {
				case nd.IsTeam():
					teams++
					deepest = max(deepest, depth)
					walk(*nd.Team, depth+1)
				case nd.IsDebate():
					debates++
				}
			}
		}
		walk(p, 1)
	}
	// The generator must actually produce what the property is about.
	if teams < 100 || debates < 100 || deepest != dag.MaxTeamDepth {
		t.Fatalf("generated %d teams (deepest at depth %d) and %d debates; want more", teams, deepest, debates)
	}
}

// checkLevelled checks Waves(p) against its definition and against
// WavesFrom(p, nil, 0).
func checkLevelled(t *testing.T, p messages.Plan) {
	t.Helper()
	waves := dag.Waves(p)
	if from := dag.WavesFrom(p, nil, 0); !reflect.DeepEqual(waves, from) {
		t.Fatalf("Waves = %q, WavesFrom(p, nil, 0) = %q", waves, from)
	}
	wave := waveOf(t, p, waves)
	for _, nd := range p.Nodes {
		want := 0
		for _, d := range nd.Deps {
			want = max(want, wave[d]+1)
		}
		if wave[nd.ID] != want {
			t.Fatalf("node %q is in wave %d, want %d\n%s", nd.ID, wave[nd.ID], want, show(p))
		}
	}
}

// waveOf maps each node to its wave, checking that waves hold every node of
// p exactly once, sorted.
func waveOf(t *testing.T, p messages.Plan, waves [][]string) map[string]int {
	t.Helper()
	wave := make(map[string]int, len(p.Nodes))
	for i, w := range waves {
		if !slices.IsSorted(w) {
			t.Fatalf("wave %d %q is not sorted", i, w)
		}
		for _, id := range w {
			if _, dup := wave[id]; dup {
				t.Fatalf("node %q is in two waves", id)
			}
			wave[id] = i
		}
	}
	if len(wave) != len(p.Nodes) {
		t.Fatalf("waves %q hold %d nodes, the plan %d", waves, len(wave), len(p.Nodes))
	}
	return wave
}

// TestApply_RandomDiffs: random diffs, plausible and garbage, applied to
// random valid plans at a random wave boundary with a random frozen set
// either fail with ErrInvalidDiff and leave the plan alone, or give a valid
// plan that keeps every frozen node as it was and that WavesFrom schedules
// without moving what has run.
func TestApply_RandomDiffs(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 4))
	applied := make(map[messages.DiffOpKind]int)
	var ok int
	const iterations = 500
	for i := range iterations {
		p := dag.RandomPlan(r, randomOptions(r))
		before := p.Clone()
		waves := dag.Waves(p)
		from := r.IntN(len(waves) + 1)
		fixed := make(map[string]int)
		frozen := make(map[string]bool)
		for w, ids := range waves {
			for _, id := range ids {
				switch {
				case w < from:
					fixed[id], frozen[id] = w, true
				case w == from && r.IntN(4) == 0: // started
					frozen[id] = true
				case r.IntN(6) == 0: // not a state a run reaches; Apply must cope anyway
					frozen[id] = true
				}
			}
		}
		d := randomDiff(r, p, frozen)
		got, err := dag.Apply(p, d, func(id string) bool { return frozen[id] })
		if !reflect.DeepEqual(p, before) {
			t.Fatalf("iteration %d: Apply modified its input", i)
		}
		if err != nil {
			if !errors.Is(err, dag.ErrInvalidDiff) {
				t.Fatalf("iteration %d: Apply error %v does not wrap ErrInvalidDiff", i, err)
			}
			if !reflect.DeepEqual(got, messages.Plan{}) {
				t.Fatalf("iteration %d: Apply returned a plan with its error", i)
			}
			continue
		}
		ok++
		for _, op := range d.Ops {
			applied[op.Op]++
		}
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("iteration %d: %s\nplan:\n%s\ndiff: %+v\nfrozen: %v, from: %d\nresult:\n%s",
				i, fmt.Sprintf(format, args...), show(p), d.Ops, frozen, from, show(got))
		}
		if err := dag.Validate(got); err != nil {
			fail("the result does not validate: %v", err)
		}
		for _, nd := range p.Nodes {
			if !frozen[nd.ID] {
				continue
			}
			k := slices.IndexFunc(got.Nodes, func(g messages.PlanNode) bool { return g.ID == nd.ID })
			if k < 0 || !reflect.DeepEqual(got.Nodes[k], nd) {
				fail("frozen node %q changed", nd.ID)
			}
		}
		ws := dag.WavesFrom(got, fixed, from)
		wave := waveOf(t, got, ws)
		for k := from; k < len(ws); k++ {
			if len(ws[k]) == 0 {
				fail("wave %d of %q is empty", k, ws)
			}
		}
		for _, nd := range got.Nodes {
			if w, isFixed := fixed[nd.ID]; isFixed {
				if wave[nd.ID] != w {
					fail("fixed node %q moved from wave %d to %d", nd.ID, w, wave[nd.ID])
				}
				continue
			}
			if wave[nd.ID] < from {
				fail("node %q is in wave %d, before %d", nd.ID, wave[nd.ID], from)
			}
			for _, dep := range nd.Deps {
				if wave[dep] >= wave[nd.ID] {
					fail("node %q (wave %d) runs no later than its dependency %q (wave %d)", nd.ID, wave[nd.ID], dep, wave[dep])
				}
			}
		}
		scribble(&got)
		if !reflect.DeepEqual(p, before) {
			t.Fatalf("iteration %d: Apply's result shares memory with its input", i)
		}
	}
	t.Logf("%d of %d diffs applied; operations applied: %v", ok, iterations, applied)
	// Both outcomes, and every operation, must be exercised.
	if ok < iterations/5 || ok > iterations*4/5 {
		t.Fatalf("%d of %d diffs applied; the generator needs rebalancing", ok, iterations)
	}
	for kind := range diffOpKinds {
		if applied[kind] < 10 {
			t.Fatalf("%s applied %d times; want at least 10 (all: %v)", kind, applied[kind], applied)
		}
	}
}

// diffOpKinds are the operations randomDiff draws from.
var diffOpKinds = map[messages.DiffOpKind]bool{
	messages.OpAddNode: true, messages.OpRemoveNode: true, messages.OpSplitNode: true, messages.OpRerouteEdge: true,
	messages.OpSetRole: true, messages.OpSetTools: true, messages.OpWrapInTeam: true,
}

// randomDiff returns a diff of 1 to 3 operations (rarely none) for p: mostly
// plausible (changing nodes that exist and are not frozen, fresh ids for
// new ones), sometimes not (unknown ids, frozen nodes, ids taken, fields of
// other operations, unknown operations).
func randomDiff(r *rand.Rand, p messages.Plan, frozen map[string]bool) messages.GraphDiff {
	ids := make([]string, 0, len(p.Nodes))
	deps := make(map[string][]string, len(p.Nodes))
	for _, nd := range p.Nodes {
		ids = append(ids, nd.ID)
		deps[nd.ID] = nd.Deps
	}
	fresh := 0
	newID := func() string {
		fresh++
		if r.IntN(20) == 0 {
			return ids[r.IntN(len(ids))] // taken, most likely
		}
		return fmt.Sprintf("new%d", fresh)
	}
	pick := func() string {
		if r.IntN(30) == 0 || len(ids) == 0 {
			return "zz"
		}
		return ids[r.IntN(len(ids))]
	}
	// target picks a node to change: one that is not frozen, mostly.
	target := func() string {
		for range 5 {
			if id := pick(); !frozen[id] || r.IntN(10) == 0 {
				return id
			}
		}
		return pick()
	}
	someDeps := func() []string {
		var out []string
		for range r.IntN(3) {
			if d := pick(); !slices.Contains(out, d) {
				out = append(out, d)
			}
		}
		return out
	}
	newNode := func() messages.PlanNode {
		nd := messages.PlanNode{Goal: "new"}
		if r.IntN(5) == 0 { // a team or debate node
			q := dag.RandomPlan(r, dag.GenOptions{Nodes: 2, Waves: 1, TeamProb: 0.5, DebateProb: 0.5, MaxDepth: 2})
			nd = q.Nodes[0]
		}
		nd.ID, nd.Deps = newID(), someDeps()
		return nd
	}
	var d messages.GraphDiff
	count := 1 + r.IntN(3)
	if r.IntN(25) == 0 {
		count = 0
	}
	for range count {
		var op messages.DiffOp
		switch r.IntN(20) {
		case 0:
			nd := newNode()
			op = messages.DiffOp{Op: messages.OpAddNode, Node: &nd}
			ids = append(ids, nd.ID)
			deps[nd.ID] = nd.Deps
		case 1:
			op = messages.DiffOp{Op: messages.OpRemoveNode, NodeID: target()}
		case 2, 8, 9:
			op = messages.DiffOp{Op: messages.OpSplitNode, NodeID: target()}
			parts := 2 + r.IntN(2)
			if r.IntN(10) == 0 {
				parts = 1
			}
			for range parts {
				nd := newNode()
				nd.Deps = nd.Deps[:min(len(nd.Deps), 1)]
				op.Into = append(op.Into, nd)
				ids = append(ids, nd.ID)
			}
		case 3, 10, 11:
			to := target()
			from := pick()
			if ds := deps[to]; len(ds) > 0 && r.IntN(5) > 0 {
				from = ds[r.IntN(len(ds))]
			}
			op = messages.DiffOp{Op: messages.OpRerouteEdge, From: from, To: to, NewFrom: pick()}
		case 4:
			op = messages.DiffOp{Op: messages.OpSetRole, NodeID: target(), Role: "critic"}
		case 5:
			op = messages.DiffOp{Op: messages.OpSetTools, NodeID: target(), Tools: []string{"search", "fetch"}[:r.IntN(3)]}
		case 6, 12, 13, 14:
			op = messages.DiffOp{Op: messages.OpWrapInTeam, TeamID: newID(), Goal: "team"}
			for range 1 + r.IntN(3) {
				if id := target(); !slices.Contains(op.NodeIDs, id) {
					op.NodeIDs = append(op.NodeIDs, id)
				}
			}
			ids = append(ids, op.TeamID)
		case 7: // garbage
			op = messages.DiffOp{Op: "rename_node", NodeID: pick()}
			if r.IntN(2) == 0 {
				op = messages.DiffOp{Op: messages.OpRemoveNode, NodeID: pick(), Goal: "stray"}
			}
		default: // add_node again: it fails the least
			nd := newNode()
			op = messages.DiffOp{Op: messages.OpAddNode, Node: &nd}
			ids = append(ids, nd.ID)
			deps[nd.ID] = nd.Deps
		}
		d.Ops = append(d.Ops, op)
	}
	return d
}
