package agui

import (
	"strconv"
	"strings"

	"github.com/conclave-ai/conclave/messages"
)

// Graph is the AG-UI agent state of a run: Conclave's task graph. It is
// sent whole as STATE_SNAPSHOT when an AG-UI run begins, when a plan is
// proposed or an edited plan approved, and before an interrupting
// RUN_FINISHED; every other change is a STATE_DELTA (RFC 6902 replace).
//
//	{"runId":"…","status":"running","wave":1,"waves":[["n001","n002"],["n003"]],
//	 "nodes":{"n001":{"goal":"…","deps":[],"wave":0,"status":"completed"},…}}
type Graph struct {
	RunID messages.RunID `json:"runId"`
	// Status is the run's status (messages.RunStatus values).
	Status messages.RunStatus `json:"status"`
	// Wave is the current (or last) wave, -1 before the first.
	Wave  int                   `json:"wave"`
	Waves [][]string            `json:"waves"`
	Nodes map[string]*GraphNode `json:"nodes"`
}

// GraphNode is one plan node in the state.
type GraphNode struct {
	Goal   string   `json:"goal"`
	Deps   []string `json:"deps"`
	Wave   int      `json:"wave"`
	Status string   `json:"status"`
}

// Node statuses in the state.
const (
	NodePending          = "pending"
	NodeAwaitingApproval = "awaiting_approval"
	NodeRunning          = "running"
	NodeCompleted        = "completed"
	NodeFailed           = "failed"
	NodeCancelled        = "cancelled"
	NodeSkipped          = "skipped"
)

func newGraph(run messages.RunID) Graph {
	return Graph{RunID: run, Status: messages.StatusPlanning, Wave: -1, Waves: [][]string{}, Nodes: map[string]*GraphNode{}}
}

// setPlan replaces the graph's plan; every node becomes pending.
func (g *Graph) setPlan(p messages.Plan, waves [][]string) {
	g.Nodes = make(map[string]*GraphNode, len(p.Nodes))
	for _, n := range p.Nodes {
		deps := n.Deps
		if deps == nil {
			deps = []string{}
		}
		g.Nodes[n.ID] = &GraphNode{Goal: n.Goal, Deps: deps, Wave: -1, Status: NodePending}
	}
	g.Waves = make([][]string, 0, len(waves))
	for i, w := range waves {
		ids := w
		if ids == nil {
			ids = []string{}
		}
		g.Waves = append(g.Waves, ids)
		for _, id := range w {
			if n := g.Nodes[id]; n != nil {
				n.Wave = i
			}
		}
	}
}

func (g *Graph) clone() Graph {
	c := *g
	c.Waves = append([][]string(nil), g.Waves...) // the inner slices are never modified
	c.Nodes = make(map[string]*GraphNode, len(g.Nodes))
	for id, n := range g.Nodes {
		cp := *n
		c.Nodes[id] = &cp
	}
	return c
}

// setNodeStatus records a node's status and returns the patch for it, or
// false when the node is not in the plan (the client's state has no such
// path, so a patch would fail there).
func (g *Graph) setNodeStatus(id, status string) (PatchOp, bool) {
	n := g.Nodes[id]
	if n == nil {
		return PatchOp{}, false
	}
	n.Status = status
	return PatchOp{Op: "replace", Path: "/nodes/" + pointerToken(id) + "/status", Value: status}, true
}

func (g *Graph) setStatus(s messages.RunStatus) PatchOp {
	g.Status = s
	return PatchOp{Op: "replace", Path: "/status", Value: s}
}

func (g *Graph) setWave(w int) PatchOp {
	g.Wave = w
	return PatchOp{Op: "replace", Path: "/wave", Value: w}
}

// pointerToken escapes s as one RFC 6901 reference token.
func pointerToken(s string) string {
	if !strings.ContainsAny(s, "~/") {
		return s
	}
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

func waveStep(w int) string { return "wave " + strconv.Itoa(w) }
