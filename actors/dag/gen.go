package dag

import (
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/conclave-ai/conclave/messages"
)

// GenOptions shapes the plans RandomPlan generates. The zero value gives a
// plan of 8 leaves in 3 waves.
type GenOptions struct {
	// Nodes is the number of top-level nodes: 8 when 0, at most MaxNodes.
	Nodes int
	// Waves is the number of top-level waves: 3 when 0, at most Nodes.
	Waves int
	// TeamProb is the probability (0..1) that a node is a team node, at
	// every level where a team stays within MaxDepth. Team plans have 1 to
	// 4 nodes.
	TeamProb float64
	// DebateProb is the probability (0..1) that a node that is not a team
	// is a debate node.
	DebateProb float64
	// MaxDepth bounds team nesting (a team node of the top-level plan is at
	// depth 1): MaxTeamDepth when 0 or larger.
	MaxDepth int
}

// RandomPlan returns a random valid plan, for property tests: it passes
// Validate, and Waves puts its top-level nodes in exactly opts.Waves waves
// (a node of wave w > 0 depends on a node of wave w-1 and maybe on earlier
// ones). Node order is shuffled. Ids are n0, n1, … at every level (they
// only need to be unique within one), debate agents a0, a1, …. The same r
// and opts give the same plan.
func RandomPlan(r *rand.Rand, opts GenOptions) messages.Plan {
	nodes := opts.Nodes
	if nodes <= 0 {
		nodes = 8
	}
	nodes = min(nodes, MaxNodes)
	waves := opts.Waves
	if waves <= 0 {
		waves = 3
	}
	waves = min(waves, nodes)
	if opts.MaxDepth <= 0 || opts.MaxDepth > MaxTeamDepth {
		opts.MaxDepth = MaxTeamDepth
	}
	g := generator{r: r, opts: opts, budget: MaxNodes - nodes}
	return g.plan(nodes, waves, 1)
}

// generator carries RandomPlan's state.
type generator struct {
	r      *rand.Rand
	opts   GenOptions
	budget int // nodes teams may still add without passing MaxNodes in all
}

// plan generates one level of size nodes in waves waves, whose team nodes
// are at the given depth.
func (g *generator) plan(size, waves, depth int) messages.Plan {
	r := g.r
	byWave := make([][]string, waves)
	nodes := make([]messages.PlanNode, size)
	for i := range nodes {
		w := i // the first waves nodes open one wave each
		if i >= waves {
			w = r.IntN(waves)
		}
		n := g.node(fmt.Sprintf("n%d", i), depth)
		if w > 0 {
			prev := byWave[w-1]
			n.Deps = append(n.Deps, prev[r.IntN(len(prev))])
			for range r.IntN(3) { // a few more, from any earlier wave
				earlier := byWave[r.IntN(w)]
				if d := earlier[r.IntN(len(earlier))]; !slices.Contains(n.Deps, d) {
					n.Deps = append(n.Deps, d)
				}
			}
		}
		byWave[w] = append(byWave[w], n.ID)
		nodes[i] = n
	}
	r.Shuffle(len(nodes), func(i, j int) { nodes[i], nodes[j] = nodes[j], nodes[i] })
	return messages.Plan{Nodes: nodes}
}

// node generates one node without dependencies, of a random kind.
func (g *generator) node(id string, depth int) messages.PlanNode {
	r := g.r
	n := messages.PlanNode{ID: id, Goal: "goal of " + id}
	if r.IntN(4) == 0 {
		n.Role = "role " + id
	}
	if r.IntN(4) == 0 {
		n.Tools = []string{"search"}
	}
	size := 1 + r.IntN(4)
	switch {
	case depth <= g.opts.MaxDepth && size <= g.budget && r.Float64() < g.opts.TeamProb:
		g.budget -= size
		n.Kind = messages.KindTeam
		team := g.plan(size, 1+r.IntN(size), depth+1)
		n.Team = &team
	case r.Float64() < g.opts.DebateProb:
		n.Kind = messages.KindDebate
		d := &messages.DebateConfig{
			Agents:       make([]messages.DebateAgent, 2+r.IntN(messages.MaxDebateAgents-1)),
			Rounds:       1 + r.IntN(messages.MaxDebateRounds),
			Judge:        r.IntN(2) == 0,
			CompactAfter: r.IntN(messages.MaxDebateRounds + 1),
		}
		d.MinRounds = r.IntN(d.Rounds + 1)
		for i := range d.Agents {
			d.Agents[i] = messages.DebateAgent{ID: fmt.Sprintf("a%d", i), Persona: "persona"}
		}
		n.Debate = d
	case r.IntN(2) == 0:
		n.Kind = messages.KindLeaf
	}
	return n
}
